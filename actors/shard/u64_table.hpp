#pragma once
// An open-addressing hash set of packed slots keyed by a u64 engine hash, for the shard's big
// tables (the index's entries, the removal directory). Why not absl::flat_hash_set: a SwissTable
// keeps its control bytes apart from its slots, so inserting a new key into a table far larger
// than the cache misses twice (the control group, then the slot); here the key lives in the slot
// and a linear probe reads and writes one cache line, usually. Measured at 1 M random keys
// (20-byte slots, huge-page advice on both): ~70 vs ~150 ns per insert.
//
//  T1. Keys are any u64. Key 0 marks an empty array slot, so the slot of key 0 is kept apart.
//  T2. Linear probing from the top bits of (key ^ seed) × 2^64/φ; the seed is per table, so an
//      engine cannot pick keys that collide (a clustered table would cost O(n) per probe).
//  T3. At most 3/4 full: the table doubles before an insert would pass that. Deletion shifts the
//      following entries back (no tombstones), so probes never lengthen with churn.
//  T4. Pointers to slots stay valid until the next insert or erase (either may move slots).
//  T5. clear() releases the array (an AllBlocksCleared gives the memory back).
//  T6. Arrays of 2 MiB or more get transparent-huge-page advice on their aligned interior: probes
//      at random over tens of MB would otherwise miss the TLB nearly every time. Advice only; it
//      rounds nothing up.
//
// Slot: a trivially copyable struct whose first member is `uint64_t key`; the rest is payload.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <atomic>
#include <random>
#include <type_traits>
#include <utility>

namespace kvrelay::detail {

template <class Slot>
class u64_table {
  static_assert(std::is_trivially_copyable_v<Slot>, "slots are moved with memcpy");

 public:
  u64_table() : seed_(next_seed()) {}
  ~u64_table() { std::free(slots_); }
  u64_table(u64_table&& o) noexcept { *this = std::move(o); }
  u64_table& operator=(u64_table&& o) noexcept {
    if (this != &o) {
      std::free(slots_);
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
  u64_table(const u64_table&) = delete;
  u64_table& operator=(const u64_table&) = delete;

  size_t size() const noexcept { return size_ + (has_zero_ ? 1 : 0); }
  bool empty() const noexcept { return size() == 0; }
  /// Array slots allocated (for heap accounting).
  size_t capacity() const noexcept { return cap_; }
  /// find()'s "absent", so code written against absl's find/end reads the same.
  Slot* end() const noexcept { return nullptr; }

  Slot* find(uint64_t key) const noexcept {
    if (key == 0) return has_zero_ ? const_cast<Slot*>(&zero_) : nullptr;
    if (cap_ == 0) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & (cap_ - 1)) {
      const uint64_t k = slots_[i].key;
      if (k == key) return &slots_[i];
      if (k == 0) return nullptr;
    }
  }

  /// Inserts `s` unless its key is present; returns the slot holding the key and whether `s`
  /// went in.
  std::pair<Slot*, bool> insert(const Slot& s) {
    if (s.key == 0) {
      if (has_zero_) return {&zero_, false};
      zero_ = s;
      has_zero_ = true;
      return {&zero_, true};
    }
    if ((size_ + 1) * 4 > cap_ * 3) grow();
    size_t i = home(s.key);
    for (;; i = (i + 1) & (cap_ - 1)) {
      const uint64_t k = slots_[i].key;
      if (k == s.key) return {&slots_[i], false};
      if (k == 0) break;
    }
    slots_[i] = s;
    ++size_;
    return {&slots_[i], true};
  }

  bool erase(uint64_t key) noexcept {
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
    // T3: walk the cluster after the hole; an entry whose home is not cyclically in (hole, j]
    // would be unreachable past the hole, so it moves into it and leaves a hole of its own.
    const size_t mask = cap_ - 1;
    size_t hole = static_cast<size_t>(s - slots_);
    for (size_t j = (hole + 1) & mask; slots_[j].key != 0; j = (j + 1) & mask) {
      const size_t h = home(slots_[j].key);
      const bool reachable = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (reachable) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole].key = 0;
    --size_;
  }

  /// Calls fn(slot&) for every entry; fn must not insert or erase.
  template <class F>
  void for_each(F&& fn) const {
    if (has_zero_) fn(const_cast<Slot&>(zero_));
    for (size_t i = 0; i < cap_; ++i)
      if (slots_[i].key != 0) fn(slots_[i]);
  }

  void clear() noexcept {
    std::free(slots_);
    slots_ = nullptr;
    cap_ = size_ = 0;
    shift_ = 64;
    has_zero_ = false;
  }

 private:
  static uint64_t next_seed() {
    static const uint64_t base = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    static std::atomic<uint64_t> counter{0};
    return base + 0x9e3779b97f4a7c15ull * (counter.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  // Fibonacci hashing: the top bits of one multiply, which every input bit reaches.
  size_t home(uint64_t key) const noexcept {
    return static_cast<size_t>(((key ^ seed_) * 0x9e3779b97f4a7c15ull) >> shift_);
  }

  static Slot* allocate(size_t n) {
    const size_t bytes = n * sizeof(Slot);
    void* p = std::calloc(n, sizeof(Slot));
    if (p == nullptr) throw std::bad_alloc();
    constexpr uintptr_t huge = uintptr_t{2} << 20;
    const auto begin = (reinterpret_cast<uintptr_t>(p) + huge - 1) & ~(huge - 1);
    const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(huge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    return static_cast<Slot*>(p);
  }

  void grow() {
    const size_t ncap = cap_ == 0 ? 16 : cap_ * 2;
    Slot* old = slots_;
    const size_t ocap = cap_;
    slots_ = allocate(ncap);
    cap_ = ncap;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(ncap));
    for (size_t i = 0; i < ocap; ++i) {
      if (old[i].key == 0) continue;
      size_t j = home(old[i].key);
      while (slots_[j].key != 0) j = (j + 1) & (cap_ - 1);
      slots_[j] = old[i];
    }
    std::free(old);
  }

  Slot* slots_ = nullptr;
  size_t cap_ = 0;   // 0 or a power of two
  size_t size_ = 0;  // array entries (the zero key's slot not counted)
  unsigned shift_ = 64;  // 64 - log2(cap_)
  Slot zero_{};
  bool has_zero_ = false;
  uint64_t seed_ = 0;
};

}  // namespace kvrelay::detail
