// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The open-addressing table (base/probe_table.hpp, rules PT1-PT7) against
// std::unordered_map under random inserts, erases and look-ups over a small key universe, so
// clusters form, wrap around the array's end and are cut by erases.
#include "base/probe_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/support/mappings.hpp"

namespace kvrelay {
namespace {

#pragma pack(push, 1)
struct slot {
  uint64_t key;
  uint32_t value;
};
#pragma pack(pop)

std::map<uint64_t, uint32_t> contents(const probe_table<slot>& t) {
  std::map<uint64_t, uint32_t> out;
  // Copies, not references, of the packed members (a reference to one is misaligned).
  t.for_each([&](const slot& s) {
    const uint64_t k = s.key;
    EXPECT_TRUE(out.emplace(k, uint32_t{s.value}).second) << k;
  });
  return out;
}

TEST(ProbeTable, PT1_KeyZeroIsAKeyLikeAnyOther) {
  probe_table<slot> t;
  EXPECT_EQ(t.find(0), nullptr);
  auto [s, inserted] = t.insert(slot{0, 7});
  EXPECT_TRUE(inserted);
  EXPECT_EQ(t.find(0), s);
  EXPECT_FALSE(t.insert(slot{0, 8}).second);
  EXPECT_EQ(t.find(0)->value, 7u);
  t.insert(slot{5, 1});
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(contents(t), (std::map<uint64_t, uint32_t>{{0, 7}, {5, 1}}));
  EXPECT_TRUE(t.erase(uint64_t{0}));
  EXPECT_FALSE(t.erase(uint64_t{0}));
  EXPECT_EQ(t.size(), 1u);
}

TEST(ProbeTable, PT3_StaysBetween64And80PercentFullOnceBig) {
  probe_table<slot> t;
  std::mt19937_64 rng(3);
  for (uint64_t k = 1; k <= 2'000'000; ++k) {
    t.insert(slot{rng() | 1, 0});
    ASSERT_LE(t.size() * 5, t.capacity() * 4 + 5 * probe_table<slot>::segment_count) << k;
    if (k >= 200'000 && k % 1000 == 0) {
      // Every segment grows by a quarter, so the whole table never falls under ~64 %.
      ASSERT_GE(t.size() * 100, t.capacity() * 60) << k;
    }
  }
  const double bytes_per_entry = static_cast<double>(t.heap_bytes()) / static_cast<double>(t.size());
  EXPECT_LE(bytes_per_entry, 32.0) << "20-byte slots at 64-80 % full";
}

TEST(ProbeTable, PT5_ClearReleasesTheArray) {
  probe_table<slot> t;
  for (uint64_t k = 0; k < 100; ++k) t.insert(slot{k, 0});
  t.clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.capacity(), 0u);
  EXPECT_EQ(t.find(3), nullptr);
  t.insert(slot{3, 1});
  EXPECT_EQ(t.find(3)->value, 1u);
}

// Sanitizers keep shadow memory beside every page the program touches, so RSS there is not the
// program's own: the RSS test skips.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

// VmRSS of this process, bytes (0 if /proc is not there).
size_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

TEST(ProbeTable, PT6_BigArraysHoldNoMoreThanThemselvesAndGoBackWhenFreed) {
  if (sanitized) GTEST_SKIP() << "RSS under a sanitizer includes its shadow memory";
  if (resident_bytes() == 0) GTEST_SKIP() << "no /proc/self/status";
  constexpr size_t slack = size_t{6} << 20;
  // The second round is the one malloc gets wrong: the first freed a big array, so the arrays
  // the second table grows through come from an arena that keeps them once outgrown.
  for (int round = 0; round < 2; ++round) {
    const size_t before = resident_bytes();
    {
      probe_table<slot> t;
      for (uint64_t k = 1; k <= 1'000'000; ++k) t.insert(slot{k, 0});
      const size_t array = t.capacity() * sizeof(slot);  // 2^21 slots: 24 MiB
      const size_t grown = resident_bytes() - before;
      EXPECT_GT(grown + slack, array) << round;  // the array is resident: the measure works
      EXPECT_LT(grown, array + slack) << "round " << round << ": the outgrown arrays stayed";
    }
    const size_t after = resident_bytes();
    EXPECT_LT(after, before + slack) << "round " << round << ": the freed array stayed";
  }
}

// A burst drains back: the table rebuilds itself smaller (every key still found, the erased ones
// gone), its memory goes back, and refilling to the drained size does not grow it again.
TEST(ProbeTable, PT7_AnArrayLeftUnderOneSixteenthFullIsRebuiltSmaller) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys(1'000'000);
  for (auto& k : keys) k = rng() | 1;  // never the zero key
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::shuffle(keys.begin(), keys.end(), rng);
  probe_table<slot> t;
  std::unordered_map<uint64_t, uint32_t> ref;
  for (size_t i = 0; i < keys.size(); ++i) {
    t.insert(slot{keys[i], static_cast<uint32_t>(i)});
    ref.emplace(keys[i], static_cast<uint32_t>(i));
  }
  const size_t big = t.capacity();
  ASSERT_GE(big * sizeof(slot), size_t{2} << 20) << "an array of its own (PT6)";
  const bool measure = !sanitized && resident_bytes() != 0;
  const size_t rss_full = measure ? resident_bytes() : 0;
  constexpr size_t keep = 20'000;
  for (size_t i = keep; i < keys.size(); ++i) {
    ASSERT_TRUE(t.erase(keys[i])) << i;
    ref.erase(keys[i]);
    ASSERT_GE(t.size() * 16, t.capacity()) << "rebuilt once under 1/16 full, at " << i;
  }
  // Each segment of 64 KiB or more rebuilt at most 3/8 full whenever an erase left it under
  // 1/16: the drained table is a small fraction of the burst's.
  EXPECT_LT(t.capacity() * 4, big) << "not the burst's arrays";
  EXPECT_GE(t.capacity() * 3, t.size() * 8 - 8 * probe_table<slot>::segment_count);
  const std::map<uint64_t, uint32_t> expected(ref.begin(), ref.end());
  EXPECT_EQ(contents(t), expected);
  if (measure) {
    const size_t rss_drained = resident_bytes();
    EXPECT_LT(rss_drained + big * sizeof(slot) / 2, rss_full) << "the burst's array went back";
  }
  const size_t small = t.capacity();
  for (size_t i = keep; i < 2 * keep; ++i) t.insert(slot{keys[i], 0});  // back and forth
  for (size_t i = keep; i < 2 * keep; ++i) t.erase(keys[i]);
  EXPECT_LE(t.capacity(), 2 * small) << "no rebuild back and forth";
  EXPECT_EQ(t.size(), keep);
}

TEST(ProbeTableProperty, BehavesLikeAMapUnderChurn) {
  for (uint64_t universe : {8u, 40u, 300u, 5000u}) {
    std::mt19937_64 rng(universe);
    probe_table<slot> t;
    std::unordered_map<uint64_t, uint32_t> ref;
    for (int step = 0; step < 40000; ++step) {
      const uint64_t k = rng() % universe;  // includes 0
      switch (rng() % 4) {
        case 0:
        case 1: {
          const auto v = static_cast<uint32_t>(rng());
          auto [s, inserted] = t.insert(slot{k, v});
          const auto [it, ref_inserted] = ref.emplace(k, v);
          ASSERT_EQ(inserted, ref_inserted) << "universe " << universe << " step " << step;
          ASSERT_EQ(uint64_t{s->key}, k);
          ASSERT_EQ(s->value, it->second);
          break;
        }
        case 2:
          ASSERT_EQ(t.erase(k), ref.erase(k) == 1) << "universe " << universe << " step " << step;
          break;
        default: {
          const slot* s = t.find(k);
          const auto it = ref.find(k);
          ASSERT_EQ(s != nullptr, it != ref.end()) << "universe " << universe << " step " << step;
          if (s != nullptr) {
            ASSERT_EQ(s->value, it->second);
          }
        }
      }
      ASSERT_EQ(t.size(), ref.size());
      if (step % 997 == 0) {
        ASSERT_EQ(contents(t), (std::map<uint64_t, uint32_t>(ref.begin(), ref.end())));
      }
    }
    // Every entry is still reachable once the churn is over.
    for (const auto& [k, v] : ref) {
      ASSERT_NE(t.find(k), nullptr) << k;
      EXPECT_EQ(t.find(k)->value, v);
    }
  }
}

#pragma pack(push, 1)
struct pair_key {
  uint64_t a;
  uint32_t b;
  bool operator==(const pair_key& o) const { return a == o.a && b == o.b; }
};
struct pair_slot {
  pair_key key;
  uint8_t value;
};
#pragma pack(pop)
uint64_t probe_hash(const pair_key& k) { return k.a ^ (uint64_t{k.b} << 40); }

TEST(ProbeTable, PT1_AWiderKeyIsZeroOnlyWhenAllOfItIs) {
  probe_table<pair_slot> t;
  EXPECT_TRUE(t.insert(pair_slot{{0, 0}, 1}).second);
  EXPECT_TRUE(t.insert(pair_slot{{0, 1}, 2}).second);
  EXPECT_TRUE(t.insert(pair_slot{{7, 1}, 3}).second);
  EXPECT_TRUE(t.insert(pair_slot{{7, 2}, 4}).second);
  EXPECT_FALSE(t.insert(pair_slot{{7, 2}, 5}).second);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.size(), 4u) << "the all-zero key is kept apart; the others fill the arrays";
  EXPECT_EQ(t.find(pair_key{0, 0})->value, 1);
  EXPECT_EQ(t.find(pair_key{0, 1})->value, 2);
  EXPECT_EQ(t.find(pair_key{7, 2})->value, 4);
  EXPECT_TRUE(t.erase(pair_key{7, 1}));
  EXPECT_EQ(t.find(pair_key{7, 1}), nullptr);
  EXPECT_EQ(t.find(pair_key{7, 2})->value, 4);
}

// PT9: every key present through a walk is visited exactly once, in chunks of at least `max`,
// however the table changes between chunks (growth, erase, a PT7 rebuild); a key inserted or
// erased meanwhile at most once.
TEST(ProbeTable, PT9_AWalkVisitsEveryStayingKeyOnceWhateverHappensBetweenChunks) {
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    std::mt19937_64 rng(seed);
    probe_table<slot> t(seed * 77);
    std::set<uint64_t> staying;
    for (int i = 0; i < 20'000; ++i) {
      const uint64_t k = seed == 4 ? rng() % 30'000 : rng();  // seed 4: the zero key too
      t.insert(slot{k, 1});
      staying.insert(k);
    }
    std::map<uint64_t, int> seen;
    std::set<uint64_t> touched;  // inserted or erased during the walk
    uint64_t cursor = 0;
    size_t chunks = 0;
    for (;;) {
      size_t n = 0;
      uint64_t last = 0;
      const walk_cursor c = t.walk(cursor, 100, [&](slot& s) {
        const uint64_t k = s.key;
        ++seen[k];
        ++n;
        const uint64_t pos = t.position(k);
        EXPECT_GE(pos, cursor) << "positions order the walk";
        last = std::max(last, pos);
      });
      ++chunks;
      if (c.done) break;
      EXPECT_GE(n, 100u) << "a chunk holds at least max unless it ends the walk";
      EXPECT_GT(c.next, last) << "the cursor passes every key visited";
      cursor = c.next;
      // Between chunks: inserts that grow segments, erases that may rebuild them smaller.
      for (int i = 0; i < 300; ++i) {
        const uint64_t k = rng();
        t.insert(slot{k, 2});
        touched.insert(k);
      }
      for (int i = 0; i < 200 && !staying.empty(); ++i) {
        auto it = staying.lower_bound(rng());
        if (it == staying.end()) it = staying.begin();
        t.erase(*it);
        touched.insert(*it);
        staying.erase(it);
      }
    }
    EXPECT_GT(chunks, 50u);
    for (uint64_t k : staying) ASSERT_EQ(seen[k], 1) << "seed " << seed << " key " << k;
    for (const auto& [k, n] : seen) ASSERT_LE(n, 1) << "seed " << seed << " key " << k;
    for (const auto& [k, n] : seen)
      ASSERT_TRUE(staying.count(k) || touched.count(k)) << "a key that was never there";
  }
}

TEST(ProbeTable, PT9_AnEmptyTableWalksInOneStepAndOnlyTheZeroKeyToo) {
  probe_table<slot> t;
  size_t n = 0;
  EXPECT_TRUE(t.walk(0, 10, [&](slot&) { ++n; }).done);
  EXPECT_EQ(n, 0u);
  t.insert(slot{0, 5});
  EXPECT_TRUE(t.walk(0, 10, [&](slot& s) { n += s.value; }).done);
  EXPECT_EQ(n, 5u);
}

// PT8: growth rebuilds a sixteenth of the table at a time.
TEST(ProbeTable, PT8_GrowthRebuildsOneSegmentAtATime) {
  probe_table<slot> t;
  std::mt19937_64 rng(8);
  size_t before = 0;
  size_t biggest_step = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    t.insert(slot{rng() | 1, 0});
    if (t.capacity() != before) {
      biggest_step = std::max(biggest_step, t.capacity() - before);
      before = t.capacity();
    }
  }
  // One segment (a sixteenth) grows by a quarter: ~1/64 of the table, never the whole of it.
  EXPECT_LT(biggest_step * 32, t.capacity()) << "one segment at a time";
}

TEST(ProbeTable, ReserveMakesRoomWithoutGrowing) {
  probe_table<slot> t;
  t.reserve(100'000);
  const size_t cap = t.capacity();
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100'000; ++i) t.insert(slot{rng() | 1, 0});
  EXPECT_EQ(t.capacity(), cap);
}

// PT11: a reserve maps every new array as one run from a huge-page boundary (so the kernel can
// back it with huge pages; whether it does is the system's), and the run's pieces still go back
// one segment at a time: a drained segment is rebuilt apart (PT7), a clear frees the rest.
TEST(ProbeTable, PT11_AReserveMapsItsArraysAsOneRunFromAHugePageBoundary) {
  constexpr uintptr_t huge = uintptr_t{2} << 20;
  probe_table<slot> t;
  t.reserve(1'500'000);  // ~22 MiB of 12-byte slots: segments of ~1.4 MiB, none a huge page
  const size_t bytes = t.capacity() * sizeof(slot);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> keys(1'000'000);
  for (auto& k : keys) k = rng() | 1;
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (uint64_t k : keys) t.insert(slot{k, 1});
  uintptr_t lo = ~uintptr_t{0}, hi = 0;
  for (uint64_t k : keys) {
    const auto a = reinterpret_cast<uintptr_t>(t.find(k));
    lo = std::min(lo, a);
    hi = std::max(hi, a);
  }
  const auto [begin, end] = testing::mapping_of(reinterpret_cast<const void*>(lo));
  ASSERT_NE(begin, 0u);
  EXPECT_LT(hi, end) << "every segment's array in the mapping of the lowest slot";
  EXPECT_EQ(begin % huge, 0u) << "the run starts on a huge-page boundary";
  EXPECT_GE(end - begin, bytes) << "it holds every array";
  EXPECT_LT(end - begin, bytes + probe_table<slot>::segment_count * 4096 + huge)
      << "and little more (each array on its own pages)";

  // Drain all but a few: each segment is rebuilt apart (PT7) and its piece of the run unmapped
  // (a wrong length there would unmap a neighbour's array, and the finds below would fault).
  std::shuffle(keys.begin(), keys.end(), rng);
  constexpr size_t keep = 1000;
  for (size_t i = keep; i < keys.size(); ++i) ASSERT_TRUE(t.erase(keys[i])) << i;
  EXPECT_LT(t.capacity() * 16, bytes / sizeof(slot)) << "every segment rebuilt smaller";
  for (size_t i = 0; i < keep; ++i) ASSERT_NE(t.find(keys[i]), nullptr) << i;
  for (size_t i = keep; i < 2 * keep; ++i) t.insert(slot{keys[i], 2});
  EXPECT_EQ(t.size(), 2 * keep);
  t.clear();
  for (uintptr_t a = begin; a < end; a += huge / 2)
    EXPECT_EQ(testing::mapping_of(reinterpret_cast<const void*>(a)).first, 0u)
        << "clear freed the run";
}

// PT11's choice: a run only from a huge page up, only of arrays mapped on their own, and only
// while what it replaces is at most a sixteenth of it (the run is made before they go).
TEST(ProbeTable, PT11_ARunOnlyWhenItIsAHugePageAndReplacesASixteenthAtMost) {
  using t = probe_table<slot>;
  constexpr size_t huge = size_t{2} << 20;
  EXPECT_TRUE(t::reserve_as_run(0, huge, true));
  EXPECT_FALSE(t::reserve_as_run(0, huge - 1, true)) << "less than a huge page";
  EXPECT_FALSE(t::reserve_as_run(0, 64 * huge, false)) << "an array small enough for malloc";
  EXPECT_TRUE(t::reserve_as_run(4 * huge / 16, 4 * huge, true)) << "a sixteenth";
  EXPECT_FALSE(t::reserve_as_run(4 * huge / 16 + 1, 4 * huge, true)) << "more than a sixteenth";
}

TEST(ProbeTable, MovedFromIsEmptyAndUsable) {
  probe_table<slot> a;
  for (uint64_t k = 0; k < 50; ++k) a.insert(slot{k, static_cast<uint32_t>(k)});
  probe_table<slot> b(std::move(a));
  EXPECT_EQ(b.size(), 50u);
  EXPECT_EQ(b.find(0)->value, 0u);
  EXPECT_EQ(b.find(49)->value, 49u);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the state it promises
  a.insert(slot{1, 1});
  EXPECT_EQ(a.find(1)->value, 1u);
}

}  // namespace
}  // namespace kvrelay
