// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What every actor of one pipeline is told about where it lives, instead of a row of arguments
// to each spawn function: its name (the "replica" log field and metric label), who it reports as,
// the metrics registry with the pipeline's label already applied, and the wall clock (tests pin
// it). Cheap to copy; actors keep their own copy and resolve their metric series once, at spawn.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/clock.hpp"
#include "base/metrics_registry.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay {

struct pipeline_context {
  /// Pipeline name, e.g. "vllm-0" or "vllm-0-dp1": log field and metric label "replica".
  std::string name;
  /// Who the pipeline reports as to the policy server.
  replica_identity identity;
  std::shared_ptr<metrics_registry> metrics = std::make_shared<metrics_registry>();
  /// Wall-clock µs since the epoch.
  std::function<int64_t()> wall_us = [] { return now_us(); };
  /// The pipeline's supervisor, told health facts as they change (may be invalid in tests).
  health_listener_actor health;
  /// The process' memory budget, shared by every pipeline (null: nothing is charged).
  std::shared_ptr<memory_budget> budget;

  /// {"replica", name} followed by `extra`.
  label_set labels(label_set extra = {}) const {
    label_set l{{"replica", name}};
    l.insert(l.end(), extra.begin(), extra.end());
    return l;
  }
  counter_series& counter(const std::string& metric, const std::string& help,
                          label_set extra = {}) const {
    return metrics->counter(metric, help, labels(std::move(extra)));
  }
  gauge_series& gauge(const std::string& metric, const std::string& help,
                      label_set extra = {}) const {
    return metrics->gauge(metric, help, labels(std::move(extra)));
  }
  histogram_series& histogram(const std::string& metric, const std::string& help,
                              const std::vector<double>& bounds, label_set extra = {}) const {
    return metrics->histogram(metric, help, bounds, labels(std::move(extra)));
  }
};

}  // namespace kvrelay
