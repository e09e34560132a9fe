#pragma once
// The emitter: the only actor that talks gRPC. It takes ordered units from the debouncer and
// stats from the scraper, runs them as async RPCs (deadline on every call, evictions up to 64 in
// flight) and answers with results. It restarts alone: the debouncer treats units in flight to a
// dead emitter as lost and resyncs, so ingestion never waits on it.

#include <memory>

#include "actors/emitter/policy_client.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

struct emitter_options {
  client_options client;
  size_t max_evictions_in_flight = 64;
};

/// Spawns an emitter. Fails (returns an invalid handle and sets `error`) only when the client
/// options are invalid (missing TLS files...); the connection itself is lazy.
emitter_actor spawn_emitter(caf::actor_system& sys, const pipeline_context& ctx,
                            const emitter_options& opts, std::string& error);

}  // namespace kvrelay
