#pragma once
// The daemon's root actor (messages/actors.hpp, `daemon_actor`): the one owner of the pipeline
// handles and of what is known about each pipeline, and the one place admin commands go through
// (Envoy runs its admin handlers on the main thread, VAST's `node` serialises its commands, for
// the same reason). Threads outside CAF — the admin port's, main's signal loop — reach it
// through `daemon_client`, which makes one blocking request per call and never touches the
// daemon object's fields.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "messages/actors.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

/// A pipeline as the daemon spawned it: facts fixed at start, and its supervisor.
struct daemon_pipeline {
  pipeline_view facts;  // status empty here: it is asked for
  pipeline_actor hdl;
};

/// Spawns the root. Its exit stops every pipeline.
daemon_actor spawn_daemon_actor(caf::actor_system& sys, std::vector<daemon_pipeline> pipelines);

class daemon_client {
 public:
  using ms = std::chrono::milliseconds;

  daemon_client(caf::actor_system& sys, daemon_actor root) : sys_(sys), root_(std::move(root)) {}

  /// Every pipeline with its status tree; nullopt when the root does not answer in time.
  std::optional<std::vector<pipeline_view>> status(ms timeout = ms(3000)) const;
  /// Every pipeline ready, and the reasons of those that are not.
  std::pair<bool, std::vector<std::string>> ready(ms timeout = ms(2000)) const;
  /// Fault injection; false when there is no such pipeline or the actor is not running.
  bool crash(const std::string& pipeline, actor_kind who) const;
  /// Adds id → name to every pipeline of `replica_id` ("" = all); false when none matched.
  bool add_adapter(const std::string& replica_id, int64_t id, const std::string& name) const;
  /// Drains every pipeline at once within `budget`; one report per pipeline (a pipeline that
  /// does not answer is reported as timed out).
  std::vector<drain_report> drain(ms budget) const;

 private:
  caf::actor_system& sys_;
  daemon_actor root_;
};

}  // namespace kvrelay
