// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The emitter: the only actor that talks to the policy servers. It holds one link per target
// (a policy-server address): the link's own port, inbox, unit_sequencer (the protocol, rules
// UQ1-UQ12, per link) and answers, so one slow or dead target never delays another. It takes
// ordered units from the debouncer, each for one target by name, and stats from the scraper
// (sent to every target). The port (gRPC, or a test's fake) runs the calls, and completions come
// back through the link's inbox, one message per batch of them. It watches every link's channel
// and tells the reconnect listener when a lost transport is back (per target), and which targets
// exist. DNS fan-out targets ("dns:///name:port") are resolved off the actor's thread, every
// resolve_interval and soon after one of their links is lost: addresses that appear become
// links, addresses that vanish are dropped. It restarts alone: the debouncer treats units in
// flight to a dead emitter as lost and resyncs, so ingestion never waits on it.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/emitter/policy_client.hpp"
#include "actors/emitter/policy_port.hpp"
#include "actors/emitter/unit_sequencer.hpp"
#include "net/dns_resolver.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

/// What resolving a DNS fan-out target gave (net/dns_resolver.hpp): its addresses, or why none
/// (`error` set: the emitter keeps the last good set).
using resolve_result = net::resolve_result;

struct emitter_options {
  /// The template of every link's client (TLS, timeouts, keepalive); each link gets a copy with
  /// `target` set to its address.
  client_options client;
  /// The targets: "host:port" (or any gRPC target), each one link from the start, or DNS fan-out
  /// names, one link per address they resolve to. Empty = {client.target}.
  std::vector<std::string> targets;
  /// DNS fan-out names are resolved again this often (and at once, at most once a second, when
  /// one of their links leaves READY).
  std::chrono::milliseconds resolve_interval{30000};
  /// Resolves a DNS fan-out name; runs on the emitter's resolver thread and may block (bound it:
  /// an emitter going away waits for a resolve under way). Empty: DNS names are handed to gRPC
  /// as one target (one channel, whichever address it picks).
  std::function<resolve_result(const std::string& spec)> resolve;
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
