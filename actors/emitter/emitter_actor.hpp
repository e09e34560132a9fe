// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The emitter: the only actor that talks to the policy server. It takes ordered units from the
// debouncer and stats from the scraper; unit_sequencer (the protocol, rules UQ1-UQ12) decides
// which call goes out when, the port (gRPC, or a test's fake) runs the calls, and completions
// come back through the port's inbox, one message per batch of them. It watches the channel
// and tells the reconnect listener when a lost transport is back. It restarts alone: the
// debouncer treats units in flight to a dead emitter as lost and resyncs, so ingestion never
// waits on it.

#include <memory>
#include <string>

#include "actors/emitter/policy_client.hpp"
#include "actors/emitter/policy_port.hpp"
#include "actors/emitter/unit_sequencer.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

struct emitter_options {
  client_options client;
  std::vector<std::string> targets;
  std::chrono::milliseconds resolve_interval{30000};
  /// The sequencer's: how evictions travel (`mode`, U2), rpc mode's evictions in flight at most.
  /// Its `deadline_ms` is taken from `client.rpc_timeout` (one setting, not two).
  emitter::sequencer_options sequencer;
  /// Stream messages are cut at this many entries (and ~1 MiB).
  size_t max_entries_per_message = 16384;
  /// Builds the port; empty = gRPC (emitter::make_grpc_port). Shell tests pass a fake.
  emitter::port_factory make_port;
};

/// Spawns an emitter. Fails (returns an invalid handle and sets `error`) only when the client
/// options are invalid (missing TLS files...); the connection itself is lazy.
emitter_actor spawn_emitter(caf::actor_system& sys, const pipeline_context& ctx,
                            const emitter_options& opts, std::string& error);

}  // namespace kvrelay
