// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/debouncer/sweep_repair.hpp"

#include <algorithm>
#include <utility>

namespace kvrelay::debounce {

void sweep_repair::forget_all() {
  // A big mirror's memory goes with it (swap, not clear: clear keeps the buckets).
  absl::flat_hash_map<uint64_t, std::vector<held>>().swap(by_fp_);
  keys_ = 0;
}

void sweep_repair::upsert(const prefix_add& a) {
  if (a.adapter.empty() || overflowed_) return;
  auto& v = by_fp_[a.fingerprint];
  for (auto& h : v) {
    if (h.adapter == a.adapter) {
      h.token_count = a.token_count;
      h.t = a.t;
      return;
    }
  }
  if (keys_ >= max_keys_) {  // SR4
    overflowed_ = true;
    ++c_.overflows;
    forget_all();
    return;
  }
  v.push_back({a.adapter, a.token_count, a.t});
  ++keys_;
}

void sweep_repair::erase(uint64_t fp, const std::string& adapter) {
  auto it = by_fp_.find(fp);
  if (it == by_fp_.end()) return;
  auto& v = it->second;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].adapter != adapter) continue;
    v[i] = std::move(v.back());
    v.pop_back();
    --keys_;
    break;
  }
  if (v.empty()) by_fp_.erase(it);
}

void sweep_repair::on_cleared() {  // SR1, SR4: a clear starts afresh
  forget_all();
  overflowed_ = false;
}

void sweep_repair::on_unit(emit_unit& u) {
  if (u.clear) on_cleared();
  for (const auto& a : u.adds) upsert(a);
  for (const auto& g : u.downgrades)
    for (const auto& a : g.entries) upsert(a);
  for (const auto& e : u.evicts)
    if (!e.adapter.empty()) erase(e.fingerprint, e.adapter);
  if (overflowed_) return;
  // SR2: after the unit's own changes, what a base-model eviction sweeps and must put back.
  for (const auto& e : u.evicts) {
    if (!e.adapter.empty()) continue;
    auto it = by_fp_.find(e.fingerprint);
    if (it == by_fp_.end()) continue;
    u.restores_ts_us = std::max(u.restores_ts_us, e.ts_us);
    // A key is in a unit once (U1), so each (A, F) is restored once.
    for (const auto& h : it->second) {
      u.restores.push_back({e.fingerprint, h.token_count, h.t, h.adapter});
      ++c_.restored;
    }
  }
}

}  // namespace kvrelay::debounce
