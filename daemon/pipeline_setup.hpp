// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// How a configuration becomes pipelines: each pipeline's context and options (one per engine, or
// per DP rank), and the spawning of one engine's pipelines (a merged-DP engine's replica
// debouncer first). At start for the engines the configuration describes; again whenever
// discovery (re)targets an engine that has a URL (daemon/discovered_engines.hpp).

#include <memory>
#include <vector>

#include "base/error.hpp"
#include "config/loader.hpp"
#include "config/settings.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"
#include "supervision/daemon_actor.hpp"
#include "supervision/pipeline_supervisor.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

class metrics_registry;
class memory_budget;

pipeline_context to_context(const config::daemon_config& cfg, const config::pipeline_settings& ps,
                            std::shared_ptr<metrics_registry> metrics,
                            std::shared_ptr<memory_budget> budget = nullptr);

/// The pipeline's options. Its queue bounds derive from `budget`, the process' memory budget (the
/// one place its size is: base/memory_budget.hpp MD1-MD4); without one (tools, tests that build
/// options without a daemon), the fixed defaults.
pipeline_options to_pipeline_options(const config::daemon_config& cfg,
                                     const config::pipeline_settings& ps,
                                     replica_debouncer_actor replica,
                                     const std::shared_ptr<const memory_budget>& budget = nullptr);

/// Spawns the pipelines `ranks` (all of one engine of `cfg`). `discovery` (may be invalid)
/// hears when a rank's stream stops or flows again; `budget` (may be null) is the process'
/// memory budget they charge. On failure nothing stays running.
outcome<engine_pipelines> spawn_engine(caf::actor_system& sys, const config::daemon_config& cfg,
                                       const std::vector<config::pipeline_settings>& ranks,
                                       const std::shared_ptr<metrics_registry>& metrics,
                                       const discovery_actor& discovery,
                                       std::shared_ptr<memory_budget> budget = nullptr);

/// Stops them: the pipelines, then the replica debouncer.
void stop_engine(engine_pipelines& e);

}  // namespace kvrelay
