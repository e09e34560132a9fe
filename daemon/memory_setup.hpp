// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The process' memory budget at start: resolved once from the configuration and the
// cgroup (base/memory_budget.hpp MS1-MS4), shared by every pipeline, and shown on /metrics
// (kvrelay_memory_budget_bytes, kvrelay_queue_bytes/messages, kvrelay_overloads_total,
// kvrelay_ingress_paused_seconds_total); its JSON for --check and /debug/tree is
// admin/status_render.hpp's budget_json.

#include <memory>
#include <string>

#include "base/memory_budget.hpp"
#include "config/settings.hpp"

namespace kvrelay {

class metrics_registry;

/// MS1-MS4 over the real /proc/self/cgroup and /sys/fs/cgroup.
budget_choice choose_budget(const config::daemon_config& cfg);

/// Scrape-time families for the budget and its queues.
void add_budget_metrics(metrics_registry& m, std::shared_ptr<const memory_budget> budget);

}  // namespace kvrelay
