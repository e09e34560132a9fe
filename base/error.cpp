// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/error.hpp"

namespace kvrelay {

const char* to_string(ec code) noexcept {
  switch (code) {
    case ec::no_error: return "no_error";
    case ec::unspecified: return "unspecified";
    case ec::invalid_config: return "invalid_config";
    case ec::endpoint_unusable: return "endpoint_unusable";
    case ec::source_failed: return "source_failed";
    case ec::rpc_failed: return "rpc_failed";
    case ec::crash_requested: return "crash_requested";
    case ec::drain_timeout: return "drain_timeout";
    case ec::discovery_failed: return "discovery_failed";
    case ec::bad_request: return "bad_request";
    case ec::not_running: return "not_running";
  }
  return "unknown";
}

std::string failure::render() const {
  std::string out = to_string(code);
  if (!context.empty()) out += ": " + context;
  return out;
}

}  // namespace kvrelay
