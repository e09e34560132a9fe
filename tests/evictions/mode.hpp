// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Helpers shared by the eviction tests: the eviction mode as the configuration sets it, and the
// mode the running emitter actually uses (so a test can never pass in the wrong mode).

#include <nlohmann/json.hpp>

#include <ostream>

#include <string>

#include "config/settings.hpp"
#include "daemon/daemon.hpp"

namespace kvrelay::evictions {

inline void set_mode(config::daemon_config& cfg, config::eviction_mode m) {
  cfg.server.eviction_mode = m;
}

/// The first emitter's `eviction_mode` in /debug/tree ("" when there is none).
inline std::string emitter_mode(daemon& d) {
  const auto doc = nlohmann::json::parse(d.tree_json(), nullptr, false);
  if (doc.is_discarded()) return {};
  for (const auto& p : doc.value("pipelines", nlohmann::json::array()))
    for (const auto& c : p.value("children", nlohmann::json::array()))
      if (c.value("name", "") == "emitter") return c.value("eviction_mode", "");
  return {};
}

}  // namespace kvrelay::evictions

namespace kvrelay::config {
/// Test names and failure messages say "expire" / "rpc", not a byte dump.
inline void PrintTo(eviction_mode m, std::ostream* os) { *os << to_string(m); }
}  // namespace kvrelay::config
