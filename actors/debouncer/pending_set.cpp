// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/debouncer/pending_set.hpp"

#include <algorithm>
#include <map>

namespace kvrelay {

uint32_t pending_set::adapter_index(const std::string& name) {
  auto it = adapter_ids_.find(name);
  if (it != adapter_ids_.end()) return it->second;
  auto id = static_cast<uint32_t>(adapters_.size());
  adapters_.push_back(name);
  adapter_ids_.emplace(name, id);
  return id;
}

void pending_set::set(const key& k, const entry& e) {
  auto [it, inserted] = entries_.try_emplace(k, e);
  if (!inserted) {
    if (it->second.s == state::add) --adds_;
    it->second = e;
  } else {
    peak_ = std::max(peak_, entries_.size());
  }
  if (e.s == state::add) ++adds_;
}

void pending_set::erase(entry_map::iterator it) {
  if (it->second.s == state::add) --adds_;
  entries_.erase(it);
}

void pending_set::evict(const key& k, int64_t ts_us) {
  auto it = entries_.find(k);
  if (it != entries_.end() && it->second.s == state::add && it->second.fresh) {
    erase(it);  // neither the add nor its eviction ever reaches the server
    ++drops_.unsent_pairs;
    return;
  }
  if (it == entries_.end() && (clear_ || (tracking_ && !reported_.contains(k)))) {
    ++drops_.unreported;  // cleared since, and not re-reported: the server cannot hold it
    return;
  }
  set(k, entry{state::evict, false, tier::t1, 0, ts_us});
}

pending_set::apply_result pending_set::apply(const shard_ops& ops) {
  if (ops.had_store && ops.ts_us > 0) adds_ts_us_ = std::max(adds_ts_us_, ops.ts_us);
  const uint32_t a = adapter_index(ops.adapter);
  // A window of a fast engine holds 10^5 keys and more, far past the cache: each op's slot is
  // asked for a few ops ahead, so its miss overlaps the ones before it instead of stalling. A
  // map that fits the cache (a paced engine's window) only pays the second hash: not asked.
  constexpr size_t ahead = 8;
  const size_t n = ops.ops.size();
  const bool far = entries_.size() + n > 32768;  // ~1.3 MB of slots: past a core's L2
  if (far)
    for (size_t i = 0; i < std::min(ahead, n); ++i)
      entries_.prefetch(key{a, ops.ops[i].fingerprint});
  for (size_t i = 0; i < n; ++i) {
    if (far && i + ahead < n) entries_.prefetch(key{a, ops.ops[i + ahead].fingerprint});
    const prefix_op& op = ops.ops[i];
    const key k{a, op.fingerprint};
    if (op.op == prefix_op::kind::upsert) {
      // One probe: the slot is found or made, then filled.
      auto [it, inserted] = entries_.try_emplace(k);
      bool fresh;
      if (inserted) {
        fresh = op.introduces || clear_ || (tracking_ && !reported_.contains(k));
        peak_ = std::max(peak_, entries_.size());
      } else {
        fresh = it->second.s == state::add && it->second.fresh;  // over an eviction: never
        if (it->second.s == state::add) --adds_;
      }
      it->second = entry{state::add, fresh, op.t, op.token_count, 0};
      ++adds_;
    } else if (opts_.l2_mode) {
      // The block leaves the GPU but an L2 tier below the engine keeps it: report T2 with the
      // eviction's time (L03). Its token count is the one we reported it with.
      auto it = entries_.find(k);
      uint32_t tokens = op.token_count;
      if (tokens == 0 && it != entries_.end()) tokens = it->second.token_count;
      set(k, entry{state::downgrade, false, tier::t2, tokens, ops.ts_us});
    } else {
      evict(k, ops.ts_us);
    }
  }
  if (entries_.size() <= opts_.max_entries) return apply_result::ok;
  // Adds are copies of what the index holds: a walk re-reports them. Evictions and downgrades
  // are not in the index any more: only a clear makes them moot.
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto cur = it++;
    if (cur->second.s != state::add) continue;
    ++drops_.shed;
    erase(cur);
  }
  adds_ts_us_ = 0;
  if (entries_.size() <= opts_.max_entries) {
    maybe_release();
    return apply_result::shed_adds;
  }
  return apply_result::full;
}

size_t pending_set::heap_bytes() const noexcept {
  // Per entry: a Swiss table's slot and control byte at its 7/8 load (an empty map's capacity
  // is not counted: it is released past shrink_above, and below it too small to matter).
  return (entries_.size() * (sizeof(std::pair<key, entry>) + 1) +
          reported_.size() * (sizeof(key) + 1)) * 8 / 7;
}

void pending_set::note_sent(const std::string& adapter, const std::vector<prefix_op>& ops) {
  if (entries_.empty() && !tracking_) return;
  const uint32_t a = adapter_index(adapter);
  for (const auto& op : ops) {
    const key k{a, op.fingerprint};
    if (tracking_) reported_.insert(k);
    auto it = entries_.find(k);
    if (it != entries_.end() && it->second.s == state::add) it->second.fresh = false;
  }
  if (tracking_ && reported_.size() > opts_.max_entries) end_tracking();
}

void pending_set::clear(int64_t ts_us) {
  reset();
  reported_.clear();  // nothing went out since this clear
  clear_ = true;
  clear_ts_us_ = ts_us;
}

void pending_set::reset() {
  entries_.clear();
  adds_ = 0;
  adds_ts_us_ = 0;
  maybe_release();
}

void pending_set::drop_for_resync() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto cur = it++;
    if (cur->second.s == state::downgrade) continue;
    ++drops_.superseded;
    erase(cur);
  }
  adds_ts_us_ = 0;
  clear_ = false;
  tracking_ = true;
  reported_.clear();
  maybe_release();
}

void pending_set::end_tracking() {
  tracking_ = false;
  if (reported_.size() > opts_.shrink_above) released_ = true;
  key_set().swap(reported_);
}

void pending_set::maybe_release() {
  if (!entries_.empty() || peak_ <= opts_.shrink_above) return;
  entry_map().swap(entries_);
  peak_ = 0;
  released_ = true;
}

std::optional<emit_unit> pending_set::take(uint64_t id) {
  if (empty()) return std::nullopt;
  emit_unit u;
  u.id = id;
  u.clear = clear_;
  u.clear_ts_us = clear_ts_us_;
  clear_ = false;
  std::map<int64_t, size_t> downgrade_group;  // ts → index in u.downgrades
  size_t adds_taken = 0;
  // Evictions and downgrades all go; adds up to the cap. Once both are done the scan stops: a
  // backlog of adds larger than the cap is otherwise walked whole by every unit (quadratic).
  size_t others_left = entries_.size() - adds_;
  u.adds.reserve(std::min(adds_, opts_.max_adds_per_unit));
  u.evicts.reserve(others_left);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (adds_taken >= opts_.max_adds_per_unit && others_left == 0) break;
    const auto& [k, e] = *it;
    const std::string& adapter = adapters_[k.first];
    if (e.s != state::add) --others_left;
    if (e.s == state::add) {
      if (adds_taken >= opts_.max_adds_per_unit) {
        ++it;
        continue;
      }
      u.adds.push_back(prefix_add{k.second, e.token_count, e.t, adapter});
      ++adds_taken;
      --adds_;
      if (tracking_) reported_.insert(k);
    } else if (e.s == state::downgrade) {
      auto [g, fresh] = downgrade_group.try_emplace(e.ts_us, u.downgrades.size());
      if (fresh) u.downgrades.push_back(emit_unit::downgrade_group{e.ts_us, {}});
      u.downgrades[g->second].entries.push_back(prefix_add{k.second, e.token_count, e.t, adapter});
    } else {
      u.evicts.push_back(prefix_evict{k.second, adapter, e.ts_us});
      if (tracking_) reported_.erase(k);
    }
    entries_.erase(it++);
  }
  // Tracking is a help, not a duty: past the bound, evictions are simply sent again.
  if (tracking_ && reported_.size() > opts_.max_entries) end_tracking();
  u.adds_ts_us = adds_ts_us_;
  if (adds_ == 0) adds_ts_us_ = 0;  // a flush resets the add timestamp (R12)
  maybe_release();
  return u;
}

}  // namespace kvrelay
