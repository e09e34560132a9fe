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

#include <optional>

#include "actors/debouncer/debouncer_protocol.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

struct debouncer_options {
  /// The protocol's options (debouncer_protocol.hpp); the replica debouncer sets `merged`.
  debounce::options protocol;
  /// Merged DP mode: this pipeline is rank `merged_rank` of `replica` (spawn_replica_debouncer).
  /// In merged mode the replica debouncer's own protocol options decide (the ports ignore theirs).
  std::optional<unsigned> merged_rank;
  replica_debouncer_actor replica;
};

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
