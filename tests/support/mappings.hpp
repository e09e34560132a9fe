// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Which mapping of this process holds an address, from /proc/self/maps: for the tests of memory
// kvrelay maps itself (base/huge_pages.hpp, base/probe_table.hpp). Header-only.

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

namespace kvrelay::testing {

/// [begin, end) of the mapping holding `p`, or {0, 0} when none does.
inline std::pair<uintptr_t, uintptr_t> mapping_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find('-');
    const uintptr_t b = std::stoull(line.substr(0, dash), nullptr, 16);
    const uintptr_t e = std::stoull(line.substr(dash + 1), nullptr, 16);
    if (b <= a && a < e) return {b, e};
  }
  return {0, 0};
}

}  // namespace kvrelay::testing
