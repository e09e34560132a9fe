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
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

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

TEST(ProbeTable, PT3_StaysAtMostThreeQuartersFull) {
  probe_table<slot> t;
  for (uint64_t k = 1; k <= 1000; ++k) {
    t.insert(slot{k, 0});
    ASSERT_LE(t.size() * 4, t.capacity() * 3) << k;
  }
  EXPECT_EQ(t.capacity(), 2048u);
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
  // 2^21 slots at 1 M, 2^19 below 131 072 (1/16), 2^17 below 32 768: under 2 MiB, malloc's.
  EXPECT_EQ(t.capacity(), size_t{1} << 17);
  EXPECT_GE(t.capacity() * 3, t.size() * 8 - 8);
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
  EXPECT_EQ(t.capacity(), 16u) << "the all-zero key is kept apart; the others fill the array";
  EXPECT_EQ(t.find(pair_key{0, 0})->value, 1);
  EXPECT_EQ(t.find(pair_key{0, 1})->value, 2);
  EXPECT_EQ(t.find(pair_key{7, 2})->value, 4);
  EXPECT_TRUE(t.erase(pair_key{7, 1}));
  EXPECT_EQ(t.find(pair_key{7, 1}), nullptr);
  EXPECT_EQ(t.find(pair_key{7, 2})->value, 4);
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
