#include "actors/shard/positional_index.hpp"

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <new>
#include <string>
#include <utility>

#include "base/fingerprint.hpp"

namespace kvrelay {

namespace {

// An entry's 32-bit meta word: cumulative token count (28 bits) | tiers T1,T2,T3 (3 bits) |
// tainted (1 bit). Sharing the word keeps the int-keyed slot at 20 bytes, which is what brings a
// resident block under the 48-byte budget at the hash table's worst load (see bench_shard).
constexpr uint32_t count_mask = positional_index::max_token_count;
constexpr unsigned tiers_shift = 28;
constexpr uint32_t tiers_mask = 0x7u << tiers_shift;
constexpr uint32_t tainted_bit = 1u << 31;
static_assert((count_mask & tiers_mask) == 0 && (tiers_mask & tainted_bit) == 0,
              "meta word fields overlap");

constexpr uint32_t tier_bit(tier t) noexcept {
  // Anything but T1/T2 (including a value no enumerator names) is the coldest tier: a hint at
  // T3 is the cheapest one to be wrong about.
  return t == tier::t1 ? 1u : t == tier::t2 ? 2u : 4u;
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
  uint32_t tiers() const noexcept { return (meta & tiers_mask) >> tiers_shift; }
  bool tainted() const noexcept { return (meta & tainted_bit) != 0; }
  void assign(uint64_t f, uint32_t count, uint32_t tiers, bool taint) const noexcept {
    fp = f;
    meta = (count & count_mask) | ((tiers << tiers_shift) & tiers_mask) | (taint ? tainted_bit : 0);
  }
  void set_tiers(uint32_t tiers) const noexcept {
    meta = (meta & ~tiers_mask) | ((tiers << tiers_shift) & tiers_mask);
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

struct int_slot_hash {
  using is_transparent = void;
  size_t operator()(uint64_t k) const noexcept { return absl::Hash<uint64_t>{}(k); }
  size_t operator()(const int_slot& s) const noexcept { return (*this)(uint64_t{s.key}); }
};

struct int_slot_eq {
  using is_transparent = void;
  static uint64_t key(uint64_t k) noexcept { return k; }
  static uint64_t key(const int_slot& s) noexcept { return s.key; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const noexcept {
    return key(a) == key(b);
  }
};

// The int table is probed at random: at 1M blocks it spans ~44 MB, so with 4 KiB pages nearly
// every probe also misses the TLB. Asking for transparent huge pages on the 2 MiB-aligned
// interior of large tables costs no extra memory (nothing is rounded up) and is only advice.
template <class T>
struct table_allocator {
  using value_type = T;
  table_allocator() = default;
  template <class U>
  table_allocator(const table_allocator<U>&) noexcept {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    void* p = std::malloc(bytes);
    if (p == nullptr) throw std::bad_alloc();
    constexpr uintptr_t huge = uintptr_t{2} << 20;
    const auto begin = (reinterpret_cast<uintptr_t>(p) + huge - 1) & ~(huge - 1);
    const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(huge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }

  template <class U>
  bool operator==(const table_allocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const table_allocator<U>&) const noexcept { return false; }
};

index_op make_op(index_op::kind k, const entry& e, uint32_t tiers) {
  return index_op{k, e.fp, e.count(), warmest(tiers)};
}

}  // namespace

struct positional_index::impl {
  index_options opts;
  index_stats stats;
  absl::flat_hash_set<int_slot, int_slot_hash, int_slot_eq, table_allocator<int_slot>> ints;
  absl::flat_hash_map<std::string, entry> bins;  // bin/str engine hashes: rare

  // max_resident only: engine hashes in first-store order. A forgotten block's queue item is
  // not searched for; it is counted stale and skipped when it reaches the front (a hash can be
  // forgotten and stored again, so "resident" alone cannot tell a stale item from a live one).
  // One logical queue kept as two: bin items carry their position in it, so the common int
  // items cost 8 bytes and need no tag.
  std::deque<uint64_t> fifo_ints;
  std::deque<std::pair<uint64_t, std::string>> fifo_bins;  // (queue position, bytes)
  uint64_t fifo_pushed = 0;
  uint64_t fifo_popped = 0;
  absl::flat_hash_map<uint64_t, uint32_t> stale_ints;
  absl::flat_hash_map<std::string, uint32_t> stale_bins;

  std::vector<uint32_t> scratch;  // EAGLE: first id of each pair of one block

  explicit impl(index_options o) : opts(o) {}

  size_t size() const noexcept { return ints.size() + bins.size(); }

  const entry* find(const engine_hash& h) const {
    if (h.is_bytes()) {
      auto it = bins.find(h.bytes);
      return it == bins.end() ? nullptr : &it->second;
    }
    auto it = ints.find(h.value);
    return it == ints.end() ? nullptr : &it->e;
  }

  std::pair<const entry*, bool> emplace(const engine_hash& h) {
    if (h.is_bytes()) {
      auto [it, inserted] = bins.try_emplace(h.bytes, entry{0, 0});
      return {&it->second, inserted};
    }
    auto [it, inserted] = ints.insert(int_slot{h.value, entry{0, 0}});
    return {&it->e, inserted};
  }

  void erase(const engine_hash& h) {
    if (h.is_bytes())
      bins.erase(h.bytes);
    else
      ints.erase(h.value);
  }

  uint64_t block_content(const block_stored& ev, size_t i, size_t bs) {
    if (!ev.eagle_bigram) return fingerprint::content(ev.token_ids.data() + i * bs, bs);
    // EAGLE pairs are (token, next token): the first ids are the sequence a router queries.
    scratch.resize(bs);
    const uint32_t* src = ev.token_ids.data() + i * bs * 2;
    for (size_t k = 0; k < bs; ++k) scratch[k] = src[2 * k];
    return fingerprint::content(scratch.data(), bs);
  }

  // Writes one block of a store. A known hash keeps its other tiers; if it was reported under
  // another fingerprint, that hint is evicted first so it cannot outlive the block.
  void put(const engine_hash& h, uint64_t fp, uint32_t count, uint32_t tb, bool taint,
           std::vector<index_op>& out) {
    auto [e, inserted] = emplace(h);
    uint32_t tiers = tb;
    if (inserted) {
      if (opts.max_resident != 0) push_fifo(h);
    } else {
      const uint32_t old_tiers = e->tiers();
      if (!e->tainted() && (taint || e->fp != fp)) {
        out.push_back(make_op(index_op::kind::evict, *e, old_tiers));
        ++stats.fingerprint_changes;
      }
      tiers |= old_tiers;
    }
    e->assign(fp, count, tiers, taint);
    if (taint) {
      ++stats.tainted_blocks;
    } else {
      out.push_back(make_op(index_op::kind::upsert, *e, tiers));
      ++stats.stored_blocks;
    }
  }

  // Legacy offload stores carry no tokens: they only say where a known block now also lives.
  void location_update(const block_stored& ev, std::vector<index_op>& out) {
    const uint32_t tb = tier_bit(ev.medium.tier);
    for (const engine_hash& h : ev.block_hashes) {
      const entry* e = find(h);
      if (e == nullptr) {
        ++stats.location_unknown;
        continue;
      }
      ++stats.location_updates;
      const uint32_t old_tiers = e->tiers();
      const uint32_t tiers = old_tiers | tb;
      if (tiers == old_tiers) continue;
      e->set_tiers(tiers);
      if (!e->tainted() && warmest(tiers) != warmest(old_tiers))
        out.push_back(make_op(index_op::kind::upsert, *e, tiers));
    }
  }

  void forget(const engine_hash& h) {
    erase(h);
    if (opts.max_resident == 0) return;
    if (h.is_bytes())
      ++stale_bins[h.bytes];
    else
      ++stale_ints[h.value];
    // Churn under the cap leaves stale items behind; rebuild before they outnumber live ones.
    if (fifo_pushed - fifo_popped > 2 * size() + 1024) compact_fifo();
  }

  void push_fifo(const engine_hash& h) {
    if (h.is_bytes())
      fifo_bins.emplace_back(fifo_pushed, h.bytes);
    else
      fifo_ints.push_back(h.value);
    ++fifo_pushed;
  }

  bool pop_fifo(engine_hash& h) {
    if (fifo_popped == fifo_pushed) return false;
    const uint64_t pos = fifo_popped++;
    if (!fifo_bins.empty() && fifo_bins.front().first == pos) {
      h.bytes = std::move(fifo_bins.front().second);
      h.value = 0;
      fifo_bins.pop_front();
    } else {
      h.bytes.clear();
      h.value = fifo_ints.front();
      fifo_ints.pop_front();
    }
    return true;
  }

  // True when the oldest queue item of `h` belongs to an incarnation already forgotten.
  bool consume_stale(const engine_hash& h) {
    auto take = [](auto& map, const auto& key) {
      auto it = map.find(key);
      if (it == map.end()) return false;
      if (--it->second == 0) map.erase(it);
      return true;
    };
    return h.is_bytes() ? take(stale_bins, h.bytes) : take(stale_ints, h.value);
  }

  void compact_fifo() {
    std::deque<uint64_t> live_ints;
    std::deque<std::pair<uint64_t, std::string>> live_bins;
    uint64_t pos = 0;
    engine_hash h;
    while (pop_fifo(h)) {
      if (consume_stale(h) || find(h) == nullptr) continue;
      if (h.is_bytes())
        live_bins.emplace_back(pos, std::move(h.bytes));
      else
        live_ints.push_back(h.value);
      ++pos;
    }
    fifo_ints.swap(live_ints);
    fifo_bins.swap(live_bins);
    fifo_pushed = pos;
    fifo_popped = 0;
    stale_ints.clear();
    stale_bins.clear();
  }

  void enforce_cap(std::vector<index_op>& out) {
    if (opts.max_resident == 0) return;
    engine_hash h;
    while (size() > opts.max_resident && pop_fifo(h)) {
      if (consume_stale(h)) continue;
      const entry* e = find(h);
      if (e == nullptr) continue;
      if (!e->tainted()) out.push_back(make_op(index_op::kind::evict, *e, e->tiers()));
      ++stats.cap_evictions;
      erase(h);
    }
  }

  void reset() {
    ints.clear();
    bins.clear();
    fifo_ints.clear();
    fifo_bins.clear();
    fifo_pushed = fifo_popped = 0;
    stale_ints.clear();
    stale_bins.clear();
  }
};

positional_index::positional_index(index_options opts) : impl_(std::make_unique<impl>(opts)) {}
positional_index::~positional_index() = default;
positional_index::positional_index(positional_index&&) noexcept = default;
positional_index& positional_index::operator=(positional_index&&) noexcept = default;

void positional_index::stored(const block_stored& ev, std::vector<index_op>& out) {
  impl& m = *impl_;
  ++m.stats.stored_events;
  const size_t n = ev.block_hashes.size();
  if (n == 0) {
    ++m.stats.empty_events;
    return;
  }
  if (ev.token_ids.empty()) {
    m.location_update(ev, out);
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
    if (const entry* p = m.find(*ev.parent)) {
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

  const uint32_t tb = tier_bit(ev.medium.tier);
  for (size_t i = 0; i < n; ++i) {
    if (i < clean) {
      const uint64_t c = m.block_content(ev, i, bs);
      prefix = chained ? fingerprint::chain(prefix, c) : c;
      chained = true;
      const auto count = static_cast<uint32_t>(base + static_cast<uint64_t>(bs) * (i + 1));
      m.put(ev.block_hashes[i], prefix, count, tb, false, out);
    } else {
      m.put(ev.block_hashes[i], 0, 0, tb, true, out);
    }
  }
  m.enforce_cap(out);
}

void positional_index::removed(const block_removed& ev, std::vector<index_op>& out) {
  impl& m = *impl_;
  ++m.stats.removed_events;
  const uint32_t tb = tier_bit(ev.medium.tier);
  for (const engine_hash& h : ev.block_hashes) {
    const entry* e = m.find(h);
    if (e == nullptr) {
      ++m.stats.unknown_removals;
      continue;
    }
    const uint32_t old_tiers = e->tiers();
    if ((old_tiers & tb) == 0) {
      ++m.stats.removal_tier_absent;
      continue;
    }
    const uint32_t tiers = old_tiers & ~tb;
    if (tiers != 0) {
      e->set_tiers(tiers);
      if (!e->tainted() && warmest(tiers) != warmest(old_tiers)) {
        out.push_back(make_op(index_op::kind::upsert, *e, tiers));
        ++m.stats.downgrades;
      }
      continue;
    }
    if (!e->tainted()) {
      if (m.opts.ignore_block_removed && tb == tier_bit(tier::t1)) {
        out.push_back(make_op(index_op::kind::upsert, *e, tier_bit(tier::t2)));
        ++m.stats.l2_downgrades;
      } else {
        out.push_back(make_op(index_op::kind::evict, *e, old_tiers));
        ++m.stats.evictions;
      }
    }
    m.forget(h);
  }
}

void positional_index::clear() {
  impl_->reset();
  ++impl_->stats.clears;
}

size_t positional_index::size() const noexcept { return impl_->size(); }

void positional_index::for_each_resident(
    const std::function<void(uint64_t, uint32_t, tier)>& fn) const {
  for (const int_slot& s : impl_->ints)
    if (!s.e.tainted()) fn(s.e.fp, s.e.count(), warmest(s.e.tiers()));
  for (const auto& kv : impl_->bins)
    if (!kv.second.tainted()) fn(kv.second.fp, kv.second.count(), warmest(kv.second.tiers()));
}

size_t positional_index::heap_bytes() const noexcept {
  const impl& m = *impl_;
  // A Swiss table holds one control byte per slot plus the slot; strings longer than the SSO
  // buffer add their own allocation.
  size_t bytes = m.ints.capacity() * (sizeof(int_slot) + 1);
  bytes += m.bins.capacity() * (sizeof(std::pair<const std::string, entry>) + 1);
  for (const auto& kv : m.bins)
    if (kv.first.capacity() > 15) bytes += kv.first.capacity() + 1;
  bytes += m.fifo_ints.size() * sizeof(uint64_t);
  bytes += m.fifo_bins.size() * sizeof(std::pair<uint64_t, std::string>);
  bytes += m.stale_ints.capacity() * (sizeof(std::pair<const uint64_t, uint32_t>) + 1);
  bytes += m.stale_bins.capacity() * (sizeof(std::pair<const std::string, uint32_t>) + 1);
  return bytes;
}

const index_stats& positional_index::stats() const noexcept { return impl_->stats; }
const index_options& positional_index::options() const noexcept { return impl_->opts; }

}  // namespace kvrelay
