// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/decoder/group_filter.hpp"

#include <algorithm>

namespace kvrelay {

bool group_filter::admit(const block_stored& e) {
  if (e.kind != group_kind::unspecified) {
    if (e.group_idx) {
      auto it = kinds_.find(*e.group_idx);
      if (it != kinds_.end()) {
        it->second = e.kind;  // the latest statement about a group wins
      } else if (kinds_.size() < max_groups) {
        kinds_.emplace(*e.group_idx, e.kind);
      }
    }
    return e.kind == group_kind::main;
  }
  return !e.group_idx || admit_group(*e.group_idx, kinds_.empty());
}

bool group_filter::admit(const block_removed& e) const {
  return !e.group_idx || admit_group(*e.group_idx, true);
}

group_kind group_filter::kind_of(int64_t group) const {
  auto it = kinds_.find(group);
  return it == kinds_.end() ? group_kind::unspecified : it->second;
}

bool group_filter::admit_group(int64_t group, bool presume_zero) const {
  auto it = kinds_.find(group);
  if (it != kinds_.end()) return it->second == group_kind::main;
  return presume_zero && group == 0;
}

std::vector<std::pair<int64_t, uint8_t>> group_filter::export_kinds() const {
  std::vector<std::pair<int64_t, uint8_t>> out;
  out.reserve(kinds_.size());
  for (const auto& [g, k] : kinds_) out.emplace_back(g, static_cast<uint8_t>(k));
  std::sort(out.begin(), out.end());  // deterministic bytes (SF5)
  return out;
}

void group_filter::import_kinds(const std::vector<std::pair<int64_t, uint8_t>>& kinds) {
  for (const auto& [g, k] : kinds) {
    if (kinds_.size() >= max_groups) break;
    if (k > static_cast<uint8_t>(group_kind::other)) continue;
    kinds_[g] = static_cast<group_kind>(k);
  }
}

}  // namespace kvrelay
