// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// An open-addressing hash set of packed slots, for the tables that grow to millions of entries
// on the add path: the shard's index and removal directory (u64 engine hashes). Why not
// absl::flat_hash_set: a SwissTable keeps its control bytes apart from its slots, so inserting a
// new key into a table far larger than the cache misses twice (the control group, then the slot);
// here the key lives in the slot and a linear probe reads and writes one cache line, usually.
// Measured at 1 M random keys (20-byte slots, huge-page advice on both): ~70 vs ~150 ns per
// insert.
//
//  PT1. Any key value is a key. The all-zero key marks an empty array slot, so the slot of that
//       key is kept apart.
//  PT2. Every key has a *position*, H = (probe_hash(key) ^ seed) x 2^64/phi, a bijection of the
//       64-bit values; the seed is per table, so an engine cannot pick keys that collide (a
//       clustered table costs O(n) a probe). The table is 16 segments by the top 4 bits of H;
//       within a segment a key's home slot is the rest of H scaled to the segment's capacity,
//       and probing is linear from there. A home is monotone in H, whatever the capacity.
//  PT3. A segment is at most 4/5 full: it grows before an insert would pass that, doubling while
//       small and by a quarter from 1024 slots on, so a big table stays between 64 % and 80 %
//       full (20-byte slots: 25-31 bytes per entry; doubling left 27-53). Deletion shifts the
//       following entries back (no tombstones), so probes never lengthen with churn.
//  PT4. Pointers to slots stay valid until the next insert or erase (either may move slots).
//  PT5. clear() releases every array (an AllBlocksCleared gives the memory back).
//  PT6. Arrays of 64 KiB or more are mappings of their own, not malloc's: freed (grown out of,
//       cleared), their pages go back to the system at once. From malloc they would not: once a
//       big chunk has been freed, glibc raises its mmap threshold to that size (up to 32 MiB), so
//       a table rebuilt after a clear grows inside an arena that keeps every array it outgrew
//       (bench_shard IndexMemory1M: a second 1 M index in one process, 84 B of RSS per block
//       instead of 50). They start on a 2 MiB boundary with the transparent-huge-page advice
//       (base/huge_pages.hpp): probes at random over tens of MB would otherwise miss the TLB
//       nearly every time (advice only; it rounds nothing up).
//  PT7. A segment of 64 KiB or more that an erase leaves under 1/16 full is rebuilt at most 3/8
//       full: a burst of a million blocks that drained back to the engine's cache no longer keeps
//       the burst's arrays. 1/16 and 3/8 leave the next grow and the next shrink well apart, so a
//       table that breathes never rebuilds back and forth. Without the memory for the smaller
//       array the big one stays.
//  PT8. Growth rebuilds one segment at a time, so the memory a rebuild holds twice is a
//       sixteenth of the table's, not all of it: a 2 M-entry table grows by ~3 MB at a time, not
//       by ~110 MB (what a 128 MiB container cannot give).
//  PT9. walk(from, max, fn) visits, in chunks, every key whose position is in [from, next) and
//       returns `next`, the cursor of the following chunk. Positions order the walk, not slots,
//       so a walk survives any number of inserts, erases, growths and rebuilds between chunks
//       (PT2's homes are monotone in H): a key present through the whole walk is visited exactly
//       once; a key inserted or erased during it, at most once. A chunk holds at least `max`
//       keys unless it ends the walk, and at most `max` plus one cluster.
// PT10. A mapped array (PT6) is faulted in whole when it is made (MADV_POPULATE_WRITE): a
//       table's every page is written within a few inserts of a rehash anyway, and one call
//       costs a fraction of a fault per page taken on the add path.
// PT11. reserve() maps the arrays it makes as one run starting on a 2 MiB boundary, each
//       segment's on its own pages (so PT5-PT8 free one segment's pages alone), with the
//       huge-page advice on the whole run (base/huge_pages.hpp, HP1). A table presized for an
//       engine's cache of 10^6 blocks has segments of ~1.7 MB: none has a whole huge page of
//       its own, and 4 KiB pages cost a TLB miss on nearly every insert (a VM's page walk is the
//       dearest part of one). Only while the arrays it replaces are at most a sixteenth of the
//       run: the run is made before they go, and PT8 holds no more than that twice.
//
// Slot: a trivially copyable struct whose first member is `key`, of a trivially copyable type K
// with ==, whose value-initialised K{} is the all-zero key, and with a `probe_hash(const K&)`
// found by lookup (uint64_t has one below); the rest of the slot is payload.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <type_traits>
#include <utility>

#include "base/huge_pages.hpp"

namespace kvrelay {

/// A u64 key is its own hash: the table's multiply spreads it.
inline uint64_t probe_hash(uint64_t k) noexcept { return k; }

/// Where a walk (PT9) goes on from: `next` unless `done`.
struct walk_cursor {
  uint64_t next = 0;
  bool done = false;
};

/// How far ahead of the key it works on a loop over many keys asks for their slots. A core
/// keeps some twenty misses in flight: a loop that asked for a whole event's 128 slots first
/// found the later ones still queued behind the earlier ones when it reached them; a window of
/// 16 keeps the misses overlapping and each line arrives shortly before it is used (a 1 M-block
/// blast's index work: 29 % of the pipeline's samples with every slot asked first, 24 % with this).
inline constexpr size_t prefetch_distance = 16;

/// Asks the cache for the line at `p`. An asm statement, not __builtin_prefetch: GCC deems a
/// function whose only effect is a builtin prefetch free of effects and drops every call to it
/// before it is inlined, so a helper like probe_table::prefetch compiled to nothing.
inline void prefetch_line(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);  // a hint the compiler may drop as above: nothing else is lost
#endif
}

template <class Slot>
class probe_table {
  static_assert(std::is_trivially_copyable_v<Slot>, "slots are moved as bytes");

 public:
  using key_type = std::remove_cv_t<decltype(Slot::key)>;
  static constexpr unsigned segment_bits = 4;
  static constexpr size_t segment_count = size_t{1} << segment_bits;

  probe_table() : seed_(next_seed()) {}
  /// A fixed seed (tests, and tables whose walk order must be reproducible).
  explicit probe_table(uint64_t seed) : seed_(seed) {}
  ~probe_table() { release_all(); }
  probe_table(probe_table&& o) noexcept { *this = std::move(o); }
  probe_table& operator=(probe_table&& o) noexcept {
    if (this != &o) {
      release_all();
      segs_ = std::exchange(o.segs_, {});
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
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
  /// Array slots allocated, every segment's (for heap accounting).
  size_t capacity() const noexcept { return cap_; }
  /// Bytes of the arrays.
  size_t heap_bytes() const noexcept { return cap_ * sizeof(Slot); }
  /// find()'s "absent", so code written against absl's find/end reads the same.
  Slot* end() const noexcept { return nullptr; }
  uint64_t seed() const noexcept { return seed_; }

  /// PT2: where the key stands in a walk's order.
  uint64_t position(key_type key) const noexcept {
    return (probe_hash(key) ^ seed_) * 0x9e3779b97f4a7c15ull;
  }

  Slot* find(key_type key) const noexcept {
    if (is_zero(key)) return has_zero_ ? const_cast<Slot*>(&zero_) : nullptr;
    const uint64_t h = position(key);
    const segment& s = segs_[seg_of(h)];
    if (s.cap == 0) return nullptr;
    for (size_t i = home(s, h);; i = next(s, i)) {
      const key_type k = s.slots[i].key;
      if (k == key) return &s.slots[i];
      if (is_zero(k)) return nullptr;
    }
  }

  /// Asks the cache for the line `key`'s probe starts at, ahead of a find or insert of it.
  void prefetch(key_type key) const noexcept {
    const uint64_t h = position(key);
    const segment& s = segs_[seg_of(h)];
    if (s.cap != 0) prefetch_line(&s.slots[home(s, h)]);
  }

  /// Inserts `s` unless its key is present; returns the slot holding the key and whether `s`
  /// went in.
  std::pair<Slot*, bool> insert(const Slot& in) {
    const key_type key = in.key;
    if (is_zero(key)) {
      if (has_zero_) return {&zero_, false};
      zero_ = in;
      has_zero_ = true;
      return {&zero_, true};
    }
    const uint64_t h = position(key);
    segment& s = segs_[seg_of(h)];
    if (over_load(s.size + 1, s.cap)) grow(s);
    size_t i = home(s, h);
    for (;; i = next(s, i)) {
      const key_type k = s.slots[i].key;
      if (k == key) return {&s.slots[i], false};
      if (is_zero(k)) break;
    }
    s.slots[i] = in;
    ++s.size;
    ++size_;
    return {&s.slots[i], true};
  }

  bool erase(key_type key) noexcept {
    Slot* s = find(key);
    if (s == nullptr) return false;
    erase(s);
    return true;
  }

  /// Erases the slot find() or insert() returned.
  void erase(Slot* p) noexcept {
    if (p == &zero_) {
      has_zero_ = false;
      return;
    }
    segment& s = segs_[seg_of(position(p->key))];
    erase_at(s, static_cast<size_t>(p - s.slots));
  }

  /// Calls fn(slot&) for every entry; fn must not insert or erase.
  template <class F>
  void for_each(F&& fn) const {
    if (has_zero_) fn(const_cast<Slot&>(zero_));
    for (const segment& s : segs_)
      for (size_t i = 0; i < s.cap; ++i)
        if (!is_zero(s.slots[i].key)) fn(s.slots[i]);
  }

  /// PT9: calls fn(slot&) for the keys positioned in [from, returned next), at least `max` of
  /// them unless the walk ends here; fn must not insert or erase.
  template <class F>
  walk_cursor walk(uint64_t from, size_t max, F&& fn) const {
    size_t seen = 0;
    uint64_t pos = from;
    for (size_t g = seg_of(from); g < segment_count; ++g) {
      const segment& s = segs_[g];
      const uint64_t seg_start = uint64_t{g} << (64 - segment_bits);
      if (g != seg_of(from)) {
        if (seen >= max) {  // a segment's start is a chunk's end like any other
          visit_zero(from, seg_start, fn);
          return {seg_start, false};
        }
        pos = seg_start;
      }
      if (s.size == 0) continue;
      // Entries at their home or after it, up to the first empty slot once `max` were seen.
      for (size_t i = home(s, pos); i < s.cap; ++i) {
        const Slot& sl = s.slots[i];
        if (is_zero(sl.key)) {
          if (seen < max) continue;
          const uint64_t stop = seg_start + bucket_start(s, i);
          visit_zero(from, stop, fn);
          return {stop, false};
        }
        const uint64_t h = position(sl.key);
        if (h >= pos && home(s, h) <= i) {  // not one wrapped round from the array's end
          fn(const_cast<Slot&>(sl));
          ++seen;
        }
      }
      // The array's end: the cluster that wraps round to its start belongs here.
      for (size_t i = 0; i < s.cap && !is_zero(s.slots[i].key); ++i) {
        const uint64_t h = position(s.slots[i].key);
        if (h >= pos && home(s, h) > i) {
          fn(const_cast<Slot&>(s.slots[i]));
          ++seen;
        }
      }
    }
    visit_zero(from, ~uint64_t{0}, fn, true);
    return {0, true};
  }

  /// Makes room for `n` entries without growing (an engine that says what it can hold).
  void reserve(size_t n) {
    // Keys spread over the segments binomially: four standard deviations of room above the mean.
    const size_t mean = n / segment_count;
    size_t sd = 1;
    while (sd * sd < mean) ++sd;
    const size_t per = mean + 4 * sd + 8;
    std::array<size_t, segment_count> want{};
    size_t run = 0;  // PT11: bytes of one run holding every new array, each on its own pages
    bool mapped = true;
    for (size_t g = 0; g < segment_count; ++g) {
      want[g] = segs_[g].cap;
      while (over_load(per, want[g])) want[g] = grown(want[g]);
      if (want[g] == segs_[g].cap) continue;
      mapped = mapped && want[g] * sizeof(Slot) >= map_from;
      run += huge_pages::page_rounded(want[g] * sizeof(Slot));
    }
    // PT11 (HP1): nullptr, no room for the run, maps segment by segment instead.
    auto* at = reserve_as_run(cap_ * sizeof(Slot), run, mapped)
                   ? static_cast<char*>(huge_pages::map(run, true))
                   : nullptr;
    for (size_t g = 0; g < segment_count; ++g) {
      if (want[g] == segs_[g].cap) continue;
      if (at == nullptr) {
        rehash(segs_[g], want[g]);
        continue;
      }
      rehash(segs_[g], want[g], reinterpret_cast<Slot*>(at));
      at += huge_pages::page_rounded(want[g] * sizeof(Slot));
    }
  }

  /// PT11's choice: one run for new arrays of `run` bytes in all (`all_mapped`: each is a
  /// mapping of its own by PT6) that replace arrays of `replaced` bytes.
  static constexpr bool reserve_as_run(size_t replaced, size_t run, bool all_mapped) noexcept {
    return all_mapped && run >= huge_pages::huge_page && replaced * segment_count <= run;
  }

  void clear() noexcept {
    release_all();
    segs_ = {};
    cap_ = size_ = 0;
    has_zero_ = false;
  }

 private:
  struct segment {
    Slot* slots = nullptr;
    size_t cap = 0;
    size_t size = 0;
  };

  // By value, here, in home() and in position, find and erase: a slot's key is a packed member
  // (callers pass p->key), and a reference to it would be misaligned (UB; UBSan says so).
  static bool is_zero(key_type k) noexcept { return k == key_type{}; }

  static uint64_t next_seed() {
    static const uint64_t base = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    static std::atomic<uint64_t> counter{0};
    return base + 0x9e3779b97f4a7c15ull * (counter.fetch_add(1, std::memory_order_relaxed) + 1);
  }

  static size_t seg_of(uint64_t h) noexcept { return static_cast<size_t>(h >> (64 - segment_bits)); }

  // PT2: the position's bits below the segment's, scaled to the capacity (monotone in h). Only
  // called with s.cap > 0.
  static size_t home(const segment& s, uint64_t h) noexcept {
    const uint64_t local = h << segment_bits;
    return static_cast<size_t>((static_cast<unsigned __int128>(local) * s.cap) >> 64);
  }

  // The smallest in-segment offset of a position whose home is slot i (PT9's cursors).
  static uint64_t bucket_start(const segment& s, size_t i) noexcept {
    using u128 = unsigned __int128;
    const u128 local = ((static_cast<u128>(i) << 64) + s.cap - 1) / s.cap;  // ceil(i 2^64 / cap)
    const u128 step = static_cast<u128>(1) << segment_bits;
    return static_cast<uint64_t>((local + step - 1) / step);
  }

  static size_t next(const segment& s, size_t i) noexcept { return i + 1 == s.cap ? 0 : i + 1; }

  static bool over_load(size_t n, size_t cap) noexcept { return n * 5 > cap * 4; }  // PT3
  static size_t grown(size_t cap) noexcept {
    if (cap < 1024) return cap == 0 ? 8 : cap * 2;
    return (cap + cap / 4 + 63) & ~size_t{63};
  }

  template <class F>
  void visit_zero(uint64_t from, uint64_t to, F& fn, bool to_inclusive = false) const {
    if (!has_zero_) return;
    const uint64_t h = position(key_type{});
    if (h >= from && (h < to || (to_inclusive && h == to))) fn(const_cast<Slot&>(zero_));
  }

  // PT3: walk the cluster after the hole; an entry whose home is not cyclically in (hole, j]
  // would be unreachable past the hole, so it moves into it and leaves a hole of its own.
  void erase_at(segment& s, size_t hole) noexcept {
    for (size_t j = next(s, hole); !is_zero(s.slots[j].key); j = next(s, j)) {
      const size_t h = home(s, position(s.slots[j].key));
      const bool reachable = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (reachable) continue;
      s.slots[hole] = s.slots[j];
      hole = j;
    }
    s.slots[hole].key = key_type{};
    --s.size;
    --size_;
    if (s.cap * sizeof(Slot) >= map_from && s.size * 16 < s.cap) shrink(s);
  }

  void shrink(segment& s) noexcept {  // PT7
    size_t ncap = 8;
    while (ncap * 3 < s.size * 8) ncap = grown(ncap);
    try {
      rehash(s, ncap);
    } catch (const std::bad_alloc&) {
      // the big array stays
    }
  }

  static constexpr size_t map_from = size_t{64} << 10;  // PT6
  static Slot* allocate(size_t n) {
    const size_t bytes = n * sizeof(Slot);
    if (bytes < map_from) {
      void* p = std::calloc(n, sizeof(Slot));  // all-zero keys: every slot empty
      if (p == nullptr) throw std::bad_alloc();
      return static_cast<Slot*>(p);
    }
    // Zero pages (every slot empty) from a huge-page boundary, advised (PT6), and faulted in now
    // in one call (PT10), not page by page on the inserts and the rehash that follow. A kernel
    // without MADV_POPULATE_WRITE (before 5.14) faults as before.
    void* p = huge_pages::map(bytes, true);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<Slot*>(p);
  }

  static void release(Slot* p, size_t n) noexcept {
    if (p == nullptr) return;
    if (n * sizeof(Slot) < map_from) {
      std::free(p);
    } else {
      huge_pages::unmap(p, n * sizeof(Slot));
    }
  }

  void release_all() noexcept {
    for (segment& s : segs_) release(s.slots, s.cap);
  }

  void grow(segment& s) { rehash(s, grown(s.cap)); }

  // Moves the segment's entries into a new array of `ncap` slots (`into`: reserve's, PT11); the
  // old array stays if that throws (PT8: one segment at a time).
  void rehash(segment& s, size_t ncap, Slot* into = nullptr) {
    Slot* fresh = into != nullptr ? into : allocate(ncap);
    Slot* old = s.slots;
    const size_t ocap = s.cap;
    s.slots = fresh;
    s.cap = ncap;
    cap_ = cap_ - ocap + ncap;
    for (size_t i = 0; i < ocap; ++i) {
      if (is_zero(old[i].key)) continue;
      size_t j = home(s, position(old[i].key));
      while (!is_zero(s.slots[j].key)) j = next(s, j);
      s.slots[j] = old[i];
    }
    release(old, ocap);
  }

  std::array<segment, segment_count> segs_{};
  size_t size_ = 0;  // array entries (the zero key's slot not counted)
  size_t cap_ = 0;   // every segment's slots
  Slot zero_{};
  bool has_zero_ = false;
  uint64_t seed_ = 0;
};

}  // namespace kvrelay
