// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The debouncer's protocol: what to send the policy server, when, and what to do when
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
// Never send what the server never saw (with pending_set's rules)
//  DB5. A pending add marked `introduces` and its eviction are both dropped. After an engine clear
//       (or the start's) the index is cleared too, so every later add introduces its key: DB5 alone
//       covers what follows a clear; only a resync, which clears the server but not the index,
//       needs DB6. A walk's chunk makes the pending adds of its keys not fresh (WK2).
//  DB6. From a resync's acknowledged clear while no other target is live, until that target's
//       walk has ended, an eviction of a key not sent since the clear (by a unit or a walk) is
//       dropped. Merged mode needs no window: the holder set drops a rank's eviction of a key it
//       no longer holds.
//
// Targets: each policy server the unit stream goes to is a target_delivery
// (target_delivery.hpp, TD1-TD9: credits, lag bound, health, outage, probes, reconnects).
//  DB7. Targets come from the emitter (static ones and DNS fan-out), and change at any time. One
//       that joins before anything was sent is live at once (the start clear reaches it); one that
//       joins later resyncs (TD5). One that leaves is forgotten, with its walk. No target: nothing
//       is taken.
//  DB8. A unit is taken from pending while some target wants more (the fastest paces: a slow or
//       dead target never holds the others back) and offered to every target, encoded once and
//       shared. With no live target, ops are superseded by the walk to come and dropped
//       (counted), except L2 downgrades, which no walk can know of.
//  DB9. A target's probe succeeded (it is empty now): it walks the index (WK4). If no other
//       target is live, pending is dropped but for downgrades (the server never held it, or it is
//       stale) and DB6 starts.
//  DB11. Pending over its bound sheds its adds (pending_set): they are copies of what the index
//        holds, so every live target walks the index again without a clear (a catch-up, WK4) —
//        an overflow never clears a server. When evictions and downgrades alone are over it
//        (they cannot be re-derived), the debouncer holds the readers (memory_budget MG6): the
//        ingress pauses, the engine's PUB drops, a gap repaired from the ring or declared — the
//        overload is declared upstream. The hold ends once pending fell to half its bound, or
//        when no target is live (pending is then superseded, DB8). What was already in the
//        queues when the hold began still comes in: pending is charged to the memory budget
//        like the queues, so even that is bounded by the budget, and a server is never cleared
//        for an overflow.
//  DB12. Health for the supervisor: the readiness policy (any | all | quorum) over the targets
//        that are up (TD9), told once a target has answered and whenever it changes.
//
// Walks: work proportional to the resident set is streamed, never queued (index_walk.hpp IW1-IW5)
//  WK1. A walk streams the replica's index (every rank in merged mode, in rank order) to one
//       target, in chunks the shards read at the walk's cursor (partition_set PS7, probe_table
//       PT9), never through pending. One chunk is asked at a time and only while the target
//       wants more (TD1: live, nothing queued, a credit free), at most walk_chunk blocks: a walk
//       holds O(chunk) memory and goes at the speed the server acknowledges. Each chunk is a unit
//       for that target alone.
//  WK2. Order. A chunk is the index when the shard read it; every op the shard made before
//       reached the debouncer first (mailbox order) and pending keeps each key's latest state, so
//       whatever pending sends after a chunk is as new as the chunk or newer: an entry already
//       streamed gets its later changes after it, one not streamed yet goes in its state when it
//       is read. A clear waiting in pending goes before any chunk: chunks are asked only while
//       none waits.
//  WK3. A chunk from an older epoch than its rank's (a clear came after the shard read it) is
//       dropped, and that rank's part of the walk ends: after a clear every block reaches the
//       server as a live add. A chunk answering another request than the one awaited (IW2) is
//       dropped.
//  WK4. Kinds: `resync` after the target's probe was acknowledged (DB9); `catchup`, no clear,
//       after pending shed its adds (DB11: a running walk starts over, since a shed add may lie
//       behind its cursor); `start`, after the start clear, when a data path started from a
//       restored index (every target, that rank). A resync replaces any other walk of the
//       target; a catch-up or a start replaces a refresh.
//  WK5. Refresh: every refresh_interval each live target not in another walk walks the index
//       once (the first pass an interval after the refresh timer first saw it live), paced so that each block is re-reported once per interval, spread evenly (IW5): the
//       server sees a flat rate, never a burst of the whole set. Ticks come every
//       refresh_interval x walk_chunk / resident (1 s to 60 s), so a pass is a few large
//       messages, not many small ones (the reference server walks its whole index per message).
//  WK6. A walk ends when its ranks are done, when its target is no longer live (its next probe's
//       success starts a new one: one ALL_CLEARED per incident) or leaves, and at shutdown. A
//       rank whose data path restarts is asked again at the same cursor (IW3).

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
//
// History (a replay)
//  DB19. Ops from a replayed batch (the engine's ring answering a catch-up or a gap, the delta log
//        at start: `shard_ops::replayed`) are history the engine has moved past: most of what they
//        store is evicted a few batches on, and an add sent meanwhile is a hint at a block the
//        engine no longer holds, then an eviction. While the ops come from a replay, nothing
//        pending is due (adds or evictions) but a clear, pending past history_max_pending (half
//        of max_pending at most: a replay never makes pending shed its adds, DB11), or
//        pending held history_windows windows since the wait began or the last unit; the window
//        stays armed while replayed ops keep coming, pending or not. A window with no replayed op (the replay ended or stalled)
//        ends it and makes what waited due. The first live op ends it too: from that op DB2
//        applies again, to what waited as well (evictions at once, adds on the window). A window
//        in which a live op came is a window (DB2) whatever came after it, so in merged mode a
//        rank replaying beside live ones neither holds their adds back nor adds units (a rank's
//        clear, whose evictions are applied as live ops, ends the wait too). In L2 mode the
//        adds still go before each batch holding removals (L08): a replay waits less there.
//        history_windows 0 (server.replay_wait_windows) turns it off.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/debouncer/debounce_actions.hpp"
#include "actors/debouncer/holder_set.hpp"
#include "actors/debouncer/index_walk.hpp"
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
  /// DB19: pending waits at most this many windows while ops come from a replay (0: never).
  uint32_t history_windows = 10;
  /// DB19: ... and no longer than pending holds this many keys (at most half of max_pending).
  size_t history_max_pending = 65536;
  ms refresh_interval{10 * 60 * 1000};  // 0 = never (WK5)
  uint32_t walk_chunk = 16384;          // blocks a walk asks a shard for at a time (WK1)
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
  uint64_t resyncs = 0;            // probes that started a resync
  uint64_t probes_failed = 0;
  uint64_t reconnects = 0;         // reconnect notices
  uint64_t superseded = 0;         // ops or entries a resync or the final clear made moot
  uint64_t after_final_clear = 0;  // ops that arrived after the shutdown clear
  uint64_t sweep_restores = 0;     // adapter entries re-reported after a base-model sweep (DB18)
  uint64_t sweep_repair_overflows = 0;
  uint64_t walks_started = 0;      // by kind: resync, catchup, start, refresh (WK4, WK5)
  uint64_t walks_resync = 0;
  uint64_t walks_catchup = 0;
  uint64_t walks_start = 0;
  uint64_t walks_refresh = 0;
  uint64_t walks_done = 0;         // walks that reached their end
  uint64_t walk_restarts = 0;      // running walks started over (WK4)
  uint64_t walk_blocks = 0;        // blocks sent by walks
  uint64_t sheds = 0;              // pending shed its adds (DB11)
  uint64_t holds = 0;              // pending evictions at their bound held the readers (DB11)
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
  /// The walk each target has running (WK1-WK6).
  const std::map<std::string, index_walk>& walks() const noexcept { return walks_; }
  bool draining() const noexcept { return draining_; }
  uint64_t epoch(uint32_t rank = 0) const;
  size_t held_keys() const noexcept { return holders_ ? holders_->size() : 0; }
  /// Adapter keys mirrored for DB18 (0 when repair is off).
  size_t mirrored_keys() const noexcept { return repair_ ? repair_->size() : 0; }

 private:
  struct rank_state {
    uint64_t epoch = 1;  // the decoder's first epoch
    bool decoder = false;
    bool restored = false;  // its data path started from a restored index (WK4)
  };

  rank_state& rank(uint32_t r) { return ranks_[r]; }
  bool any_live() const;
  bool superseded() const { return !targets_.empty() && !any_live(); }
  target_options target_opts() const;
  void clear_rank(uint32_t r, int64_t ts_us, moment now, actions& out);
  void apply(const shard_ops& ops, moment now, actions& out);
  void on_chunk(uint32_t rank, const shard_ops& ops, moment now, actions& out);
  shard_ops filter_merged(uint32_t r, const shard_ops& in);
  void settle(moment now, actions& out);
  void pump(moment now, actions& out);
  void stop_tracking();
  emit_unit_ptr seal(emit_unit u);
  void offer(const emit_unit_ptr& u, const std::set<std::string>* only, moment now,
             actions& out);
  void arm_window(moment now, actions& out);
  bool history_due(moment now) const;
  void probe_acked(const std::string& target, moment now, actions& out);
  std::vector<uint32_t> walk_ranks() const;
  void start_walk(const std::string& target, walk_kind k, std::vector<uint32_t> ranks,
                  moment now, actions& out);
  void pump_walks(moment now, actions& out);
  void arm_refresh(actions& out);
  void release_hold(actions& out);
  void tell_health(actions& out);
  void check_drains(actions& out);
  void log(actions& out, log::level l, std::string text, std::vector<log::field> f = {});

  options opts_;
  pending_set pending_;
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
  int64_t window_armed_ms_ = 0;  // when the window last armed was (DB19)
  // DB19: holding history since (steady ms; nullopt: not), the last replayed op's arrival.
  std::optional<int64_t> history_since_ms_;
  int64_t history_last_ms_ = 0;
  int64_t live_last_ms_ = INT64_MIN / 2;  // the last live op's arrival
  std::optional<bool> told_ok_;

  std::map<std::string, index_walk> walks_;  // WK1: one per target at most
  std::map<std::string, int64_t> refreshed_ms_;  // WK5: when the target's last refresh pass began
  std::string tracking_walk_;  // DB6: the target whose walk ends tracking ("" none)
  bool holding_ = false;       // DB11: the readers are held (memory_budget MG6)
  uint64_t next_walk_id_ = 1;
  rate_limiter overflow_log_{1, 10'000};

  bool draining_ = false;
  size_t drains_waiting_ = 0;
  enum class final_clear : uint8_t { none, wanted, sent };
  final_clear final_ = final_clear::none;
  emit_unit_ptr final_unit_;
};

}  // namespace kvrelay::debounce
