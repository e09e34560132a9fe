// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The debouncer's protocol (issue 11): what to send the policy server, when, and what to do when
// it is away. Pure logic: no CAF, no timers, no clock of its own. The shell (debouncer_actor.cpp)
// feeds it what arrived, with the time it arrived at, and executes the actions it returns (send a
// unit, arm a timer with a generation, ask a decoder for a re-report, answer drains, log).
// One instance owns one replica's stream of units: a pipeline's, or in merged DP mode the whole
// replica's (every rank feeds the same instance, tagged with its rank; rank 0 otherwise).
//
// Flushing
//  DB1. Pending changes are coalesced to their final state per (adapter, fingerprint)
//       (pending_set). An op from an epoch older than its rank's is dropped (stale: a clear
//       superseded it); one from a newer epoch means its clear notice is behind it: clear first.
//  DB2. A flush becomes due when the window (armed by the first pending add) elapses, pending adds
//       reach flush_threshold, anything but adds is pending (evictions and downgrades never wait
//       for the window), a clear is pending, or a drain asked. In L2 mode a batch holding removals
//       first flushes the adds before it (L08: the history is [T1, T2]); otherwise an add and its
//       own later eviction simply coalesce (U1 sends a unit's adds before its evictions anyway).
//  DB3. Credits: at most max_units_in_flight units are with the emitter. A due flush without a
//       credit waits for the next answer; meanwhile pending keeps coalescing (that is the batching
//       under load). A unit carries at most max_adds_per_unit adds; the rest stay pending.
//  DB4. No emitter yet (merged mode, before rank 0's data path joined): nothing is taken.
//
// Never send what the server never saw (issue 13, with pending_set's rules)
//  DB5. A pending add marked `introduces` and its eviction are both dropped. After an engine clear
//       (or the start's) the index is cleared too, so every later add introduces its key: DB5 alone
//       covers what follows a clear; only a resync, which clears the server but not the index,
//       needs DB6.
//  DB6. From a resync's acknowledged clear until every decoder's re-report has arrived (a drain
//       barrier per rank), an eviction of a key not sent since the clear is dropped. Merged mode
//       needs no window: the holder set, forgotten at the clear, drops a rank's eviction of a key
//       it has not re-reported, for good.
//
// Server health, outage and resync
//  DB7. A failed unit marks the server unhealthy (one WARN; later failures are counted and
//       summarised at most once per 10 s). While it is unhealthy, or a resync's probe is pending,
//       no unit goes out but the probe: a unit that is only an ALL_CLEARED. What arrives meanwhile
//       is superseded by the re-report and dropped (counted), except L2 downgrades, which the
//       re-report cannot know of; so memory stays bounded by the pending bound and, in practice, by
//       nothing at all.
//  DB8. The probe goes after a jittered backoff (resync_backoff_initial doubling to _max) and again
//       after each failure. A reconnect notice while unhealthy probes at once.
//  DB9. The probe's success: the server is healthy and empty; pending is dropped but for downgrades
//       (the server never held it, or it is stale); merged mode forgets the holder set; every known
//       decoder is asked to re-report (DB6 runs until their barriers answer); the backoff starts
//       over.
//  DB10. Units taken before a failure are lost when they fail (the emitter fails queued units after
//        a failure until a clear arrives, contract U3); the resync repairs them. An emitter
//        replaced while units were in flight loses them the same way: unhealthy, resync.
//  DB11. Pending over its bound: it is dropped (it is only a copy of what the shards hold) and a
//        resync starts.
//
// Reconnect and refresh
//  DB12. A reconnect notice (the transport was lost and is back; the server may have restarted
//        empty) starts a resync, at most one per reconnect_resync_interval (5 s): a notice within
//        it defers one resync to the interval's end.
//  DB13. Every refresh_interval, when healthy and no resync runs, every decoder re-reports (no
//        clear) so long-lived prefixes never reach the server's TTL.
//
// Clears and merged DP mode
//  DB14. One rank (a pipeline): start_with_clear queues an ALL_CLEARED at once; a clear (engine
//        AllBlocksCleared, lost history) supersedes pending and heads the next unit.
//  DB15. Merged: the instance is the replica's only owner of the holder set (which ranks hold each
//        key). An add reaches the server when its rank is the key's first holder (or its only one:
//        a tier change); an eviction when its rank was the last. A rank's clear, or its data path
//        restarting (rank_started), releases what that rank held: evictions of the keys no other
//        rank holds. Only the replica's start clears the server.
//
// Drain (shutdown)
//  DB16. With shutdown_clear, pending is dropped and the last unit is an ALL_CLEARED (sent whatever
//        the health: it is also a probe); ops after it are dropped. The answer: it was
//        acknowledged.
//  DB17. Without, every flush is due at once; the answer: nothing pending, no unit or re-report
//        outstanding, and every unit acknowledged. While the server is unhealthy nothing can be
//        delivered: the answer is false at once.
//
// rpc evictions and LoRA partitions
//  DB18. With repair_base_sweeps, every unit passes through sweep_repair before it is sent: the
//        adapter keys a base-model PREFIX_EVICTED sweeps from the server ride in the unit as its
//        restores (U5), sent after its evictions.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/debouncer/holder_set.hpp"
#include "actors/debouncer/pending_set.hpp"
#include "actors/debouncer/sweep_repair.hpp"
#include "base/backoff.hpp"
#include "base/log.hpp"
#include "base/rate_limiter.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay::debounce {

using ms = std::chrono::milliseconds;

enum class readiness_policy : uint8_t { any, all, quorum };

struct options {
  ms window{100};                       // R04: ≤ 0 is clamped to 100 ms by config
  size_t flush_threshold = 4096;        // pending adds that force a flush (R13)
  bool l2_mode = false;                 // --ignore-block-removed
  size_t max_pending = 2'000'000;       // distinct keys held (DB11)
  size_t max_adds_per_unit = 16384;
  size_t max_units_in_flight = 2;       // credits toward the emitter
  ms refresh_interval{10 * 60 * 1000};  // 0 = never (DB13)
  ms resync_backoff_initial{500};
  ms resync_backoff_max{30'000};
  /// DB12: at most one reconnect resync per interval: a full re-report is O(resident blocks),
  /// and 5 s bounds how long a server that restarted empty goes without our hints.
  ms reconnect_resync_interval{5'000};
  /// DB14: ALL_CLEARED before anything else (merged: the replica's start). On by default: a
  /// (re)started data path has an empty reverse map, so whatever an earlier run reported for this
  /// replica could never be evicted by us any more; with a replay endpoint the catch-up rebuilds
  /// it right away.
  bool start_with_clear = true;
  /// DB16: shutdown ends with ALL_CLEARED (server.on_shutdown = clear): every start clears and
  /// catches up anyway, and a stopped reporter's hints could only go stale. false = keep.
  bool shutdown_clear = true;
  bool merged = false;                  // DB15: several ranks, one replica
  /// rpc mode, server without adapter_scoped: put back what a base-model eviction sweeps from
  /// the LoRA partitions (DB18, sweep_repair.hpp).
  bool repair_base_sweeps = false;
  uint64_t seed = 0;                    // backoff jitter (0: random)
  readiness_policy readiness = readiness_policy::any;
  size_t max_target_lag_bytes = size_t{16} << 20;
};

/// When an input happened: the steady clock (rate limits, outage length) and the wall clock
/// (the timestamp of a clear). The shell reads them; tests pin them.
struct moment {
  int64_t steady_ms = 0;
  int64_t wall_us = 0;
};

enum class action_kind : uint8_t {
  send_unit,      // unit → the emitter
  arm_flush,      // delay, gen: the window (a stale generation is ignored)
  arm_resync,     // delay, gen: the next probe, or a deferred reconnect resync
  arm_refresh,    // delay: the periodic re-report
  report,         // rank, gen: ask that rank's decoder to re-report; with gen != 0 then ask it
                  // for a drain barrier and call on_reported(rank, gen) when it answers (or fails)
  answer_drains,  // ok: deliver every drain waiting
  health,         // ok: the server's answers changed (tell the supervisor)
  listen,         // ask the emitter to tell us about reconnects (atom::update, our handle)
  log,            // line
  trim_heap,      // a large pending set was released: hand its memory back to the OS
};
const char* to_string(action_kind k) noexcept;

struct action {
  action_kind kind = action_kind::log;
  emit_unit_ptr unit;
  ms delay{0};
  uint64_t gen = 0;
  uint32_t rank = 0;
  bool ok = false;
  log::record line;
};
using actions = std::vector<action>;

/// Monotonic counters for /metrics (the shell publishes the differences).
struct counters {
  uint64_t units_sent = 0;
  uint64_t entries_sent = 0;
  uint64_t units_failed = 0;
  uint64_t stale_ops = 0;
  uint64_t overflows = 0;
  uint64_t resyncs = 0;            // probes that started a resync
  uint64_t probes_failed = 0;
  uint64_t reconnects = 0;         // reconnect notices
  uint64_t superseded = 0;         // ops or entries a resync or the final clear made moot
  uint64_t after_final_clear = 0;  // ops that arrived after the shutdown clear
  uint64_t sweep_restores = 0;     // adapter entries re-reported after a base-model sweep (DB18)
  uint64_t sweep_repair_overflows = 0;
};

class protocol {
 public:
  explicit protocol(options o);

  /// Once, first: arms the refresh and queues the start clear (DB14).
  void start(moment now, actions& out);
  /// An emitter to send to: the first one, or a replacement (DB10). Also asks it to tell us of
  /// reconnects.
  void on_emitter(moment now, actions& out);
  /// The decoder of `rank` exists (it asks itself; also after a data-path restart).
  void on_decoder(uint32_t rank, moment now, actions& out);
  /// Merged mode: the data path of `rank` (re)started (DB15).
  void on_rank_started(uint32_t rank, moment now, actions& out);

  void on_ops(uint32_t rank, const shard_ops& ops, moment now, actions& out);
  void on_clear(uint32_t rank, uint64_t epoch, int64_t ts_us, moment now, actions& out);
  void on_result(const emit_result& r, moment now, actions& out);

  void on_flush_timer(uint64_t gen, moment now, actions& out);
  void on_resync_timer(uint64_t gen, moment now, actions& out);
  void on_refresh_timer(moment now, actions& out);
  void on_reported(uint32_t rank, uint64_t gen, moment now, actions& out);
  void on_reconnected(moment now, actions& out);
  /// A drain request (the shell keeps its promise until answer_drains).
  void on_drain(moment now, actions& out);

  // -- what the status shows -------------------------------------------------------------------
  const pending_set& pending() const noexcept { return pending_; }
  const counters& stats() const noexcept { return c_; }
  size_t units_in_flight() const noexcept { return in_flight_.size(); }
  bool healthy() const noexcept { return healthy_; }
  bool resync_in_progress() const noexcept { return probe_wanted_ || probe_unit_ != 0; }
  bool reporting() const noexcept { return !reporting_.empty(); }
  bool draining() const noexcept { return draining_; }
  uint64_t epoch(uint32_t rank = 0) const;
  size_t held_keys() const noexcept { return holders_ ? holders_->size() : 0; }
  /// Adapter keys mirrored for DB18 (0 when repair is off).
  size_t mirrored_keys() const noexcept { return repair_ ? repair_->size() : 0; }

 private:
  struct rank_state {
    uint64_t epoch = 1;  // the decoder's first epoch
    bool decoder = false;
  };

  rank_state& rank(uint32_t r) { return ranks_[r]; }
  bool superseded() const { return !healthy_ || probe_wanted_ || probe_unit_ != 0; }
  void clear_rank(uint32_t r, int64_t ts_us, moment now, actions& out);
  void apply(const shard_ops& ops, moment now, actions& out);
  shard_ops filter_merged(uint32_t r, const shard_ops& in);
  void pump(moment now, actions& out);
  void send(emit_unit u, actions& out);
  void arm_window(actions& out);
  void start_resync(const char* why, moment now, actions& out);
  void arm_probe(moment now, actions& out);
  void failed(bool was_probe, const std::string& err, moment now, actions& out);
  void probe_acked(moment now, actions& out);
  void request_reports(uint64_t gen, actions& out);
  void tell_health(bool ok, actions& out);
  void check_drains(actions& out);
  void log(actions& out, log::level l, std::string text, std::vector<log::field> f = {});

  options opts_;
  pending_set pending_;
  std::optional<holder_set> holders_;
  std::optional<sweep_repair> repair_;
  std::map<uint32_t, rank_state> ranks_;
  counters c_;

  bool has_emitter_ = false;
  uint64_t next_unit_ = 1;
  std::vector<uint64_t> in_flight_;
  bool due_ = false;
  uint64_t flush_gen_ = 0;
  bool window_armed_ = false;

  bool healthy_ = true;
  std::optional<bool> told_ok_;
  int64_t unhealthy_since_ms_ = 0;
  bool probe_wanted_ = false;
  uint64_t probe_unit_ = 0;
  backoff backoff_;
  uint64_t resync_gen_ = 0;        // the resync timer's generation
  bool deferred_resync_ = false;   // DB12: a reconnect resync waits for the interval's end
  std::optional<int64_t> last_resync_ms_;
  uint64_t report_gen_ = 0;
  std::vector<uint32_t> reporting_;  // ranks whose re-report barrier is outstanding
  rate_limiter outage_log_{1, 10'000};
  rate_limiter overflow_log_{1, 10'000};
  uint64_t failed_since_log_ = 0;

  bool draining_ = false;
  size_t drains_waiting_ = 0;
  bool drain_failed_ = false;
  enum class final_clear : uint8_t { none, wanted, sent, acked, failed };
  final_clear final_ = final_clear::none;
  uint64_t final_unit_ = 0;
};

}  // namespace kvrelay::debounce
