// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "daemon/memory_setup.hpp"

#include "base/metrics_registry.hpp"
#include "base/read_file.hpp"

namespace kvrelay {

namespace {

// procfs and cgroup files: never more than a few lines.
std::optional<std::string> read_small(const std::string& path) {
  auto text = read_regular_file(path, size_t{64} << 10, path);
  if (!text) return std::nullopt;
  return std::move(text).value();
}

}  // namespace

budget_choice choose_budget(const config::daemon_config& cfg) {
  return resolve_budget(cfg.memory.budget > 0 ? static_cast<uint64_t>(cfg.memory.budget) : 0,
                        read_small);
}

void add_budget_metrics(metrics_registry& m, std::shared_ptr<const memory_budget> budget) {
  if (!budget) return;
  m.add_collector([b = std::move(budget)](std::string& out) {
    append_family(out, "kvrelay_memory_budget_bytes", "gauge",
                  "The memory budget every queue bound derives from, by where it came from",
                  {{{{"source", to_string(b->source())}}, static_cast<double>(b->total_bytes())}});
    append_family(out, "kvrelay_memory_pressure", "gauge",
                  "1 while the process' resident memory is at its pressure line (the cgroup "
                  "limit less a sixteenth): reading pauses until the queues drain",
                  {{{}, b->pressed() ? 1.0 : 0.0}});
    append_family(out, "kvrelay_memory_pressure_pauses_total", "counter",
                  "Ingress pauses that the process' measured memory started (not the charges)",
                  {{{}, static_cast<double>(b->pressure_pauses())}});
    append_family(out, "kvrelay_queue_limit_bytes", "gauge",
                  "The queues' share of the budget: the ingress pauses at it",
                  {{{}, static_cast<double>(b->limit_bytes())}});
    std::vector<sample_value> bytes, msgs;
    for (size_t i = 0; i < budget_queue_count; ++i) {
      const auto q = static_cast<budget_queue>(i);
      bytes.push_back({{{"queue", to_string(q)}}, static_cast<double>(b->bytes(q))});
      msgs.push_back({{{"queue", to_string(q)}}, static_cast<double>(b->messages(q))});
    }
    append_family(out, "kvrelay_queue_bytes", "gauge",
                  "Bytes charged to the memory budget by messages waiting in each queue", bytes);
    append_family(out, "kvrelay_queue_messages", "gauge",
                  "Messages charged to the memory budget waiting in each queue", msgs);
    append_family(out, "kvrelay_overloads_total", "counter",
                  "Times an ingress paused because the memory budget was spent",
                  {{{}, static_cast<double>(b->overloads())}});
    append_family(out, "kvrelay_ingress_paused_seconds_total", "counter",
                  "Time ingress readers spent paused by the memory budget (ended pauses)",
                  {{{}, static_cast<double>(b->paused_ns()) / 1e9}});
    append_family(out, "kvrelay_overloaded", "gauge",
                  "Ingress readers paused by the memory budget now",
                  {{{}, static_cast<double>(b->paused_readers())}});
  });
}

}  // namespace kvrelay
