// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Engines with a URL, from the daemon's side: what the configuration says about each
// (the explicit values and where they were set) for the discovery merge, and the configuration
// an engine's pipelines run with once discovery has a target for it.

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <memory>
#include <utility>
#include <vector>

#include "actors/discovery/discovery_actor.hpp"
#include "actors/discovery/discovery_merge.hpp"
#include "config/loader.hpp"
#include "config/settings.hpp"
#include "messages/discovery.hpp"

namespace kvrelay {

/// Engine `engine` of `cfg` (it has a URL) as the merge sees it: only the values given in the
/// file or by a flag, each with where ("--topic", "kvrelay.toml:4:1").
discovery::engine_request discovery_request(const config::daemon_config& cfg, size_t engine);

/// What engine `engine` runs on while its engine says nothing usable, when its URL was derived
/// from its metrics URL (discovery_protocol.hpp, DP8): its configured settings as a target, each
/// value's origin the flag or file line that set it, or "default (configured; ...)".
std::shared_ptr<const discovered_target> configured_target(const config::daemon_config& cfg,
                                                           size_t engine);

/// The discovery actor's options: every engine with a URL (none: discovery is not needed).
discovery_options discovery_options_for(const config::daemon_config& cfg);

/// `cfg` with engine `engine` set to what `target` says (endpoints, topic, ranks, model, hash
/// scheme, metrics URL), and that engine's pipelines, one per rank of the target.
std::pair<config::daemon_config, std::vector<config::pipeline_settings>> apply_target(
    const config::daemon_config& cfg, size_t engine, const discovered_target& target);

/// `kvrelay --check`'s last part: for every engine with a URL, what it answers now, as TOML
/// comments (the printed configuration still reads back unchanged), each value with its origin,
/// and the conflicts; or why it cannot be asked now (not a configuration error: the daemon keeps
/// asking). One fetch per engine, each bounded by `timeout`.
void print_discovery(const config::daemon_config& cfg, std::ostream& out,
                     std::chrono::milliseconds timeout = std::chrono::seconds(2));

/// `kvrelay --check`: config::run_check, then print_discovery. Exit code as run_check's.
int check_with_discovery(const config::flag_values& flags, std::ostream& out, std::ostream& err);

}  // namespace kvrelay
