// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The edge where typed status becomes JSON (the admin port and the tests' view of it). Every
// document is built with the JSON library, so names from the wire or the config (adapters,
// pipelines) are escaped, and invalid UTF-8 is replaced instead of breaking the document.

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.hpp"
#include "messages/supervision.hpp"

namespace kvrelay {

/// /debug/tree: the version, the uptime, engine discovery's status (when `discovery.kind` is
/// set: some engine has a URL), the memory budget (`memory_json`, a JSON object, when not
/// empty) and every pipeline's status tree.
std::string render_tree(const std::vector<pipeline_view>& pipelines, int64_t uptime_s,
                        const actor_status& discovery = {}, const std::string& memory_json = {});

/// /debug/engines: per pipeline its endpoints, connection, last seq, counters, readiness and
/// adapter map.
std::string render_engines(const std::vector<pipeline_view>& pipelines);

}  // namespace kvrelay
