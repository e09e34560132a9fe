// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The debouncer's shells around debounce::protocol (debouncer_protocol.hpp holds the rules):
// coalesces shard ops to their final state per (adapter, fingerprint) and hands ordered units
// to the emitter under a credit window; owns the "server was away" logic (a failed unit makes
// the server unhealthy; the way back is ALL_CLEARED + a re-report of everything resident).
//
// Merged DP mode (several ranks, one replica): the daemon spawns ONE replica debouncer per
// merged engine (spawn_replica_debouncer); it owns the holder set and the replica's only stream
// of units (through rank 0's emitter), so no order between ranks is left to chance. Each rank's
// spawn_debouncer then returns a port: a debouncer_actor that forwards what its data path sends,
// tagged with the rank, and that restarts with its data path while the replica debouncer stays.

#include <chrono>
#include <optional>

#include "actors/debouncer/debouncer_protocol.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

struct debouncer_options {
  std::chrono::milliseconds window{100};       // R04: ≤ 0 is clamped to 100 ms by config
  size_t flush_threshold = 4096;               // pending adds that force a flush (R13)
  bool l2_mode = false;                        // --ignore-block-removed
  size_t max_pending = 2'000'000;              // distinct keys held (DB11)
  size_t max_units_in_flight = 2;              // credits toward the emitter
  std::chrono::milliseconds refresh_interval{10 * 60 * 1000};  // 0 = never
  std::chrono::milliseconds resync_backoff_max{30'000};
  /// At most one reconnect resync per interval (DB12): a full re-report is O(resident blocks), and
  /// 5 s bounds how long a server that restarted empty goes without our hints.
  std::chrono::milliseconds reconnect_resync_interval{5'000};
  /// ALL_CLEARED before anything else. On by default: a (re)started data path has an empty
  /// reverse map, so whatever an earlier run reported for this replica could never be evicted
  /// by us any more; with a replay endpoint the catch-up rebuilds it right away. In merged mode
  /// the replica debouncer's own option decides (the ports ignore theirs).
  bool start_with_clear = true;
  /// Shutdown ends with ALL_CLEARED (server.on_shutdown = clear): every start clears and catches
  /// up anyway, and a stopped reporter's hints could only go stale. false = keep.
  bool shutdown_clear = true;
  /// rpc eviction mode against a server that ignores CacheEvent.adapter_scoped: re-report the
  /// LoRA entries a base-model eviction sweeps (sweep_repair.hpp).
  bool repair_base_sweeps = false;
  /// Merged DP mode: this pipeline is rank `merged_rank` of `replica` (spawn_replica_debouncer).
  std::optional<unsigned> merged_rank;
  replica_debouncer_actor replica;
};

debounce::options to_protocol_options(const debouncer_options& o);

/// Tells `ctx.health` when the server's answer to units changes (acknowledged / failed). In
/// merged mode (opts.replica set) returns the rank's port to the replica debouncer instead.
debouncer_actor spawn_debouncer(caf::actor_system& sys, const pipeline_context& ctx,
                                const debouncer_options& opts, emitter_actor emitter);

/// Merged DP mode: the replica's one debouncer. Not supervised: its state is the replica's
/// holder set, which no restart could rebuild; the ports quit when it goes, so their
/// supervisors show it. The owner of the handle (the daemon) stops it after the pipelines.
replica_debouncer_actor spawn_replica_debouncer(caf::actor_system& sys, const pipeline_context& ctx,
                                                const debouncer_options& opts);

}  // namespace kvrelay
