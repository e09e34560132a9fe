// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The daemon's root actor (messages/actors.hpp, `daemon_actor`): the one owner of the pipeline
// handles and of what is known about each pipeline, and the one place admin commands go through
// (Envoy runs its admin handlers on the main thread, VAST's `node` serialises its commands, for
// the same reason). Threads outside CAF — the admin port's, main's signal loop — reach it
// through `daemon_client`, which makes one blocking request per call and never touches the
// daemon object's fields.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/discovery/discovery_actor.hpp"
#include "base/error.hpp"
#include "messages/actors.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

/// A pipeline as the daemon spawned it: facts fixed at its spawn, and its supervisor.
struct daemon_pipeline {
  size_t engine = 0;    // its engine's index in the configuration
  pipeline_view facts;  // status empty here: it is asked for
  pipeline_actor hdl;
};

/// One engine's pipelines as spawned.
struct engine_pipelines {
  std::vector<daemon_pipeline> pipelines;  // rank order
  caf::actor replica;  // merged DP: the replica debouncer, stopped after the pipelines
};

/// Engines with a URL: the root spawns the discovery actor with `options` and, for
/// each target it answers with, the engine's pipelines through `spawn` (replacing those it ran).
struct daemon_discovery {
  discovery_options options;  // no engines = no discovery actor
  std::function<outcome<engine_pipelines>(size_t engine, const discovered_target& target,
                                          const discovery_actor& discovery)>
      spawn;
  std::map<size_t, std::string> replica_ids;  // engine index → replica id (readiness reasons)
};

/// Spawns the root. Its exit stops every pipeline (and the discovery actor).
daemon_actor spawn_daemon_actor(caf::actor_system& sys, std::vector<daemon_pipeline> pipelines,
                                daemon_discovery discovery = {});

/// What the root answers for /debug/tree and /debug/engines.
struct daemon_view {
  std::vector<pipeline_view> pipelines;
  actor_status discovery;  // kind "" when no engine has a URL
};

class daemon_client {
 public:
  using ms = std::chrono::milliseconds;

  daemon_client(caf::actor_system& sys, daemon_actor root) : sys_(sys), root_(std::move(root)) {}

  /// Every pipeline with its status tree, and discovery's; nullopt when the root does not
  /// answer in time.
  std::optional<daemon_view> status(ms timeout = ms(3000)) const;
  /// Every pipeline ready, and the reasons of those that are not.
  std::pair<bool, std::vector<std::string>> ready(ms timeout = ms(2000)) const;
  /// Fault injection; false when there is no such pipeline or the actor is not running.
  bool crash(const std::string& pipeline, actor_kind who) const;
  /// Adds id → name to every pipeline of `replica_id` ("" = all); false when none matched.
  bool add_adapter(const std::string& replica_id, int64_t id, const std::string& name) const;
  /// Drains every pipeline at once within `budget`; one report per pipeline (a pipeline that
  /// does not answer is reported as timed out).
  std::vector<drain_report> drain(ms budget) const;
  /// The running pipelines' names; empty when the root does not answer.
  std::vector<std::string> pipeline_names(ms timeout = ms(2000)) const;

 private:
  caf::actor_system& sys_;
  daemon_actor root_;
};

}  // namespace kvrelay
