// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Data-parallel merged mode: an eviction reaches the server only when no rank holds the key.
#include "actors/debouncer/holder_set.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

using kvrelay::holder_set;

namespace {

TEST(HolderSet, FirstAddAndLastRemoveAreReported) {
  holder_set hs;
  EXPECT_TRUE(hs.add("", 42, 0));
  EXPECT_FALSE(hs.add("", 42, 3));
  EXPECT_FALSE(hs.add("", 42, 3));  // idempotent
  EXPECT_EQ(hs.holders("", 42), (uint64_t{1} << 0) | (uint64_t{1} << 3));
  EXPECT_FALSE(hs.remove("", 42, 0));  // rank 3 still holds it
  EXPECT_TRUE(hs.remove("", 42, 3));
  EXPECT_EQ(hs.size(), 0u);
  EXPECT_EQ(hs.holders("", 42), 0u);
  EXPECT_TRUE(hs.add("", 42, 1));  // a new first holder after the last left
}

TEST(HolderSet, RemoveByANonHolderChangesNothing) {
  holder_set hs;
  hs.add("", 7, 1);
  EXPECT_FALSE(hs.remove("", 7, 2));
  EXPECT_FALSE(hs.remove("", 8, 1));
  EXPECT_FALSE(hs.remove("unknown-adapter", 7, 1));
  EXPECT_EQ(hs.holders("", 7), uint64_t{1} << 1);
  EXPECT_TRUE(hs.remove("", 7, 1));
}

TEST(HolderSet, AdaptersAreSeparateKeys) {
  holder_set hs;
  EXPECT_TRUE(hs.add("", 5, 0));
  EXPECT_TRUE(hs.add("sql-lora", 5, 1));
  EXPECT_EQ(hs.size(), 2u);
  EXPECT_TRUE(hs.remove("sql-lora", 5, 1));
  EXPECT_EQ(hs.holders("", 5), 1u);
}

TEST(HolderSet, HighestRankWorksAndOutOfRangeIsIgnored) {
  holder_set hs;
  EXPECT_TRUE(hs.add("", 1, 63));
  EXPECT_EQ(hs.holders("", 1), uint64_t{1} << 63);
  EXPECT_FALSE(hs.add("", 2, 64));
  EXPECT_FALSE(hs.remove("", 1, 64));
  EXPECT_EQ(hs.size(), 1u);
  EXPECT_TRUE(hs.remove("", 1, 63));
}

TEST(HolderSet, ClearRankReleasesKeysOnlyThatRankHeld) {
  holder_set hs;
  hs.add("", 1, 0);
  hs.add("", 2, 0);
  hs.add("", 2, 1);
  hs.add("lora", 3, 0);
  hs.add("", 4, 1);
  std::set<std::pair<std::string, uint64_t>> released;
  EXPECT_EQ(hs.clear_rank(0, [&](const std::string& a, uint64_t f) { released.emplace(a, f); }),
            2u);
  EXPECT_EQ(released, (std::set<std::pair<std::string, uint64_t>>{{"", 1}, {"lora", 3}}));
  EXPECT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs.holders("", 2), uint64_t{1} << 1);
  EXPECT_EQ(hs.clear_rank(0, nullptr), 0u);
}

TEST(HolderSet, ClearForgetsEverything) {
  holder_set hs;
  hs.add("a", 1, 0);
  hs.add("b", 2, 5);
  hs.clear();
  EXPECT_EQ(hs.size(), 0u);
  EXPECT_EQ(hs.holders("a", 1), 0u);
  EXPECT_TRUE(hs.add("b", 2, 5));
}

}  // namespace
