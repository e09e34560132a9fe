// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// An open-addressing hash set of packed slots, for the tables that grow to millions of entries
// on the add path: the shard's index and removal directory (u64 engine hashes). Why not absl::flat_hash_set: a SwissTable keeps
// its control bytes apart from its slots, so inserting a new key into a table far larger than
// the cache misses twice (the control group, then the slot); here the key lives in the slot and
// a linear probe reads and writes one cache line, usually. Measured at 1 M random keys (20-byte
// slots, huge-page advice on both): ~70 vs ~150 ns per insert.
//
//  PT1. Any key value is a key. The all-zero key marks an empty array slot, so the slot of that
//      key is kept apart.
//  PT2. Linear probing from the top bits of (probe_hash(key) ^ seed) × 2^64/φ; the seed is per
//      table, so an engine cannot pick keys that collide (a clustered table costs O(n) a probe).
//  PT3. At most 3/4 full: the table doubles before an insert would pass that. Deletion shifts the
//      following entries back (no tombstones), so probes never lengthen with churn.
//  PT4. Pointers to slots stay valid until the next insert or erase (either may move slots).
//  PT5. clear() releases the array (an AllBlocksCleared gives the memory back).
//  PT6. Arrays of 2 MiB or more are mappings of their own, not malloc's: freed (grown out of,
//      cleared), their pages go back to the system at once. From malloc they would not: once a
//      big chunk has been freed, glibc raises its mmap threshold to that size (up to 32 MiB), so
//      a table rebuilt after a clear grows inside an arena that keeps every array it outgrew
//      (bench_shard IndexMemory1M: a second 1 M index in one process, 84 B of RSS per block
//      instead of 50). They get transparent-huge-page advice on their aligned interior: probes
//      at random over tens of MB would otherwise miss the TLB nearly every time (advice only;
//      it rounds nothing up).
//  PT7. Such an array that an erase leaves under 1/16 full is rebuilt at most 3/8 full (the
//      smallest power of two that holds it so): a burst of a million blocks that drained back to
//      the engine's cache no longer keeps the burst's array (issue 27: memory comes back after an
//      overload). 1/16 and 3/8 leave the next grow (3/4) and the next shrink a factor of two and
//      six away, so a table that breathes never rebuilds back and forth. Without the memory for
//      the smaller array the big one stays.
//
// Slot: a trivially copyable struct whose first member is `key`, of a trivially copyable type K
// with ==, whose value-initialised K{} is the all-zero key, and with a `probe_hash(const K&)`
// found by lookup (uint64_t has one below); the rest of the slot is payload.

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <type_traits>
#include <utility>

namespace kvrelay {

/// A u64 key is its own hash: the table's multiply spreads it.
inline uint64_t probe_hash(uint64_t k) noexcept { return k; }

template <class Slot>
class probe_table {
  static_assert(std::is_trivially_copyable_v<Slot>, "slots are moved as bytes");

 public:
  using key_type = std::remove_cv_t<decltype(Slot::key)>;

  probe_table() : seed_(next_seed()) {}
  ~probe_table() { release(slots_, cap_); }
  probe_table(probe_table&& o) noexcept { *this = std::move(o); }
  probe_table& operator=(probe_table&& o) noexcept {
    if (this != &o) {
      release(slots_, cap_);
      slots_ = std::exchange(o.slots_, nullptr);
      cap_ = std::exchange(o.cap_, 0);
      shift_ = std::exchange(o.shift_, 64);
      size_ = std::exchange(o.size_, 0);
      zero_ = o.zero_;
      has_zero_ = std::exchange(o.has_zero_, false);
      seed_ = o.seed_;
    }
    return *this;
  }
  probe_table(const probe_table&) = delete;
  probe_table& operator=(const probe_table&) = delete;

  size_t size() const noexcept { return size_ + (has_zero_ ? 1 : 0); }
  bool empty() const noexcept { return size() == 0; }
  /// Array slots allocated (for heap accounting).
  size_t capacity() const noexcept { return cap_; }
  /// find()'s "absent", so code written against absl's find/end reads the same.
  Slot* end() const noexcept { return nullptr; }

  Slot* find(const key_type& key) const noexcept {
    if (is_zero(key)) return has_zero_ ? const_cast<Slot*>(&zero_) : nullptr;
    if (cap_ == 0) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & (cap_ - 1)) {
      const key_type k = slots_[i].key;
      if (k == key) return &slots_[i];
      if (is_zero(k)) return nullptr;
    }
  }

  /// Inserts `s` unless its key is present; returns the slot holding the key and whether `s`
  /// went in.
  std::pair<Slot*, bool> insert(const Slot& s) {
    const key_type key = s.key;
    if (is_zero(key)) {
      if (has_zero_) return {&zero_, false};
      zero_ = s;
      has_zero_ = true;
      return {&zero_, true};
    }
    if ((size_ + 1) * 4 > cap_ * 3) grow();
    size_t i = home(key);
    for (;; i = (i + 1) & (cap_ - 1)) {
      const key_type k = slots_[i].key;
      if (k == key) return {&slots_[i], false};
      if (is_zero(k)) break;
    }
    slots_[i] = s;
    ++size_;
    return {&slots_[i], true};
  }

  bool erase(const key_type& key) noexcept {
    Slot* s = find(key);
    if (s == nullptr) return false;
    erase(s);
    return true;
  }

  /// Erases the slot find() or insert() returned.
  void erase(Slot* s) noexcept {
    if (s == &zero_) {
      has_zero_ = false;
      return;
    }
    erase_at(static_cast<size_t>(s - slots_));
  }

  /// Calls fn(slot&) for every entry; fn must not insert or erase.
  template <class F>
  void for_each(F&& fn) const {
    if (has_zero_) fn(const_cast<Slot&>(zero_));
    for (size_t i = 0; i < cap_; ++i)
      if (!is_zero(slots_[i].key)) fn(slots_[i]);
  }

  void clear() noexcept {
    release(slots_, cap_);
    slots_ = nullptr;
    cap_ = size_ = 0;
    shift_ = 64;
    has_zero_ = false;
  }

 private:
  // By value, here and in home(): a slot's key is a packed member, and a reference to it would
  // be misaligned (UB; UBSan says so).
  static bool is_zero(key_type k) noexcept { return k == key_type{}; }

  static uint64_t next_seed() {
    static const uint64_t base = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    static std::atomic<uint64_t> counter{0};
    return base + 0x9e3779b97f4a7c15ull * (counter.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  // Fibonacci hashing: the top bits of one multiply, which every input bit reaches. Only called
  // with cap_ > 0 (shift_ < 64).
  size_t home(key_type key) const noexcept {
    return static_cast<size_t>(((probe_hash(key) ^ seed_) * 0x9e3779b97f4a7c15ull) >> shift_);
  }

  // PT3: walk the cluster after the hole; an entry whose home is not cyclically in (hole, j]
  // would be unreachable past the hole, so it moves into it and leaves a hole of its own.
  void erase_at(size_t hole) noexcept {
    const size_t mask = cap_ - 1;
    for (size_t j = (hole + 1) & mask; !is_zero(slots_[j].key); j = (j + 1) & mask) {
      const size_t h = home(slots_[j].key);
      const bool reachable = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (reachable) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole].key = key_type{};
    --size_;
    if (cap_ * sizeof(Slot) >= map_from && size_ * 16 < cap_) shrink();
  }

  void shrink() noexcept {
    size_t ncap = 16;
    while (ncap * 3 < size_ * 8) ncap *= 2;
    try {
      rehash(ncap);
    } catch (const std::bad_alloc&) {
      // PT7: the big array stays
    }
  }

  static constexpr size_t map_from = size_t{2} << 20;  // PT6: one huge page

  static Slot* allocate(size_t n) {
    const size_t bytes = n * sizeof(Slot);
    if (bytes < map_from) {
      void* p = std::calloc(n, sizeof(Slot));  // all-zero keys: every slot empty
      if (p == nullptr) throw std::bad_alloc();
      return static_cast<Slot*>(p);
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();  // zero pages: every slot empty
    const auto begin = (reinterpret_cast<uintptr_t>(p) + map_from - 1) & ~(map_from - 1);
    const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(map_from - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    return static_cast<Slot*>(p);
  }

  static void release(Slot* p, size_t n) noexcept {
    if (p == nullptr) return;
    if (n * sizeof(Slot) < map_from) {
      std::free(p);
    } else {
      munmap(p, n * sizeof(Slot));
    }
  }

  void grow() { rehash(cap_ == 0 ? 16 : cap_ * 2); }

  // Moves every entry into a new array of `ncap` slots; the old array stays if that throws.
  void rehash(size_t ncap) {
    Slot* fresh = allocate(ncap);
    Slot* old = slots_;
    const size_t ocap = cap_;
    slots_ = fresh;
    cap_ = ncap;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(ncap));
    for (size_t i = 0; i < ocap; ++i) {
      if (is_zero(old[i].key)) continue;
      size_t j = home(old[i].key);
      while (!is_zero(slots_[j].key)) j = (j + 1) & (cap_ - 1);
      slots_[j] = old[i];
    }
    release(old, ocap);
  }

  Slot* slots_ = nullptr;
  size_t cap_ = 0;       // 0 or a power of two
  unsigned shift_ = 64;  // 64 - log2(cap_)
  size_t size_ = 0;      // array entries (the zero key's slot not counted)
  Slot zero_{};
  bool has_zero_ = false;
  uint64_t seed_ = 0;
};

}  // namespace kvrelay
