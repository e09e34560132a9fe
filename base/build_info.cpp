// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/build_info.hpp"

#include <cstring>

namespace kvrelay::build {

std::string short_revision() {
  const std::string r = revision();
  const auto dash = r.find('-');
  const std::string hex = r.substr(0, dash);
  if (hex.size() <= 12) return r;
  return hex.substr(0, 12) + (dash == std::string::npos ? std::string() : r.substr(dash));
}

std::string describe() {
  return std::string(KVRELAY_VERSION) + " (revision " + short_revision() + ", " + date() + ")";
}

}  // namespace kvrelay::build
