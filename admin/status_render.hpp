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

#include "base/memory_budget.hpp"
#include "base/status.hpp"
#include "messages/supervision.hpp"

namespace kvrelay {

/// /debug/tree: the version, the uptime, engine discovery's status (when `discovery.kind` is
/// set: some engine has a URL), the memory budget (`memory_json`, a JSON object, when not
/// empty) and every pipeline's status tree.
std::string render_tree(const std::vector<pipeline_view>& pipelines, int64_t uptime_s,
                        const actor_status& discovery = {}, const std::string& memory_json = {});

/// /debug/engines: per pipeline its endpoints, connection, last seq, counters, readiness, its
/// adapters (every partition with its resident blocks, and the LoRA id map).
std::string render_engines(const std::vector<pipeline_view>& pipelines);

/// /readyz's lines about policy-server targets, for a pipeline with more than one: one per
/// target that is down, "<pipeline>: policy target <t> is down (<up> of <n> up): <last error>",
/// prefixed "degraded (still ready): " while the pipeline is ready (server.readiness lets one
/// target stand in for another). With one target, readiness's own reason says it.
std::vector<std::string> target_readiness_lines(const std::vector<pipeline_view>& pipelines);

/// The memory budget and its queues now, as a JSON object (/debug/tree's "memory", --check):
/// budget_bytes, budget_source, queue_limit_bytes, queue_limit_messages, queues (bytes and
/// messages of each), overloads, paused_readers.
std::string budget_json(const memory_budget& b);

}  // namespace kvrelay
