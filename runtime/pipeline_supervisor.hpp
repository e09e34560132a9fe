#pragma once
// One pipeline's supervisor. Children: emitter and scraper (side actors: each restarts alone),
// and the data path (ingress → decoder → shards → debouncer), which restarts as a unit: its
// state is one reverse map, and a partial restart would leave hints nothing can evict. A data-path
// restart starts with ALL_CLEARED and a cold-start replay, so the index is rebuilt, not guessed.
// Restarts use jittered exponential backoff; more than `max_restarts` in `restart_window` marks
// the pipeline unhealthy and slows retries down, but never stops the daemon or other pipelines.

#include <chrono>
#include <memory>
#include <optional>

#include "actors/debouncer/debouncer_actor.hpp"
#include "actors/decoder/decoder_actor.hpp"
#include "actors/emitter/emitter_actor.hpp"
#include "actors/ingress/ingress_actor.hpp"
#include "actors/scraper/scraper_actor.hpp"
#include "messages/actors.hpp"

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
  std::chrono::milliseconds drain_timeout{5'000};
};

/// Spawns the supervisor, which spawns its children and owns the pipeline's health: its
/// `status` says whether the pipeline is ready and why not. Returns an invalid handle and sets
/// `error` when the options cannot work at all (unreadable TLS files).
pipeline_actor spawn_pipeline(caf::actor_system& sys, const pipeline_context& ctx,
                              const pipeline_options& opts, std::string& error);

}  // namespace kvrelay
