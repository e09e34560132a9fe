// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// One file on purpose (~550 lines): the packed entry, its copy fields, the cap queue and the rules
// IX1-IX7 share the entry layout, which must stay private to keep the slot at 20 bytes.
#include "actors/shard/positional_index.hpp"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <deque>
#include <string>
#include <utility>

#include "base/fingerprint.hpp"
#include "base/probe_table.hpp"

namespace kvrelay {

namespace {

// An entry's 32-bit meta word: cumulative token count (24 bits) | GPU copies (3 bits) | CPU copies
// (2 bits) | colder copies (2 bits) | tainted (1 bit). Sharing the word keeps the int-keyed slot
// at 20 bytes, which is what brings a resident block under the 48-byte budget at the hash
// table's worst load (see bench_shard). A tier is held iff its count is non-zero.
constexpr uint32_t count_mask = positional_index::max_token_count;
constexpr uint32_t tainted_bit = 1u << 31;

struct copy_field {
  unsigned shift;
  uint32_t max;
  constexpr uint32_t mask() const noexcept { return max << shift; }
};
// Index 0, 1, 2 = T1, T2, T3.
constexpr copy_field copy_fields[3] = {{24, positional_index::max_copies_t1},
                                       {27, positional_index::max_copies_other},
                                       {29, positional_index::max_copies_other}};
static_assert((count_mask & (copy_fields[0].mask() | copy_fields[1].mask() |
                             copy_fields[2].mask() | tainted_bit)) == 0 &&
                  (copy_fields[0].mask() & copy_fields[1].mask()) == 0 &&
                  (copy_fields[1].mask() & copy_fields[2].mask()) == 0 &&
                  ((copy_fields[2].mask() & tainted_bit) == 0),
              "meta word fields overlap");

constexpr unsigned tier_index(tier t) noexcept {
  // Anything but T1/T2 (including a value no enumerator names) is the coldest tier: a hint at
  // T3 is the cheapest one to be wrong about.
  return t == tier::t1 ? 0u : t == tier::t2 ? 1u : 2u;
}

constexpr tier warmest(uint32_t tiers) noexcept {
  return (tiers & 1u) ? tier::t1 : (tiers & 2u) ? tier::t2 : tier::t3;
}

#pragma pack(push, 1)
// The payload is mutable because the integer map is a set keyed on the engine hash alone: the
// payload changes in place without touching what the set hashes or compares.
struct entry {
  mutable uint64_t fp;
  mutable uint32_t meta;

  uint32_t count() const noexcept { return meta & count_mask; }
  bool tainted() const noexcept { return (meta & tainted_bit) != 0; }
  uint32_t copies(unsigned ti) const noexcept {
    return (meta >> copy_fields[ti].shift) & copy_fields[ti].max;
  }
  void set_copies(unsigned ti, uint32_t n) const noexcept {
    const copy_field& f = copy_fields[ti];
    meta = (meta & ~f.mask()) | ((std::min(n, f.max) << f.shift) & f.mask());
  }
  /// Bit i set iff tier i holds a copy.
  uint32_t tiers() const noexcept {
    return (copies(0) != 0 ? 1u : 0u) | (copies(1) != 0 ? 2u : 0u) | (copies(2) != 0 ? 4u : 0u);
  }
  /// Fingerprint, count and taint; the copy counts stay.
  void assign(uint64_t f, uint32_t count, bool taint) const noexcept {
    fp = f;
    meta = (meta & ~(count_mask | tainted_bit)) | (count & count_mask) | (taint ? tainted_bit : 0);
  }
};

// A set element rather than a map pair: std::pair<const uint64_t, entry> would be padded to 24
// bytes by the key's alignment; packed, the slot is 20.
struct int_slot {
  uint64_t key;
  entry e;
};
#pragma pack(pop)
static_assert(sizeof(entry) == 12 && sizeof(int_slot) == 20, "index entry is not packed");


index_op make_op(index_op::kind k, const entry& e, uint32_t tiers, bool introduces = false) {
  return index_op{k, e.fp, e.count(), warmest(tiers), introduces};
}

}  // namespace

// max_resident: index keys in first-store order; a bounded tier (IX8): the keys it holds in store
// order. A forgotten block's queue item is not searched for; it is counted stale and skipped when
// it reaches the front (a key can be forgotten and stored again, so "resident" alone cannot tell a
// stale item from a live one). Allocated only when a cap is set: a partition without one (most of
// a LoRA fleet's) pays nothing for it.
struct cap_queue {
  std::deque<uint64_t> keys;
  absl::flat_hash_map<uint64_t, uint32_t> stale;

  void push(uint64_t k) { keys.push_back(k); }

  bool pop(uint64_t& k) {
    if (keys.empty()) return false;
    k = keys.front();
    keys.pop_front();
    return true;
  }

  void mark_stale(uint64_t k) { ++stale[k]; }

  // True when the oldest queue item of `k` belongs to an incarnation already forgotten.
  bool consume_stale(uint64_t k) {
    auto it = stale.find(k);
    if (it == stale.end()) return false;
    if (--it->second == 0) stale.erase(it);
    return true;
  }

  // Churn leaves stale items behind; a queue rebuilt before they outnumber the live ones stays
  // proportional to what it orders.
  bool bloated(size_t live) const noexcept { return keys.size() > 2 * live + 1024; }

  // The same order without the stale items; `live(k)` says whether an item still counts.
  template <class Live>
  std::unique_ptr<cap_queue> compacted(Live live) {
    auto out = std::make_unique<cap_queue>();
    uint64_t k = 0;
    while (pop(k)) {
      if (consume_stale(k) || !live(k)) continue;
      out->push(k);
    }
    return out;
  }

  size_t heap_bytes() const noexcept {
    return keys.size() * sizeof(uint64_t) +
           stale.capacity() * (sizeof(std::pair<const uint64_t, uint32_t>) + 1);
  }
};

struct positional_index::impl {
  index_options opts;
  index_stats stats;
  probe_table<int_slot> ints;  // every block, by index_key
  std::unique_ptr<cap_queue> fifo;               // max_resident only
  // IX8, by tier index (1 = T2, 2 = T3; 0 unused): the bound, the blocks holding a copy there in
  // store order, and how many. Allocated only for a bounded tier.
  std::array<size_t, 3> tier_cap{};
  std::array<std::unique_ptr<cap_queue>, 3> tier_fifo;
  std::array<size_t, 3> tier_count{};
  residency_observer* observer = nullptr;

  std::vector<uint32_t> scratch;  // EAGLE: first id of each pair of one block

  explicit impl(index_options o) : opts(o) {
    if (opts.max_resident != 0) fifo = std::make_unique<cap_queue>();
    tier_cap = {0, opts.max_t2_blocks, opts.max_t3_blocks};
    for (unsigned ti = 1; ti < 3; ++ti)
      if (tier_cap[ti] != 0) tier_fifo[ti] = std::make_unique<cap_queue>();
  }

  bool bounded(unsigned ti) const noexcept { return tier_fifo[ti] != nullptr; }

  // IX8: tier `ti` got a copy of `h` (`had`: it held one already, so the block moves back).
  void tier_stored(uint64_t h, unsigned ti, bool had) {
    if (!bounded(ti)) return;
    if (had) {
      tier_fifo[ti]->mark_stale(h);
    } else {
      ++tier_count[ti];
    }
    tier_fifo[ti]->push(h);
    if (tier_fifo[ti]->bloated(tier_count[ti])) compact_tier(ti);
  }

  // IX8: tier `ti` no longer holds `h` (a removal, the global cap).
  void tier_gone(uint64_t h, unsigned ti) {
    if (!bounded(ti)) return;
    tier_fifo[ti]->mark_stale(h);
    --tier_count[ti];
    if (tier_fifo[ti]->bloated(tier_count[ti])) compact_tier(ti);
  }

  void compact_tier(unsigned ti) {
    tier_fifo[ti] = tier_fifo[ti]->compacted([&](uint64_t h) {
      const entry* e = find(h);
      return e != nullptr && e->copies(ti) != 0;
    });
  }

  // IX8: drops the least recently stored blocks of every tier over its bound.
  void enforce_tier_caps(std::vector<index_op>& out) {
    for (unsigned ti = 1; ti < 3; ++ti) {
      uint64_t h = 0;
      while (bounded(ti) && tier_count[ti] > tier_cap[ti] && tier_fifo[ti]->pop(h)) {
        if (tier_fifo[ti]->consume_stale(h)) continue;
        const entry* e = find(h);
        if (e == nullptr || e->copies(ti) == 0) continue;  // a gone copy's item is stale
        const uint32_t old_tiers = e->tiers();
        e->set_copies(ti, 0);
        --tier_count[ti];
        ++(ti == 1 ? stats.t2_cap_drops : stats.t3_cap_drops);
        const uint32_t tiers = e->tiers();
        if (tiers != 0) {
          if (!e->tainted() && warmest(tiers) != warmest(old_tiers))
            out.push_back(make_op(index_op::kind::upsert, *e, tiers));
          continue;
        }
        if (!e->tainted()) out.push_back(make_op(index_op::kind::evict, *e, old_tiers));
        forget(e);
      }
    }
  }

  size_t size() const noexcept { return ints.size(); }

  const entry* find(uint64_t h) const {
    const int_slot* s = ints.find(h);
    return s == nullptr ? nullptr : &s->e;
  }

  std::pair<const entry*, bool> emplace(uint64_t h) {
    auto [it, inserted] = ints.insert(int_slot{h, entry{0, 0}});
    return {&it->e, inserted};
  }

  // The slot of an entry find() or emplace() returned: erasing through it costs no second probe
  // (PT4 keeps it valid until the next insert or erase).
  static int_slot* slot_of(const entry* e) noexcept {
    return reinterpret_cast<int_slot*>(reinterpret_cast<char*>(const_cast<entry*>(e)) -
                                       offsetof(int_slot, e));
  }

  // Returns the erased block's key.
  uint64_t erase(const entry* e) {
    int_slot* s = slot_of(e);
    const uint64_t h = s->key;
    if (bounded(1) || bounded(2)) {
      for (unsigned ti = 1; ti < 3; ++ti)
        if (e->copies(ti) != 0) tier_gone(h, ti);
    }
    ints.erase(s);
    if (observer != nullptr) observer->forgotten(h);
    return h;
  }

  uint64_t block_content(const block_stored& ev, size_t i, size_t bs) {
    if (!ev.eagle_bigram) return fingerprint::content(ev.token_ids.data() + i * bs, bs);
    // EAGLE pairs are (token, next token): the first ids are the sequence a router queries.
    scratch.resize(bs);
    const uint32_t* src = ev.token_ids.data() + i * bs * 2;
    for (size_t k = 0; k < bs; ++k) scratch[k] = src[2 * k];
    return fingerprint::content(scratch.data(), bs);
  }

  // One more copy at tier `ti` of a held block, by the copy rules IX1-IX3 (and IX8's order).
  void add_copy(uint64_t h, const entry& e, unsigned ti, store_origin origin) {
    const uint32_t n = e.copies(ti);
    tier_stored(h, ti, n != 0);
    if (n == 0) {
      e.set_copies(ti, 1);
    } else if (origin == store_origin::reused) {
      ++stats.reannounced;
    } else if (n >= copy_fields[ti].max) {
      ++stats.copies_saturated;
    } else {
      e.set_copies(ti, n + 1);
      ++stats.copy_added;
    }
  }

  // Writes one block of a store. A known hash keeps its other tiers; if it was reported under
  // another fingerprint, that hint is evicted first so it cannot outlive the block. False: the
  // budget had no room for a block not held (IX9), nothing changed.
  bool put(uint64_t h, uint64_t fp, uint32_t count, unsigned ti, bool taint,
           store_origin origin, std::vector<index_op>& out) {
    if (opts.budget && !opts.budget->index_room(ti + 1) && find(h) == nullptr) return false;
    auto [e, inserted] = emplace(h);
    bool introduces = inserted;
    if (inserted) {
      e->set_copies(ti, 1);
      tier_stored(h, ti, false);
      if (fifo) fifo->push(h);
      if (observer != nullptr) observer->added(h);
    } else {
      if (!e->tainted() && (taint || e->fp != fp)) {
        out.push_back(make_op(index_op::kind::evict, *e, e->tiers()));
        ++stats.fingerprint_changes;
      }
      introduces = e->tainted() || e->fp != fp;
      add_copy(h, *e, ti, origin);
    }
    e->assign(fp, count, taint);
    if (taint) {
      ++stats.tainted_blocks;
    } else {
      out.push_back(make_op(index_op::kind::upsert, *e, e->tiers(), introduces));
      ++stats.stored_blocks;
    }
    return true;
  }

  // Legacy offload stores carry no tokens: they only say where a known block now also lives.
  void location_update(const block_stored& ev, std::vector<index_op>& out) {
    const unsigned ti = tier_index(ev.medium.tier);
    for (const engine_hash& eh : ev.block_hashes) {
      const uint64_t h = index_key(eh);
      const entry* e = find(h);
      if (e == nullptr) {
        ++stats.location_unknown;
        continue;
      }
      ++stats.location_updates;
      const uint32_t old_tiers = e->tiers();
      add_copy(h, *e, ti, ev.origin);
      const uint32_t tiers = e->tiers();
      if (!e->tainted() && warmest(tiers) != warmest(old_tiers))
        out.push_back(make_op(index_op::kind::upsert, *e, tiers));
    }
  }

  void forget(const entry* e) {
    const uint64_t h = erase(e);
    if (!fifo) return;
    fifo->mark_stale(h);
    if (fifo->bloated(size())) compact_fifo();
  }

  void compact_fifo() {
    fifo = fifo->compacted([&](uint64_t h) { return find(h) != nullptr; });
  }

  void enforce_cap(std::vector<index_op>& out) {
    if (!fifo) return;
    uint64_t h = 0;
    while (size() > opts.max_resident && fifo->pop(h)) {
      if (fifo->consume_stale(h)) continue;
      const entry* e = find(h);
      if (e == nullptr) continue;
      if (!e->tainted()) out.push_back(make_op(index_op::kind::evict, *e, e->tiers()));
      ++stats.cap_evictions;
      erase(e);
    }
  }

  removal remove_hash(uint64_t h, const medium_info& m, const uint32_t* remaining,
                      std::vector<index_op>& out) {
    // Looked up first: a router asks every removal's hash of one partition (partition_set's
    // home) and needs "not held" apart from "held, at a medium we do not know".
    const entry* e = find(h);
    if (e == nullptr) return removal::unknown;  // counted by removed(); a router counts its own
    if (!m.known()) return removal::ignored;
    const unsigned ti = tier_index(m.tier);
    const uint32_t n = e->copies(ti);
    if (n == 0) {
      ++stats.removal_tier_absent;
      return removal::tier_absent;
    }
    uint32_t left = n - 1;
    if (remaining != nullptr) {
      ++stats.authoritative_counts;
      left = *remaining;
    }
    if (left != 0) {
      e->set_copies(ti, left);
      ++stats.copy_removed;
      return removal::copy_left;
    }
    const uint32_t old_tiers = e->tiers();
    e->set_copies(ti, 0);
    tier_gone(h, ti);
    const uint32_t tiers = e->tiers();
    if (tiers != 0) {
      if (!e->tainted() && warmest(tiers) != warmest(old_tiers)) {
        out.push_back(make_op(index_op::kind::upsert, *e, tiers));
        ++stats.downgrades;
      }
      return removal::downgraded;
    }
    if (!e->tainted()) {
      if (opts.ignore_block_removed && ti == tier_index(tier::t1)) {
        out.push_back(make_op(index_op::kind::upsert, *e, 2u));
        ++stats.l2_downgrades;
      } else {
        out.push_back(make_op(index_op::kind::evict, *e, old_tiers));
        ++stats.evictions;
      }
    }
    forget(e);
    return removal::forgotten;
  }

  void reset() {
    ints.clear();
    if (fifo) fifo = std::make_unique<cap_queue>();
    for (unsigned ti = 1; ti < 3; ++ti) {
      if (bounded(ti)) tier_fifo[ti] = std::make_unique<cap_queue>();
      tier_count[ti] = 0;
    }
  }
};

positional_index::positional_index(index_options opts) : impl_(std::make_unique<impl>(opts)) {}
positional_index::~positional_index() = default;
positional_index::positional_index(positional_index&&) noexcept = default;
positional_index& positional_index::operator=(positional_index&&) noexcept = default;

void positional_index::stored(const block_stored& ev, std::vector<index_op>& out) {
  impl& m = *impl_;
  ++m.stats.stored_events;
  if (!ev.medium.known()) {
    ++m.stats.unknown_medium_events;
    return;
  }
  const size_t n = ev.block_hashes.size();
  if (n == 0) {
    ++m.stats.empty_events;
    return;
  }
  if (ev.token_ids.empty()) {
    m.location_update(ev, out);
    m.enforce_tier_caps(out);
    return;
  }
  if (ev.block_size <= 0) {
    ++m.stats.empty_events;
    return;
  }
  const size_t width = ev.eagle_bigram ? 2 : 1;
  const uint64_t bs64 = static_cast<uint64_t>(ev.block_size);
  // Divide, never multiply: block_size is untrusted and bs * n could wrap.
  if (ev.token_ids.size() / width / bs64 != n) {
    ++m.stats.mismatches;
    return;
  }
  const size_t bs = static_cast<size_t>(bs64);  // <= token_ids.size() after the check above

  bool chained = false;
  uint64_t prefix = 0;
  uint64_t base = 0;
  bool parent_tainted = false;
  if (ev.parent) {
    if (const entry* p = m.find(index_key(*ev.parent))) {
      chained = true;
      prefix = p->fp;
      base = p->count();
      parent_tainted = p->tainted();
    } else if (m.opts.unknown_parent == unknown_parent_policy::drop) {
      ++m.stats.unknown_parent_dropped;
      return;
    } else {
      ++m.stats.unknown_parent_rerooted;
    }
  }

  // Blocks [0, clean) are indexed; the rest are remembered as tainted so that their
  // descendants in later events are not indexed either.
  size_t clean = n;
  if (!m.opts.index_salted) {
    clean = (parent_tainted || ev.eagle_bigram)
                ? 0
                : std::min(n, static_cast<size_t>(ev.first_tainted_block));
  }
  if (base + static_cast<uint64_t>(bs) * clean > max_token_count) {
    ++m.stats.token_overflow;
    return;
  }

  // Each block's home slot is asked for prefetch_distance blocks ahead of its write: the misses
  // overlap (a big index is cold at every new key), not one after another. Byte hashes are not
  // asked for: folding one costs an XXH3 that put() would repeat.
  const auto ask = [&](size_t i) {
    if (i < n && !ev.block_hashes[i].is_bytes()) m.ints.prefetch(ev.block_hashes[i].value);
  };
  for (size_t i = 0; i < prefetch_distance; ++i) ask(i);
  const unsigned ti = tier_index(ev.medium.tier);
  for (size_t i = 0; i < n; ++i) {
    ask(i + prefetch_distance);
    bool taken;
    if (i < clean) {
      const uint64_t c = m.block_content(ev, i, bs);
      prefix = chained ? fingerprint::chain(prefix, c) : c;
      chained = true;
      const auto count = static_cast<uint32_t>(base + static_cast<uint64_t>(bs) * (i + 1));
      taken = m.put(index_key(ev.block_hashes[i]), prefix, count, ti, false, ev.origin, out);
    } else {
      taken = m.put(index_key(ev.block_hashes[i]), 0, 0, ti, true, ev.origin, out);
    }
    if (!taken) {  // IX9: the rest of the chain goes with it
      m.stats.refused_blocks += n - i;
      break;
    }
  }
  m.enforce_cap(out);
  m.enforce_tier_caps(out);
}

const uint32_t* positional_index::usable_counts(const block_removed& ev) {
  if (!ev.has_remaining_copies) return nullptr;
  if (ev.remaining_copies.size() != ev.block_hashes.size()) {
    ++impl_->stats.copy_counts_ignored;
    return nullptr;
  }
  return ev.remaining_copies.data();
}

void positional_index::removed(const block_removed& ev, std::vector<index_op>& out) {
  impl& m = *impl_;
  ++m.stats.removed_events;
  if (!ev.medium.known()) {
    ++m.stats.unknown_medium_events;
    return;
  }
  const uint32_t* counts = usable_counts(ev);
  const size_t n = ev.block_hashes.size();
  const auto ask = [&](size_t i) {  // as in stored()
    if (i < n && !ev.block_hashes[i].is_bytes()) m.ints.prefetch(ev.block_hashes[i].value);
  };
  for (size_t i = 0; i < prefetch_distance; ++i) ask(i);
  for (size_t i = 0; i < n; ++i) {
    ask(i + prefetch_distance);
    if (m.remove_hash(index_key(ev.block_hashes[i]), ev.medium, counts ? counts + i : nullptr, out) ==
        removal::unknown)
      ++m.stats.unknown_removals;
  }
}

positional_index::removal positional_index::remove_hash(const engine_hash& h,
                                                        const medium_info& m,
                                                        const uint32_t* remaining,
                                                        std::vector<index_op>& out) {
  return impl_->remove_hash(index_key(h), m, remaining, out);
}

void positional_index::clear() {
  impl_->reset();
  ++impl_->stats.clears;
}

size_t positional_index::size() const noexcept { return impl_->size(); }

size_t positional_index::tier_blocks(tier t) const noexcept {
  return impl_->tier_count[tier_index(t)];
}

void positional_index::prefetch(uint64_t key) const noexcept { impl_->ints.prefetch(key); }

bool positional_index::contains(const engine_hash& h) const {
  return impl_->find(index_key(h)) != nullptr;
}

uint32_t positional_index::copies(const engine_hash& h, tier t) const {
  const entry* e = impl_->find(index_key(h));
  return e == nullptr ? 0 : e->copies(tier_index(t));
}

void positional_index::for_each_key(const std::function<void(uint64_t)>& fn) const {
  impl_->ints.for_each([&](const int_slot& s) { fn(s.key); });
}

void positional_index::set_observer(residency_observer* o) noexcept { impl_->observer = o; }

void positional_index::for_each_resident(
    const std::function<void(uint64_t, uint32_t, tier)>& fn) const {
  impl_->ints.for_each([&](const int_slot& s) {
    if (!s.e.tainted()) fn(s.e.fp, s.e.count(), warmest(s.e.tiers()));
  });
}

walk_cursor positional_index::walk(uint64_t from, size_t max, std::vector<index_op>& out) const {
  // Counted in slots, so a partition of tainted blocks still ends its chunks.
  return impl_->ints.walk(from, max, [&](const int_slot& s) {
    if (!s.e.tainted() && s.e.tiers() != 0)
      out.push_back(make_op(index_op::kind::upsert, s.e, s.e.tiers()));
  });
}

void positional_index::reserve(size_t blocks) { impl_->ints.reserve(blocks); }

void positional_index::export_blocks(snapshot::partition_image& out) const {
  out.blocks.reserve(out.blocks.size() + impl_->ints.size());
  impl_->ints.for_each([&](const int_slot& s) {
    out.blocks.push_back(snapshot::block_record{s.key, s.e.fp, s.e.meta});
  });
}

size_t positional_index::import_blocks(const snapshot::partition_image& in) {
  impl& m = *impl_;
  const size_t cap = m.opts.max_resident == 0 ? ~size_t{0} : m.opts.max_resident;
  size_t taken = 0;
  const auto take = [&](uint64_t h, const entry& from) {
    if (m.size() >= cap) return;
    auto [e, inserted] = m.emplace(h);
    if (!inserted) return;  // a hash twice in one image: the first wins
    e->fp = from.fp;
    e->meta = from.meta;
    if (m.fifo) m.fifo->push(h);
    if (m.observer != nullptr) m.observer->added(h);
    ++taken;
  };
  for (const auto& r : in.blocks) take(r.hash, entry{r.fingerprint, r.meta});
  // An image written before byte hashes were folded into the table's keys.
  for (const auto& r : in.byte_blocks)
    take(index_key(engine_hash{0, r.hash}), entry{r.fingerprint, r.meta});
  return taken;
}

size_t positional_index::heap_bytes() const noexcept {
  const impl& m = *impl_;
  size_t bytes = m.ints.heap_bytes();
  if (m.fifo) bytes += sizeof(cap_queue) + m.fifo->heap_bytes();
  for (const auto& q : m.tier_fifo)
    if (q) bytes += sizeof(cap_queue) + q->heap_bytes();
  return bytes;
}

const index_stats& positional_index::stats() const noexcept { return impl_->stats; }
const index_options& positional_index::options() const noexcept { return impl_->opts; }

}  // namespace kvrelay
