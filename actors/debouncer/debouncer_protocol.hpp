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
//  DB3. Credits: at most target.credits units are with the emitter per target (TD1). A due flush without a
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
// Targets (issue 23): each policy server the unit stream goes to is a target_delivery
// (target_delivery.hpp, TD1-TD9: credits, lag bound, health, outage, probes, reconnects).
//  DB7. Targets come from the emitter (static ones and DNS fan-out), and change at any time. One
//       that joins before anything was sent is live at once (the start clear reaches it); one that
//       joins later resyncs (TD5). One that leaves is forgotten. No target: nothing is taken.
//  DB8. A unit is taken from pending while some target wants more (the fastest paces: a slow or
//       dead target never holds the others back) and offered to every target, encoded once and
//       shared. With no live target, ops are superseded by the re-report to come and dropped
//       (counted), except L2 downgrades, which the re-report cannot know of.
//  DB9. A target's probe succeeded (it is empty now). If no other target is live: pending is
//       dropped but for downgrades (the server never held it, or it is stale), merged mode forgets
//       the holder set, every known decoder re-reports to everyone (DB6 runs until their barriers
//       answer). Otherwise the re-report is for that target alone (DB10).
//  DB10. A re-report for some targets only (a lane; not in merged mode, whose barriers race the
//        ports: there everyone gets it): while it runs, each re-reported chunk first flushes
//        everything pending to every target, then goes to the lane's targets only, so each
//        target's stream keeps the engine's order and the others see nothing extra. One lane at a
//        time; targets that need one meanwhile wait for the next. It ends at its barriers.
//  DB11. Pending over its bound: it is dropped (it is only a copy of what the shards hold) and
//        every target resyncs.
//  DB12. Health for the supervisor: the readiness policy (any | all | quorum) over the targets
//        that are up (TD9), told once a target has answered and whenever it changes.
//  DB13. Every refresh_interval, when some target is live and no re-report runs, every decoder
//        re-reports to everyone (no clear) so long-lived prefixes never reach the server's TTL.

// Clears and merged DP mode
//  DB14. One rank (a pipeline): start_with_clear queues an ALL_CLEARED at once; a clear (engine
//        AllBlocksCleared, lost history) supersedes pending and heads the next unit.
//  DB15. Merged: the instance is the replica's only owner of the holder set (which ranks hold each
//        key). An add reaches the server when its rank is the key's first holder (or its only one:
//        a tier change), and always when it is a re-report (a target may have been cleared, and a
//        refresh must reach keys several ranks hold); an eviction when its rank was the last. A rank's clear, or its data path
//        restarting (rank_started), releases what that rank held: evictions of the keys no other
//        rank holds. Only the replica's start clears the server.
//
// Drain (shutdown)
//  DB16. With shutdown_clear, pending is dropped and the last unit is an ALL_CLEARED to every
//        target (sent whatever the health: it is also a probe); ops after it are dropped. The
//        answer: every target acknowledged it.
//  DB17. Without, every flush is due at once; the answer comes when nothing is pending, no
//        re-report is outstanding and every target is idle or failed (an unhealthy one at once):
//        true when none failed.
//
// rpc evictions and LoRA partitions
//  DB18. With repair_base_sweeps, every unit passes through sweep_repair before it is sent: the
//        adapter keys a base-model PREFIX_EVICTED sweeps from the server ride in the unit as its
//        restores (U5), sent after its evictions.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/debouncer/debounce_actions.hpp"
#include "actors/debouncer/holder_set.hpp"
#include "actors/debouncer/pending_set.hpp"
#include "actors/debouncer/sweep_repair.hpp"
#include "actors/debouncer/target_delivery.hpp"
#include "base/log.hpp"
#include "base/rate_limiter.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay::debounce {

/// DB12: when the policy plane counts as healthy (/readyz): some target up, every one, or more
/// than half of them.
enum class readiness_policy : uint8_t { any, all, quorum };
const char* to_string(readiness_policy p) noexcept;

struct options {
  ms window{100};                       // R04: ≤ 0 is clamped to 100 ms by config
  size_t flush_threshold = 4096;        // pending adds that force a flush (R13)
  bool l2_mode = false;                 // --ignore-block-removed
  size_t max_pending = 2'000'000;       // distinct keys held (DB11)
  size_t max_adds_per_unit = 16384;
  ms refresh_interval{10 * 60 * 1000};  // 0 = never (DB13)
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
  readiness_policy readiness = readiness_policy::any;  // DB12
  /// Delivery to each target (target_delivery.hpp, TD1-TD9): credits, lag bound, backoff,
  /// reconnect resyncs. Its seed is derived per target from `seed`.
  target_options target;
};

/// Monotonic counters for /metrics (the shell publishes the differences).
struct counters {
  uint64_t units_sent = 0;          // units taken from pending (each offered to every target)
  uint64_t entries_sent = 0;
  uint64_t units_failed = 0;        // the rest down to reconnects: summed over the targets
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
  /// An emitter to send to: the first one, or a replacement (TD7). Also asks it to tell us of
  /// its targets and their reconnects.
  void on_emitter(moment now, actions& out);
  /// The emitter's current targets (DB7), sorted or not.
  void on_targets(const std::vector<std::string>& names, moment now, actions& out);
  /// The decoder of `rank` exists (it asks itself; also after a data-path restart).
  void on_decoder(uint32_t rank, moment now, actions& out);
  /// Merged mode: the data path of `rank` (re)started (DB15).
  void on_rank_started(uint32_t rank, moment now, actions& out);

  void on_ops(uint32_t rank, const shard_ops& ops, moment now, actions& out);
  void on_clear(uint32_t rank, uint64_t epoch, int64_t ts_us, moment now, actions& out);
  void on_result(const emit_result& r, moment now, actions& out);

  void on_flush_timer(uint64_t gen, moment now, actions& out);
  /// A target's timer (target_delivery::gen_serial names it).
  void on_resync_timer(uint64_t gen, moment now, actions& out);
  void on_refresh_timer(moment now, actions& out);
  void on_reported(uint32_t rank, uint64_t gen, moment now, actions& out);
  void on_reconnected(const std::string& target, moment now, actions& out);
  /// A drain request (the shell keeps its promise until answer_drains).
  void on_drain(moment now, actions& out);

  // -- what the status shows -------------------------------------------------------------------
  const pending_set& pending() const noexcept { return pending_; }
  /// Own counters plus every target's, including targets that left.
  counters stats() const;
  const std::map<std::string, target_delivery>& targets() const noexcept { return targets_; }
  size_t units_in_flight() const;
  /// Some target is healthy (no target yet: true).
  bool healthy() const;
  bool resync_in_progress() const;
  bool reporting() const noexcept { return !reporting_.empty(); }
  /// The targets a lane re-report runs for (DB10), empty when none runs.
  const std::set<std::string>& lane() const noexcept { return audience_; }
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
  bool any_live() const;
  bool superseded() const { return !targets_.empty() && !any_live(); }
  target_options target_opts() const;
  void clear_rank(uint32_t r, int64_t ts_us, moment now, actions& out);
  void apply(const shard_ops& ops, moment now, actions& out);
  void apply_lane(const shard_ops& ops, moment now, actions& out);
  shard_ops filter_merged(uint32_t r, const shard_ops& in);
  void pump(moment now, actions& out);
  emit_unit_ptr seal(emit_unit u);
  void offer(const emit_unit_ptr& u, const std::set<std::string>* only, moment now,
             actions& out);
  void arm_window(actions& out);
  void resync_all(const char* why, moment now, actions& out);
  void probe_acked(const std::string& target, moment now, actions& out);
  void start_lane(actions& out);
  void request_reports(uint64_t gen, actions& out);
  void tell_health(actions& out);
  void check_drains(actions& out);
  void log(actions& out, log::level l, std::string text, std::vector<log::field> f = {});

  options opts_;
  pending_set pending_;
  pending_set lane_pending_;  // DB10: a chunk's ops become the lane's units
  std::optional<holder_set> holders_;
  std::optional<sweep_repair> repair_;
  std::map<uint32_t, rank_state> ranks_;
  counters c_;

  bool has_emitter_ = false;
  std::map<std::string, target_delivery> targets_;
  uint32_t next_serial_ = 0;
  target_counters departed_;  // counters of targets that left (DB7)
  bool sent_any_ = false;     // DB7: a target joining after this resyncs
  uint64_t next_unit_ = 1;
  bool due_ = false;
  uint64_t flush_gen_ = 0;
  bool window_armed_ = false;
  std::optional<bool> told_ok_;

  uint64_t report_gen_ = 0;
  std::vector<uint32_t> reporting_;   // ranks whose re-report barrier is outstanding
  std::set<std::string> audience_;    // DB10: the lane running (empty: none)
  std::set<std::string> lane_wanted_; // DB10: targets waiting for the next lane
  rate_limiter overflow_log_{1, 10'000};

  bool draining_ = false;
  size_t drains_waiting_ = 0;
  enum class final_clear : uint8_t { none, wanted, sent };
  final_clear final_ = final_clear::none;
  emit_unit_ptr final_unit_;
};

}  // namespace kvrelay::debounce
