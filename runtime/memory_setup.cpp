// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "runtime/memory_setup.hpp"

#include <fstream>
#include <sstream>

#include "base/metrics_registry.hpp"

namespace kvrelay {

namespace {

std::optional<std::string> read_small(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > (size_t{64} << 10)) break;  // procfs: never more than a few lines
  }
  return text;
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

std::string budget_json(const memory_budget& b) {
  std::ostringstream o;
  o << "{\"budget_bytes\":" << b.total_bytes() << ",\"budget_source\":\"" << to_string(b.source())
    << "\",\"queue_limit_bytes\":" << b.limit_bytes()
    << ",\"queue_limit_messages\":" << b.limit_messages() << ",\"queues\":{";
  for (size_t i = 0; i < budget_queue_count; ++i) {
    const auto q = static_cast<budget_queue>(i);
    o << (i ? "," : "") << "\"" << to_string(q) << "\":{\"bytes\":" << b.bytes(q)
      << ",\"messages\":" << b.messages(q) << "}";
  }
  o << "},\"overloads\":" << b.overloads() << ",\"paused_readers\":" << b.paused_readers() << "}";
  return o.str();
}

}  // namespace kvrelay
