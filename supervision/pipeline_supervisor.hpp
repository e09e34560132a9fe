// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// One pipeline's supervisor: the actor shell around supervision_protocol
// (supervision/supervision_protocol.hpp, whose numbered rules say when what restarts). Children:
// the emitter and the scraper (side actors: each restarts alone) and the data path (ingress →
// decoder → shards → debouncer), which restarts as a unit: its state is one reverse map, and a
// partial restart would leave hints nothing can evict. A data-path restart starts with ALL_CLEARED
// and a cold-start replay, so the index is rebuilt, not guessed. The supervisor also owns the
// pipeline's health (children send `health_fact`s) and runs its shutdown drain.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/debouncer/debouncer_actor.hpp"
#include "actors/decoder/decoder_actor.hpp"
#include "actors/emitter/emitter_actor.hpp"
#include "actors/ingress/ingress_actor.hpp"
#include "actors/scraper/scraper_actor.hpp"
#include "messages/actors.hpp"
#include "durable/state_store.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

struct pipeline_options {
  ingress_options ingress;
  decoder_options decoder;
  debouncer_options debouncer;
  emitter_options emitter;
  std::optional<scraper_options> scraper;
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{10'000};
  std::chrono::milliseconds unhealthy_backoff{30'000};
  int max_restarts = 5;
  std::chrono::milliseconds restart_window{60'000};
  std::chrono::milliseconds teardown_deadline{3'000};
  /// server.on_shutdown = clear: the data path's drain ends with ALL_CLEARED (the debouncer's
  /// option; this copy only lets the drain report say what the server is left with).
  bool final_clear = false;
  /// An engine with a URL: discovery hears (engine index, DP rank) when this pipeline's stream
  /// stops or flows again, to read the engine's sources again. Invalid = nobody listens.
  discovery_actor discovery;
  uint64_t engine_index = 0;
  int64_t dp_rank = 0;
  /// The durable index (state.dir): this pipeline's snapshot file and how to prove
  /// its engine. Unset: nothing survives a restart (every data path starts cold).
  std::optional<state_options> state;
};

/// The data path's three actors, spawned together.
struct datapath_handles {
  ingress_actor ingress;
  decoder_actor decoder;
  debouncer_actor debouncer;
};

/// How the supervisor makes its children: the seam where shell tests hand in recorders. Each
/// gets the pipeline's context (whose `health` is the supervisor) and current options (the
/// adapter map grows at runtime). An invalid handle means the spawn failed (SV10).
struct pipeline_children {
  std::function<emitter_actor(caf::actor_system&, const pipeline_context&,
                              const pipeline_options&, std::string& error)>
      emitter;
  std::function<datapath_handles(caf::actor_system&, const pipeline_context&,
                                 const pipeline_options&, const emitter_actor&)>
      datapath;
  /// Used only when `pipeline_options::scraper` is set.
  std::function<scraper_actor(caf::actor_system&, const pipeline_context&,
                              const pipeline_options&, const emitter_actor&)>
      scraper;
};

/// The real actors (actors/*): spawn_emitter, spawn_debouncer + spawn_decoder + spawn_ingress
/// (a fresh credit line per data-path incarnation), spawn_scraper.
pipeline_children real_children();

/// Spawns the supervisor, which spawns its children and owns the pipeline's health: its
/// `status` says whether the pipeline is ready and why not. Returns an invalid handle and sets
/// `error` when the options cannot work at all (unreadable TLS files).
pipeline_actor spawn_pipeline(caf::actor_system& sys, const pipeline_context& ctx,
                              const pipeline_options& opts, std::string& error);

/// The same with other children (tests).
pipeline_actor spawn_pipeline(caf::actor_system& sys, const pipeline_context& ctx,
                              const pipeline_options& opts, pipeline_children children);

}  // namespace kvrelay
