// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "durable/format/snapshot_policy.hpp"

#include <algorithm>
#include <cmath>

namespace kvrelay::snapshot {

const char* to_string(discard_reason r) noexcept {
  switch (r) {
    case discard_reason::unreadable: return "unreadable";
    case discard_reason::not_a_snapshot: return "not_a_snapshot";
    case discard_reason::other_version: return "other_version";
    case discard_reason::truncated: return "truncated";
    case discard_reason::corrupt: return "corrupt";
    case discard_reason::other_pipeline: return "other_pipeline";
    case discard_reason::engine_restarted: return "engine_restarted";
    case discard_reason::no_evidence: return "no_evidence";
    case discard_reason::proof_missing: return "proof_missing";
    case discard_reason::ring_moved_on: return "ring_moved_on";
    case discard_reason::log_incomplete: return "log_incomplete";
  }
  return "unknown";
}

const char* describe(discard_reason r) noexcept {
  switch (r) {
    case discard_reason::unreadable: return "the snapshot file cannot be read";
    case discard_reason::not_a_snapshot: return "the file is not a kvrelay snapshot";
    case discard_reason::other_version: return "the snapshot is from another kvrelay version";
    case discard_reason::truncated: return "the snapshot file is truncated";
    case discard_reason::corrupt: return "the snapshot file is corrupt";
    case discard_reason::other_pipeline:
      return "the snapshot belongs to another replica, model or engine";
    case discard_reason::engine_restarted:
      return "the engine restarted since the snapshot (another process)";
    case discard_reason::no_evidence:
      return "the snapshot recorded nothing that identifies its engine process";
    case discard_reason::proof_missing:
      return "the engine's process cannot be identified (no process_start_time_seconds on its "
             "/metrics)";
    case discard_reason::ring_moved_on:
      return "the engine's replay ring no longer reaches back to the snapshot";
    case discard_reason::log_incomplete:
      return "the delta log does not reach back to the start of the engine's history it "
             "continues";
  }
  return "unknown";
}

discard_reason from_fault(fault f) noexcept {
  switch (f) {
    case fault::not_a_snapshot: return discard_reason::not_a_snapshot;
    case fault::other_version: return discard_reason::other_version;
    case fault::truncated: return discard_reason::truncated;
    case fault::corrupt: return discard_reason::corrupt;
  }
  return discard_reason::corrupt;
}

sameness compare(const evidence& a, const evidence& b) noexcept {
  if (!a.lifetime_id.empty() && !b.lifetime_id.empty())  // RD2
    return a.lifetime_id == b.lifetime_id ? sameness::same : sameness::different;
  if (a.start_time && b.start_time)  // RD3
    return std::fabs(*a.start_time - *b.start_time) < 0.005 ? sameness::same
                                                            : sameness::different;
  return sameness::unknown;
}

namespace {

std::string first_difference(const identity& a, const identity& b) {
  const auto field = [](const char* name, const std::string& x, const std::string& y) {
    return std::string(name) + " \"" + x + "\", this pipeline's \"" + y + "\"";
  };
  if (a.replica_id != b.replica_id) return field("replica_id", a.replica_id, b.replica_id);
  if (a.model_id != b.model_id) return field("model_id", a.model_id, b.model_id);
  if (a.tenant_id != b.tenant_id) return field("tenant_id", a.tenant_id, b.tenant_id);
  if (a.hash_scheme != b.hash_scheme) return field("hash_scheme", a.hash_scheme, b.hash_scheme);
  if (a.endpoint != b.endpoint) return field("endpoint", a.endpoint, b.endpoint);
  if (a.topic != b.topic) return field("topic", a.topic, b.topic);
  return "dp_rank " + std::to_string(a.dp_rank) + ", this pipeline's " + std::to_string(b.dp_rank);
}

std::string show(const evidence& e) {
  std::string out;
  if (e.start_time) out = "process start " + std::to_string(*e.start_time);
  if (!e.lifetime_id.empty()) out += (out.empty() ? "" : ", ") + std::string("lifetime id ") + e.lifetime_id;
  return out.empty() ? "none" : out;
}

}  // namespace

verdict decide(const pipeline_snapshot& s, const identity& expected, const evidence& now) {
  verdict v;
  if (s.who != expected) {  // RD1
    v.discard = discard_reason::other_pipeline;
    v.detail = "written for " + first_difference(s.who, expected);
    return v;
  }
  if (s.engine.empty()) {  // RD4
    v.discard = discard_reason::no_evidence;
    return v;
  }
  switch (compare(s.engine, now)) {
    case sameness::same: return v;
    case sameness::different:  // RD2, RD3
      v.discard = discard_reason::engine_restarted;
      v.detail = "snapshot: " + show(s.engine) + "; engine now: " + show(now);
      return v;
    case sameness::unknown: break;
  }
  v.discard = discard_reason::proof_missing;  // RD4
  v.detail = "snapshot: " + show(s.engine) + "; engine now: " + show(now);
  return v;
}

bool may_write(const evidence& incarnation, const evidence& now) noexcept {
  return compare(incarnation, now) == sameness::same;  // RD7
}

std::chrono::milliseconds interval(uint64_t ring_batches, double batches_per_second) {
  using ms = std::chrono::milliseconds;
  constexpr ms lo{1000}, hi{60000};
  if (!(batches_per_second > 0) || ring_batches == 0) return hi;  // RD8: no rate known
  const double span_ms = static_cast<double>(ring_batches) / batches_per_second * 1000.0;
  const double quarter = span_ms / 4;
  if (quarter >= static_cast<double>(hi.count())) return hi;
  return std::clamp(ms(static_cast<int64_t>(quarter)), lo, hi);
}

}  // namespace kvrelay::snapshot
