// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/debouncer/pending_set.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <type_traits>

namespace kvrelay {

namespace {

// absl's prefetch() does nothing but __builtin_prefetch, so GCC deems it free of effects and
// drops every call to it that it has not inlined (apply() had no prefetch instruction at all;
// base/probe_table.hpp tells the same of a helper of ours). Flattened here it is inlined, and
// the empty asm keeps this wrapper itself from being dropped.
template <class Map>
[[gnu::flatten]] void ask_for_slot(const Map& m, uint64_t fp) noexcept {
  static_assert(std::is_integral_v<typename Map::key_type>,
                "flatten inlines the key's whole hash: keep it to integer keys");
  m.prefetch(fp);
  asm volatile("");
}

}  // namespace

uint32_t pending_set::adapter_index(const std::string& name) {
  auto it = adapter_ids_.find(name);
  if (it != adapter_ids_.end()) return it->second;
  auto id = static_cast<uint32_t>(adapters_.size());
  adapters_.push_back(name);
  adapter_ids_.emplace(name, id);
  maps_.emplace_back();
  return id;
}

bool pending_set::fresh_key(const key& k, bool introduces) const {
  return introduces || clear_ || (tracking_ && !reported_.contains(k));
}

void pending_set::note_size() { peak_ = std::max(peak_, size()); }

// A key is pending in one map only: an add over a pending removal replaces it, and the server
// may hold the key until that removal would have gone, so such an add is never fresh.
bool pending_set::replaces_removal(adapter_maps& m, uint64_t fp) {
  if (m.removals.empty()) return false;
  auto r = m.removals.find(fp);
  if (r == m.removals.end()) return false;
  m.removals.erase(r);
  --removals_;
  return true;
}

void pending_set::upsert(adapter_maps& m, const key& k, const prefix_op& op) {
  if (op.introduces && m.adds.empty() && opts_.log_adds) {
    // No add of this key can be pending (the header comment): appended, no lookup. It
    // introduces its key, so it is fresh unless it replaces a removal.
    const bool fresh = !replaces_removal(m, k.second);
    m.log.push_back(logged_add{k.second, op.token_count, op.t, fresh});
    ++adds_;
    note_size();
    return;
  }
  log_to_map(m);
  // One probe: the slot is found or made, then filled.
  auto [it, inserted] = m.adds.try_emplace(k.second);
  if (inserted) {
    ++adds_;
    note_size();
    it->second.fresh = !replaces_removal(m, k.second) && fresh_key(k, op.introduces);
  }
  it->second.token_count = op.token_count;
  it->second.t = op.t;
}

void pending_set::set_removal(adapter_maps& m, uint64_t fp, const removal_entry& r) {
  auto [it, inserted] = m.removals.try_emplace(fp, r);
  if (inserted) {
    ++removals_;
    note_size();
  } else {
    it->second = r;
  }
}

void pending_set::log_to_map(adapter_maps& m) {
  const size_t n = m.logged();
  if (n == 0) return;
  m.adds.reserve(n);  // once, at its size: the map is empty while the log holds adds
  for (size_t i = m.log_head; i < m.log.size(); ++i) {
    const logged_add& e = m.log[i];
    auto [it, inserted] = m.adds.try_emplace(e.fp, add_entry{e.token_count, e.t, e.fresh});
    if (!inserted) {  // the same fingerprint logged twice: one add, the latest tier and count
      it->second.token_count = e.token_count;
      it->second.t = e.t;
      --adds_;
    }
  }
  // A paced engine's log is moved every window: it keeps its array for the next one. A burst's
  // is not left beside the map it was moved into.
  m.clear_log(m.log.capacity() > opts_.shrink_above);
  m.resume.reset();
}

void pending_set::remove(adapter_maps& m, const key& k, const prefix_op& op, int64_t ts_us) {
  log_to_map(m);
  auto a = m.adds.find(k.second);
  if (opts_.l2_mode) {
    // The block leaves the GPU but an L2 tier below the engine keeps it: report T2 with the
    // eviction's time (L03). Its token count is the one we reported it with.
    uint32_t tokens = op.token_count;
    if (a != m.adds.end()) {
      if (tokens == 0) tokens = a->second.token_count;
      m.adds.erase(a);
      --adds_;
    } else if (tokens == 0) {
      if (auto r = m.removals.find(k.second); r != m.removals.end()) tokens = r->second.token_count;
    }
    set_removal(m, k.second, removal_entry{ts_us, tokens, tier::t2, true});
    return;
  }
  if (a != m.adds.end()) {
    const bool fresh = a->second.fresh;
    m.adds.erase(a);
    --adds_;
    if (fresh) {
      ++drops_.unsent_pairs;  // neither the add nor its eviction ever reaches the server
      return;
    }
  } else if ((clear_ || (tracking_ && !reported_.contains(k))) && !m.removals.contains(k.second)) {
    // (The map last: an evicting engine's every removal came here to probe it for nothing.)
    ++drops_.unreported;  // cleared since, and not re-reported: the server cannot hold it
    return;
  }
  set_removal(m, k.second, removal_entry{ts_us, 0, tier::t1, false});
}

pending_set::apply_result pending_set::apply(const shard_ops& ops) {
  if (ops.had_store && ops.ts_us > 0) adds_ts_us_ = std::max(adds_ts_us_, ops.ts_us);
  const uint32_t a = adapter_index(ops.adapter);
  adapter_maps& m = maps_[a];
  // Each op's slot is asked for a few ops ahead, in each map that (with the ops coming) holds
  // more than a few thousand entries, so its miss overlaps the ones before it instead of
  // stalling. A smaller map is not asked: whatever it misses costs less than a second hash of
  // every op. A bigger one is missed at most ops even while it is smaller than L2: at 0.2 core
  // kvrelay runs 20 ms in 100, and the engine and the server have its core's caches for the rest
  // (a catch-up: the add an eviction finds and the removal an add looks for took 15-19 % of
  // kvrelay's samples unasked, 10 % asked; the asking, 2 points more).
  constexpr size_t ahead = 8;
  constexpr size_t near = 4096;
  const size_t n = ops.ops.size();
  // (A log, or a map still empty, is not probed: nothing to ask for.)
  const bool far_adds = !m.adds.empty() && m.adds.size() + n > near;
  const bool far_removals = !m.removals.empty() && m.removals.size() + n > near;
  const auto ask = [&](size_t i) {
    if (far_adds) ask_for_slot(m.adds, ops.ops[i].fingerprint);
    if (far_removals) ask_for_slot(m.removals, ops.ops[i].fingerprint);
  };
  const bool asking = far_adds || far_removals;
  if (asking)
    for (size_t i = 0; i < std::min(ahead, n); ++i) ask(i);
  for (size_t i = 0; i < n; ++i) {
    if (asking && i + ahead < n) ask(i + ahead);
    const prefix_op& op = ops.ops[i];
    const key k{a, op.fingerprint};
    if (op.op == prefix_op::kind::upsert) {
      upsert(m, k, op);
    } else {
      remove(m, k, op, ops.ts_us);
    }
  }
  if (size() <= opts_.max_entries) return apply_result::ok;
  // Adds are copies of what the index holds: a walk re-reports them. Evictions and downgrades
  // are not in the index any more: only a clear makes them moot.
  drop_adds(drops_.shed);
  adds_ts_us_ = 0;
  if (size() <= opts_.max_entries) {
    maybe_release();
    return apply_result::shed_adds;
  }
  return apply_result::full;
}

void pending_set::drop_adds(uint64_t& counter) {
  for (auto& m : maps_) {
    counter += m.adds.size() + m.logged();
    m.adds.clear();
    m.clear_log(false);
  }
  adds_ = 0;
}

size_t pending_set::heap_bytes() const noexcept {
  // Per entry: a Swiss table's slot and control byte at its 7/8 load (an empty map's capacity
  // is not counted: it is released past shrink_above, and below it too small to matter). A log
  // with adds in it: its array, up to twice what it holds plus what went out of it.
  using add_slot = std::pair<const uint64_t, add_entry>;
  using removal_slot = std::pair<const uint64_t, removal_entry>;
  size_t logged = 0, log_bytes = 0;
  if (adds_ != 0) {
    for (const auto& m : maps_) {
      if (m.logged() == 0) continue;
      logged += m.logged();
      log_bytes += m.log.capacity() * sizeof(logged_add);
    }
  }
  return ((adds_ - logged) * (sizeof(add_slot) + 1) + removals_ * (sizeof(removal_slot) + 1) +
          reported_.size() * (sizeof(key) + 1)) * 8 / 7 + log_bytes;
}

size_t pending_set::allocated_bytes() const noexcept {
  using add_slot = std::pair<const uint64_t, add_entry>;
  using removal_slot = std::pair<const uint64_t, removal_entry>;
  size_t bytes = reported_.capacity() * (sizeof(key) + 1);
  for (const auto& m : maps_)
    bytes += m.adds.capacity() * (sizeof(add_slot) + 1) +
             m.removals.capacity() * (sizeof(removal_slot) + 1) +
             m.log.capacity() * sizeof(logged_add);
  return bytes;
}

void pending_set::note_sent(const std::string& adapter, const std::vector<prefix_op>& ops) {
  if (adds_ == 0 && !tracking_) return;
  const uint32_t a = adapter_index(adapter);
  log_to_map(maps_[a]);  // each op below looks its key up
  auto& adds = maps_[a].adds;
  for (const auto& op : ops) {
    if (tracking_) reported_.insert(key{a, op.fingerprint});
    if (auto it = adds.find(op.fingerprint); it != adds.end()) it->second.fresh = false;
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
  for (auto& m : maps_) {
    m.adds.clear();
    m.removals.clear();
    m.clear_log(false);
  }
  adds_ = 0;
  removals_ = 0;
  adds_ts_us_ = 0;
  maybe_release();
}

void pending_set::drop_for_resync() {
  drop_adds(drops_.superseded);
  for (auto& m : maps_) {
    for (auto it = m.removals.begin(); it != m.removals.end();) {
      auto cur = it++;
      if (cur->second.downgrade) continue;
      ++drops_.superseded;
      m.removals.erase(cur);
      --removals_;
    }
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
  if (size() != 0 || peak_ <= opts_.shrink_above) return;
  for (auto& m : maps_) {
    fp_map<add_entry>().swap(m.adds);
    fp_map<removal_entry>().swap(m.removals);
    m.clear_log(true);
  }
  peak_ = 0;
  released_ = true;
}

void pending_set::take_logged(adapter_maps& m, uint32_t a, emit_unit& u) {
  const std::string& adapter = adapters_[a];
  const size_t room = opts_.max_adds_per_unit - std::min(opts_.max_adds_per_unit, u.adds.size());
  const size_t end = m.log_head + std::min(room, m.logged());
  for (size_t i = m.log_head; i < end; ++i) {
    const logged_add& e = m.log[i];
    u.adds.push_back(prefix_add{e.fp, e.token_count, e.t, adapter});
    if (tracking_) reported_.insert(key{a, e.fp});
  }
  adds_ -= end - m.log_head;
  m.log_head = end;
  if (m.log_head == m.log.size()) {
    m.clear_log(false);
  } else if (m.log_head * 2 > m.log.size()) {
    // What went out is dropped once it is most of the log: each add is moved at most once more,
    // and a log a stream never lets empty does not keep everything it ever held.
    m.log.erase(m.log.begin(), m.log.begin() + static_cast<std::ptrdiff_t>(m.log_head));
    m.log_head = 0;
  }
}

std::optional<emit_unit> pending_set::take(uint64_t id) {
  if (empty()) return std::nullopt;
  emit_unit u;
  u.id = id;
  u.clear = clear_;
  u.clear_ts_us = clear_ts_us_;
  clear_ = false;
  // Evictions and downgrades all go; adds up to the cap, starting one adapter past where the
  // last capped unit stopped, so one adapter's backlog does not hold the others' adds back.
  std::map<int64_t, size_t> downgrade_group;  // ts → index in u.downgrades
  u.adds.reserve(std::min(adds_, opts_.max_adds_per_unit));
  u.evicts.reserve(removals_);
  const auto n = static_cast<uint32_t>(maps_.size());
  for (uint32_t a = 0; a < n; ++a) {
    adapter_maps& m = maps_[a];
    if (m.removals.empty()) continue;
    const std::string& adapter = adapters_[a];
    // Erased one by one, not cleared: a map past 127 slots would give its array back, and an
    // evicting engine's next window would grow a new one from nothing.
    for (auto it = m.removals.begin(); it != m.removals.end();) {
      const auto& [fp, r] = *it;
      if (r.downgrade) {
        auto [g, fresh] = downgrade_group.try_emplace(r.ts_us, u.downgrades.size());
        if (fresh) u.downgrades.push_back(emit_unit::downgrade_group{r.ts_us, {}});
        u.downgrades[g->second].entries.push_back(prefix_add{fp, r.token_count, r.t, adapter});
      } else {
        u.evicts.push_back(prefix_evict{fp, adapter, r.ts_us});
        if (tracking_) reported_.erase(key{a, fp});
      }
      m.removals.erase(it++);
      --removals_;
    }
  }
  for (uint32_t i = 0; i < n && adds_ != 0; ++i) {
    const uint32_t a = (next_adapter_ + i) % n;
    adapter_maps& m = maps_[a];
    if (m.logged() != 0) {
      take_logged(m, a, u);
      if (u.adds.size() >= opts_.max_adds_per_unit) {
        next_adapter_ = (a + 1) % n;
        break;
      }
      continue;
    }
    auto& adds = m.adds;
    const std::string& adapter = adapters_[a];
    // Takes from `it` to the end; false once the unit is full (the add it stopped at is where
    // the next take of this adapter starts).
    const auto take_from = [&](auto it) {
      for (; it != adds.end();) {
        if (u.adds.size() >= opts_.max_adds_per_unit) {
          m.resume = it->first;
          return false;
        }
        u.adds.push_back(prefix_add{it->first, it->second.token_count, it->second.t, adapter});
        if (tracking_) reported_.insert(key{a, it->first});
        adds.erase(it++);
        --adds_;
      }
      return true;
    };
    // From where the last capped take stopped (if that add is still pending), then from the
    // start for what lies before it.
    const auto start = m.resume ? adds.find(*std::exchange(m.resume, std::nullopt)) : adds.end();
    if (start == adds.end() || take_from(start)) take_from(adds.begin());
    if (u.adds.size() >= opts_.max_adds_per_unit) {
      next_adapter_ = (a + 1) % n;
      break;
    }
  }
  // Tracking is a help, not a duty: past the bound, evictions are simply sent again.
  if (tracking_ && reported_.size() > opts_.max_entries) end_tracking();
  u.adds_ts_us = adds_ts_us_;
  if (adds_ == 0) adds_ts_us_ = 0;  // a flush resets the add timestamp (R12)
  maybe_release();
  return u;
}

}  // namespace kvrelay
