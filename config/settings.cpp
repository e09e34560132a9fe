// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "config/settings.hpp"

namespace kvrelay::config {
namespace {

// One name table per enum, in the order messages list them; parse is an exact match.
template <class E, size_t N>
bool parse_from(const char* const (&names)[N], std::string_view s, E& out) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

constexpr const char* dp_mode_names[] = {"separate", "merged"};
constexpr const char* unknown_parent_names[] = {"drop", "root"};
constexpr const char* cache_tier_names[] = {"auto", "kv", "gpu", "cpu"};
constexpr const char* eviction_mode_names[] = {"auto", "expire", "rpc"};
constexpr const char* shutdown_action_names[] = {"clear", "keep"};
constexpr const char* readiness_policy_names[] = {"any", "all", "quorum"};
constexpr const char* admin_public_names[] = {"auto", "on", "off"};
constexpr const char* cpu_scheduling_names[] = {"batch", "inherit"};
constexpr const char* log_format_names[] = {"json", "text"};
constexpr const char* log_level_names[] = {"debug", "info", "warn", "error"};

}  // namespace

const char* to_string(dp_mode v) { return dp_mode_names[static_cast<size_t>(v)]; }
const char* to_string(unknown_parent v) { return unknown_parent_names[static_cast<size_t>(v)]; }
const char* to_string(cache_tier v) { return cache_tier_names[static_cast<size_t>(v)]; }
const char* to_string(eviction_mode v) { return eviction_mode_names[static_cast<size_t>(v)]; }
const char* to_string(shutdown_action v) {
  return shutdown_action_names[static_cast<size_t>(v)];
}
const char* to_string(readiness_policy v) {
  return readiness_policy_names[static_cast<size_t>(v)];
}
const char* to_string(admin_public v) { return admin_public_names[static_cast<size_t>(v)]; }
const char* to_string(cpu_scheduling v) {
  return cpu_scheduling_names[static_cast<size_t>(v)];
}
const char* to_string(log_format v) { return log_format_names[static_cast<size_t>(v)]; }
const char* to_string(log_level v) { return log_level_names[static_cast<size_t>(v)]; }

bool parse(std::string_view s, dp_mode& out) { return parse_from(dp_mode_names, s, out); }
bool parse(std::string_view s, unknown_parent& out) {
  return parse_from(unknown_parent_names, s, out);
}
bool parse(std::string_view s, cache_tier& out) { return parse_from(cache_tier_names, s, out); }
bool parse(std::string_view s, eviction_mode& out) {
  return parse_from(eviction_mode_names, s, out);
}
bool parse(std::string_view s, shutdown_action& out) {
  return parse_from(shutdown_action_names, s, out);
}
bool parse(std::string_view s, readiness_policy& out) {
  return parse_from(readiness_policy_names, s, out);
}
bool parse(std::string_view s, admin_public& out) {
  return parse_from(admin_public_names, s, out);
}
bool parse(std::string_view s, cpu_scheduling& out) {
  return parse_from(cpu_scheduling_names, s, out);
}
bool parse(std::string_view s, log_format& out) { return parse_from(log_format_names, s, out); }
bool parse(std::string_view s, log_level& out) { return parse_from(log_level_names, s, out); }

const char* allowed_dp_modes() { return "separate, merged"; }
const char* allowed_unknown_parents() { return "drop, root"; }
const char* allowed_cache_tiers() { return "auto, kv, gpu, cpu"; }
const char* allowed_eviction_modes() { return "auto, expire, rpc"; }
const char* allowed_shutdown_actions() { return "clear, keep"; }
const char* allowed_readiness_policies() { return "any, all, quorum"; }
const char* allowed_admin_public() { return "auto, on, off"; }
const char* allowed_cpu_schedulings() { return "batch, inherit"; }
const char* allowed_log_formats() { return "json, text"; }
const char* allowed_log_levels() { return "debug, info, warn, error"; }

}  // namespace kvrelay::config
