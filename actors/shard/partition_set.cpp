// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/shard/partition_set.hpp"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <utility>

#include "base/probe_table.hpp"

namespace kvrelay {

namespace {

constexpr uint16_t several = 0xffff;  // a directory slot whose hash several partitions hold

#pragma pack(push, 1)
// Packed like the index's own slot: a pair<const uint64_t, uint16_t> would be padded to 16.
struct dir_slot {
  uint64_t key;
  mutable uint16_t part;
};
#pragma pack(pop)
static_assert(sizeof(dir_slot) == 10, "directory slot is not packed");


using int_slots = probe_table<dir_slot>;

// Setters, not references: a reference to a packed member is misaligned (UB, UBSan says so).
void set_part(const dir_slot& s, uint16_t p) { s.part = p; }
uint16_t part_value(const dir_slot& s) { return s.part; }
std::pair<dir_slot*, bool> put(int_slots& t, uint64_t k, uint16_t p) {
  return t.insert(dir_slot{k, p});
}

// hash → the partition holding it; the rare hash held by several lives in `shared` as well.
template <class Key, class Slots>
struct dir_table {
  Slots single;
  absl::flat_hash_map<Key, std::vector<uint16_t>> shared;

  void add(const Key& k, uint16_t p) {
    auto [it, inserted] = put(single, k, p);
    if (inserted) return;
    const uint16_t cur = part_value(*it);
    if (cur == p) return;
    auto& holders = shared[k];
    if (cur != several) {
      holders = {cur, p};
      set_part(*it, several);
    } else if (std::find(holders.begin(), holders.end(), p) == holders.end()) {
      holders.push_back(p);
    }
  }

  void remove(const Key& k, uint16_t p) {
    auto it = single.find(k);
    if (it == single.end()) return;
    const uint16_t cur = part_value(*it);
    if (cur == p) {
      single.erase(it);
      return;
    }
    if (cur != several) return;
    auto sh = shared.find(k);
    if (sh == shared.end()) return;
    auto& holders = sh->second;
    holders.erase(std::remove(holders.begin(), holders.end(), p), holders.end());
    if (holders.size() > 1) return;
    if (holders.empty()) {
      single.erase(it);
    } else {
      set_part(*it, holders.front());
    }
    shared.erase(sh);
  }

  // Calls forgot(p) for each partition holding k; it removes k from p and says whether p no
  // longer holds it, and the table follows. The common case, one holder, costs one lookup.
  template <class F>
  size_t route(const Key& k, std::vector<uint16_t>& scratch, F&& forgot) {
    auto it = single.find(k);
    if (it == single.end()) return 0;
    const uint16_t cur = part_value(*it);
    if (cur != several) {
      if (forgot(cur)) single.erase(it);
      return 1;
    }
    holders(k, scratch);  // removing from them changes the table: a copy
    for (uint16_t p : scratch)
      if (forgot(p)) remove(k, p);
    return scratch.size();
  }

  // Copies the holders out: removing from them changes the table.
  size_t holders(const Key& k, std::vector<uint16_t>& out) const {
    out.clear();
    auto it = single.find(k);
    if (it == single.end()) return 0;
    const uint16_t cur = part_value(*it);
    if (cur != several) {
      out.push_back(cur);
    } else if (auto sh = shared.find(k); sh != shared.end()) {
      out = sh->second;
    }
    return out.size();
  }

  void clear() {
    single.clear();
    shared.clear();
  }
};

// Keyed by index_key, like the indexes (a byte hash is folded once, by the index's rule).
class directory {
 public:
  void add(uint64_t k, uint16_t p) { keys_.add(k, p); }
  void remove(uint64_t k, uint16_t p) { keys_.remove(k, p); }
  template <class F>
  size_t route(uint64_t k, std::vector<uint16_t>& scratch, F&& forgot) {
    return keys_.route(k, scratch, forgot);
  }
  void clear() { keys_.clear(); }
  void prefetch(uint64_t k) const noexcept { keys_.single.prefetch(k); }
  size_t size() const noexcept { return keys_.single.size(); }
  size_t heap_bytes() const noexcept {
    return keys_.single.heap_bytes() + keys_.shared.size() * 64;  // rare; a rough figure is enough
  }

 private:
  dir_table<uint64_t, int_slots> keys_;
};

}  // namespace

struct partition_set::impl {
  // One partition; it is its own index's observer, so the directory follows residency (PS3).
  struct partition final : residency_observer {
    partition(impl& o, uint16_t i, std::string n, const index_options& opts)
        : owner(o), id(i), name(std::move(n)), index(opts) {}
    void added(uint64_t k) override { owner.dir.add(k, id); }
    // A routed removal keeps the directory itself (directory::route): one lookup, not two.
    void forgotten(uint64_t k) override {
      if (!owner.routing) owner.dir.remove(k, id);
    }

    impl& owner;
    uint16_t id;
    std::string name;
    positional_index index;
    std::vector<index_op> ops;
    size_t wanted = 0;  // reserve_ops: the blocks this work stores here
    bool had_store = false;
    bool touched = false;
  };

  index_options opts;
  std::vector<std::unique_ptr<partition>> parts;
  directory dir;
  bool routing = false;  // inside a routed removal
  // The partition the directory leaves out (PS3): the base model's once it is declared, else the
  // first. Its blocks, usually most of them, cost no directory slot; every routed removal asks
  // its index too.
  uint16_t home = 0;
  // PS8: room made for the base model's partition before it is declared (the shard sizes the
  // index while the engine is still quiet); it becomes that partition's index when declared.
  std::unique_ptr<positional_index> standby;
  counters stats;
  std::vector<uint32_t> order;     // partitions touched by the current work
  std::vector<uint16_t> holders;   // scratch

  explicit impl(index_options o) : opts(o) {}

  void add(std::string name) {
    const auto id = static_cast<uint16_t>(parts.size());
    const bool base = name.empty();
    parts.push_back(std::make_unique<partition>(*this, id, std::move(name), opts));
    if (base && standby) {  // PS8: the room made before; the base partition has no observer
      parts.back()->index = std::move(*standby);
      standby.reset();
    }
    if (id == 0) return;  // the first partition is home until the base model's appears
    if (base && !parts[home]->name.empty()) {
      // The base model's partition becomes home: the old home's blocks enter the directory (once
      // per pipeline: a base partition stays home).
      partition& old = *parts[home];
      old.index.for_each_key([&](uint64_t k) { dir.add(k, old.id); });
      old.index.set_observer(&old);
      home = id;
      return;
    }
    parts.back()->index.set_observer(parts.back().get());
  }

  void declare(const shard_work& w) {
    const size_t have = parts.size();
    if (w.new_partitions.empty() || w.first_new + w.new_partitions.size() <= have) return;
    if (w.first_new != have || have + w.new_partitions.size() > max_partitions) {
      stats.bad_partition_events += w.new_partitions.size();
      return;
    }
    for (const auto& n : w.new_partitions) add(n);
  }

  void touch(partition& p) {
    if (!p.touched && (p.had_store || !p.ops.empty())) {
      p.touched = true;
      order.push_back(p.id);
    }
  }

  void removed(const block_removed& ev) {
    if (parts.empty()) {
      stats.unrouted_hashes += ev.block_hashes.size();
      return;
    }
    if (parts.size() == 1) {  // no directory (PS3)
      partition& p = *parts.front();
      p.index.removed(ev, p.ops);
      touch(p);
      return;
    }
    const uint32_t* counts = nullptr;
    if (ev.has_remaining_copies) {
      if (ev.remaining_copies.size() == ev.block_hashes.size())
        counts = ev.remaining_copies.data();
      else
        ++stats.copy_counts_ignored;
    }
    routing = true;
    partition& home_part = *parts[home];
    // Both tables a removal asks, prefetch_distance hashes ahead: their misses overlap
    // (positional_index does the same for its own events).
    const size_t n = ev.block_hashes.size();
    const auto ask = [&](size_t i) {
      if (i >= n || ev.block_hashes[i].is_bytes()) return;
      home_part.index.prefetch(ev.block_hashes[i].value);
      dir.prefetch(ev.block_hashes[i].value);
    };
    for (size_t i = 0; i < prefetch_distance; ++i) ask(i);
    for (size_t i = 0; i < n; ++i) {
      ask(i + prefetch_distance);
      const engine_hash& h = ev.block_hashes[i];
      const uint32_t* left = counts ? counts + i : nullptr;
      size_t found = 0;
      // One lookup; a hash home does not hold counts nothing there (remove_hash's contract).
      if (home_part.index.remove_hash(h, ev.medium, left, home_part.ops) !=
          positional_index::removal::unknown) {
        touch(home_part);
        found = 1;
      }
      found += dir.route(index_key(h), holders, [&](uint16_t id) {
        partition& p = *parts[id];
        const auto r = p.index.remove_hash(h, ev.medium, left, p.ops);
        touch(p);
        return r == positional_index::removal::forgotten;
      });
      if (found == 0) ++stats.unrouted_hashes;
      if (found > 1) ++stats.shared_hashes;
    }
    routing = false;
  }

  // Each partition's ops leave with the result (apply moves them out), so every work starts
  // them from nothing: sized here for the blocks its stores bring, they are made once instead of
  // doubling ten times over a work of 512 blocks (each step a copy, a malloc and a free). A
  // removal's blocks are counted too when one partition holds every block; with several, where
  // a removal's op goes is known only once it is routed, and room reserved in home for blocks
  // routed elsewhere would be given back (a copy) or made for nothing.
  void reserve_ops(const shard_work& w) {
    for (size_t i = 0; i < w.events.size(); ++i) {
      const kv_event& ev = w.events[i];
      if (ev.type == event_type::removed) {
        if (parts.size() == 1) parts.front()->wanted += ev.removed.block_hashes.size();
        continue;
      }
      if (ev.type != event_type::stored || i >= w.partitions.size() ||
          w.partitions[i] >= parts.size())
        continue;
      parts[w.partitions[i]]->wanted += ev.stored.block_hashes.size();
    }
    const auto reserve = [](partition& p) {
      if (p.wanted != 0) p.ops.reserve(p.ops.size() + std::exchange(p.wanted, 0));
    };
    for (size_t i = 0; i < w.events.size() && i < w.partitions.size(); ++i)
      if (w.partitions[i] < parts.size()) reserve(*parts[w.partitions[i]]);
    if (parts.size() == 1) reserve(*parts.front());
  }

  std::vector<result> apply(const shard_work& w) {
    declare(w);
    order.clear();
    reserve_ops(w);
    for (size_t i = 0; i < w.events.size(); ++i) {
      const kv_event& ev = w.events[i];
      if (ev.type == event_type::removed) {
        removed(ev.removed);
      } else if (ev.type == event_type::stored) {
        const uint32_t id = i < w.partitions.size() ? w.partitions[i] : ~0u;
        if (id >= parts.size()) {
          ++stats.bad_partition_events;
          continue;
        }
        partition& p = *parts[id];
        p.had_store = true;
        if (id != home && parts.size() > 1)  // each new block of it enters the directory (PS3)
          for (const engine_hash& h : ev.stored.block_hashes)
            if (!h.is_bytes()) dir.prefetch(h.value);
        p.index.stored(ev.stored, p.ops);
        touch(p);
      }
    }
    std::vector<result> out;
    out.reserve(order.size());
    for (uint32_t id : order) {
      partition& p = *parts[id];
      // Room reserved for blocks that made no op (refused, tainted, a location update) would
      // travel with the result and be charged to the budget (a message's charge is its ops'
      // capacity): given back first.
      if (p.ops.capacity() > 2 * p.ops.size() + 16) p.ops.shrink_to_fit();
      out.push_back(result{id, p.had_store, std::move(p.ops)});
      p.ops.clear();
      p.had_store = false;
      p.touched = false;
    }
    // Room for removals that made no op (blocks not held) was moved out by nothing.
    if (parts.size() == 1 && parts.front()->ops.capacity() != 0)
      std::vector<index_op>().swap(parts.front()->ops);
    return out;
  }
};

partition_set::partition_set(index_options opts) : impl_(std::make_unique<impl>(opts)) {}
partition_set::~partition_set() = default;
partition_set::partition_set(partition_set&&) noexcept = default;
partition_set& partition_set::operator=(partition_set&&) noexcept = default;

std::vector<partition_set::result> partition_set::apply(const shard_work& w) {
  return impl_->apply(w);
}

void partition_set::declare(const shard_work& w) { impl_->declare(w); }

void partition_set::clear() {
  for (auto& p : impl_->parts) p->index.clear();
  impl_->dir.clear();
}

size_t partition_set::size() const noexcept { return impl_->parts.size(); }
const std::string& partition_set::name(uint32_t partition) const {
  return impl_->parts.at(partition)->name;
}
const positional_index& partition_set::index(uint32_t partition) const {
  return impl_->parts.at(partition)->index;
}

void partition_set::for_each_resident(
    const std::function<void(uint32_t, uint64_t, uint32_t, tier)>& fn) const {
  for (const auto& p : impl_->parts) {
    const uint32_t id = p->id;
    p->index.for_each_resident([&](uint64_t f, uint32_t c, tier t) { fn(id, f, c, t); });
  }
}

void partition_set::export_partitions(std::vector<snapshot::partition_image>& out) const {
  for (const auto& p : impl_->parts) {
    out.emplace_back();
    out.back().adapter = p->name;
    p->index.export_blocks(out.back());
  }
}

size_t partition_set::import_partitions(const std::vector<snapshot::partition_image>& in) {
  size_t blocks = 0;
  if (!impl_->parts.empty()) return blocks;
  for (const auto& image : in) {
    if (impl_->parts.size() >= max_partitions) break;
    impl_->add(image.adapter);
    blocks += impl_->parts.back()->index.import_blocks(image);
  }
  return blocks;
}

walk_cursor partition_set::walk(walk_position& at, size_t max, std::vector<result>& out) const {
  size_t taken = 0;
  while (at.partition < impl_->parts.size()) {
    const auto& p = *impl_->parts[at.partition];
    result r;
    r.partition = p.id;
    const walk_cursor c = p.index.walk(at.key, max - std::min(max, taken), r.ops);
    taken += r.ops.size();
    if (!r.ops.empty()) out.push_back(std::move(r));
    if (!c.done) {
      at.key = c.next;
      return {0, false};
    }
    ++at.partition;  // PS7: in id order; a partition declared meanwhile is walked too
    at.key = 0;
    if (taken >= max) return {0, at.partition >= impl_->parts.size()};
  }
  return {0, true};
}

const partition_set::counters& partition_set::stats() const noexcept { return impl_->stats; }
bool partition_set::directory_active() const noexcept { return impl_->parts.size() >= 2; }
size_t partition_set::directory_size() const noexcept { return impl_->dir.size(); }
uint32_t partition_set::home() const noexcept { return impl_->home; }

bool partition_set::reserve_base(size_t blocks) {
  for (auto& p : impl_->parts) {
    if (!p->name.empty()) continue;
    p->index.reserve(blocks);
    return true;
  }
  return false;
}

bool partition_set::prepare_base(size_t blocks) {
  if (reserve_base(blocks)) return true;
  if (!impl_->standby) impl_->standby = std::make_unique<positional_index>(impl_->opts);
  impl_->standby->reserve(blocks);
  return true;
}

bool partition_set::drop_standby() noexcept {
  if (!impl_->standby) return false;
  impl_->standby.reset();
  return true;
}

size_t partition_set::reserve_target(double capacity, uint64_t room_bytes, bool budgeted,
                                     size_t reserved) noexcept {
  // Not a finite positive count (an absent or broken exposition): nothing to size from. 2^40
  // blocks is far past any cache and keeps the conversion defined.
  if (!(capacity >= 1) || !(capacity < 0x1p40)) return 0;
  auto want = static_cast<size_t>(capacity);
  // A slot is 20 bytes and a reserved segment at most 4/5 full: 25 bytes a block, counted as
  // 32 (segment rounding and the binomial headroom probe_table::reserve adds).
  if (budgeted) want = std::min<size_t>(want, static_cast<size_t>(room_bytes / 4 / 32));
  return want > reserved ? want : 0;
}

size_t partition_set::heap_bytes() const noexcept {
  size_t b = impl_->dir.heap_bytes();
  for (const auto& p : impl_->parts) b += p->index.heap_bytes() + sizeof(impl::partition);
  if (impl_->standby) b += impl_->standby->heap_bytes();
  return b;
}

}  // namespace kvrelay
