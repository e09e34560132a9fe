// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/emitter/target_membership.hpp"

#include <algorithm>

namespace kvrelay::emitter {

target_membership::target_membership(std::vector<std::string> static_targets,
                                     std::vector<std::string> dns_names, int64_t min_retrigger_ms)
    : min_retrigger_ms_(min_retrigger_ms) {
  for (auto& t : static_targets) targets_[std::move(t)].is_static = true;
  names_.reserve(dns_names.size());
  for (auto& n : dns_names) {
    names_.emplace_back();
    names_.back().spec = std::move(n);
  }
}

void target_membership::resolve(size_t i, int64_t now_ms, actions& out) {
  auto& d = names_[i];
  if (d.in_flight) return;  // TM2
  d.in_flight = true;
  d.started_once = true;
  d.last_start_ms = now_ms;
  out.push_back({action::kind::resolve, i, {}, 0});
}

void target_membership::start(int64_t now_ms, actions& out) {
  for (size_t i = 0; i < names_.size(); ++i) resolve(i, now_ms, out);
}

void target_membership::on_interval(int64_t now_ms, actions& out) { start(now_ms, out); }

void target_membership::on_link_lost(const std::string& target, int64_t now_ms, actions& out) {
  const auto it = targets_.find(target);
  if (it == targets_.end()) return;
  for (const size_t i : it->second.names) {
    auto& d = names_[i];
    if (d.in_flight || d.deferred) continue;
    const int64_t wait = d.started_once ? d.last_start_ms + min_retrigger_ms_ - now_ms : 0;
    if (wait <= 0) {
      resolve(i, now_ms, out);
    } else {
      d.deferred = true;
      out.push_back({action::kind::resolve_later, i, {}, wait});
    }
  }
}

void target_membership::on_deferred_due(size_t name_index, int64_t now_ms, actions& out) {
  if (name_index >= names_.size()) return;
  names_[name_index].deferred = false;
  resolve(name_index, now_ms, out);
}

void target_membership::on_resolved(size_t i, std::vector<std::string> addresses,
                                    const std::string& error, actions& out) {
  if (i >= names_.size()) return;
  auto& d = names_[i];
  d.in_flight = false;
  if (!error.empty() || addresses.empty()) {  // TM4
    out.push_back({action::kind::resolve_failed, i, {}, 0});
    return;
  }
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  if (addresses == d.addresses) return;
  bool changed = false;
  // TM5: gone from this name's set.
  for (const auto& a : d.addresses) {
    if (std::binary_search(addresses.begin(), addresses.end(), a)) continue;
    auto it = targets_.find(a);
    if (it == targets_.end()) continue;
    auto& src = it->second.names;
    src.erase(std::remove(src.begin(), src.end(), i), src.end());
    if (src.empty() && !it->second.is_static) {
      targets_.erase(it);
      out.push_back({action::kind::drop_target, i, a, 0});
      changed = true;
    }
  }
  // TM6: new in it.
  for (const auto& a : addresses) {
    auto it = targets_.find(a);
    if (it != targets_.end()) {
      auto& src = it->second.names;
      if (std::find(src.begin(), src.end(), i) == src.end()) src.push_back(i);
      continue;
    }
    targets_[a].names.push_back(i);
    out.push_back({action::kind::add_target, i, a, 0});
    changed = true;
  }
  d.addresses = std::move(addresses);
  if (changed) out.push_back({action::kind::targets_changed, i, {}, 0});  // TM7
}

void target_membership::on_add_failed(const std::string& target) {
  const auto it = targets_.find(target);
  if (it == targets_.end() || it->second.is_static) return;
  for (const size_t i : it->second.names) {
    auto& a = names_[i].addresses;
    a.erase(std::remove(a.begin(), a.end(), target), a.end());
  }
  targets_.erase(it);
}

std::vector<std::string> target_membership::targets() const {
  std::vector<std::string> out;
  out.reserve(targets_.size());
  for (const auto& [t, s] : targets_) out.push_back(t);
  return out;
}

}  // namespace kvrelay::emitter
