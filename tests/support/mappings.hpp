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

/// Calls fn(begin, end) for every mapping of this process.
template <class F>
void for_each_mapping(F&& fn) {
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find('-');
    fn(static_cast<uintptr_t>(std::stoull(line.substr(0, dash), nullptr, 16)),
       static_cast<uintptr_t>(std::stoull(line.substr(dash + 1), nullptr, 16)));
  }
}

/// [begin, end) of the mapping holding `p`, or {0, 0} when none does.
inline std::pair<uintptr_t, uintptr_t> mapping_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::pair<uintptr_t, uintptr_t> found{0, 0};
  for_each_mapping([&](uintptr_t b, uintptr_t e) {
    if (b <= a && a < e) found = {b, e};
  });
  return found;
}

/// Bytes of address space this process has mapped (every mapping, merged or not).
inline size_t mapped_bytes() {
  size_t total = 0;
  for_each_mapping([&](uintptr_t b, uintptr_t e) { total += e - b; });
  return total;
}

}  // namespace kvrelay::testing
