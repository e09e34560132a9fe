// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Hybrid-model group filtering (docs/spec/engine-wire.md "Hybrid models").
#include "actors/decoder/group_filter.hpp"

#include <gtest/gtest.h>

namespace kvrelay {
namespace {

block_stored stored(std::optional<int64_t> group, group_kind kind) {
  block_stored s;
  s.group_idx = group;
  s.kind = kind;
  return s;
}

block_removed removed(std::optional<int64_t> group) {
  block_removed r;
  r.group_idx = group;
  return r;
}

TEST(GroupFilter, EventWithNeitherFieldIsAdmitted) {
  group_filter f;
  EXPECT_TRUE(f.admit(stored(std::nullopt, group_kind::unspecified)));
  EXPECT_TRUE(f.admit(removed(std::nullopt)));
  EXPECT_EQ(f.learned(), 0u);
}

TEST(GroupFilter, MainKindsAdmittedOthersNot) {
  group_filter f;
  EXPECT_TRUE(f.admit(stored(5, group_kind::main)));
  EXPECT_FALSE(f.admit(stored(1, group_kind::other)));
  EXPECT_TRUE(f.admit(stored(std::nullopt, group_kind::main)));
  EXPECT_FALSE(f.admit(stored(std::nullopt, group_kind::other)));
  EXPECT_EQ(f.kind_of(5), group_kind::main);
  EXPECT_EQ(f.kind_of(1), group_kind::other);
  EXPECT_EQ(f.kind_of(9), group_kind::unspecified);
}

TEST(GroupFilter, GroupWithoutKindNeedsZeroOrLearnedMain) {
  group_filter f;
  EXPECT_TRUE(f.admit(stored(0, group_kind::unspecified)));
  EXPECT_FALSE(f.admit(stored(3, group_kind::unspecified)));
  f.admit(stored(3, group_kind::main));
  EXPECT_TRUE(f.admit(stored(3, group_kind::unspecified)));
  EXPECT_TRUE(f.admit(removed(3)));
}

TEST(GroupFilter, NonMainRemovalsNeverEvict) {
  group_filter f;
  f.admit(stored(0, group_kind::other));  // full attention is not always group 0
  f.admit(stored(5, group_kind::main));
  EXPECT_FALSE(f.admit(removed(0)));
  EXPECT_FALSE(f.admit(stored(0, group_kind::unspecified)));
  EXPECT_TRUE(f.admit(removed(5)));
  EXPECT_FALSE(f.admit(removed(7)));  // never learned, not 0
  EXPECT_TRUE(f.admit(removed(std::nullopt)));
}

// vLLM #51243: Mamba / sliding-window groups keep placeholder offload stores (no tokens,
// block_size 0, their group's index, no kind). Once kinds were stated, group 0 is not presumed.
TEST(GroupFilter, KindlessStoreOfUnlearnedGroupZeroAfterKindsWereStated) {
  group_filter f;
  f.admit(stored(1, group_kind::main));  // full attention is group 1 here
  EXPECT_FALSE(f.admit(stored(0, group_kind::unspecified))) << "a placeholder of group 0";
  EXPECT_TRUE(f.admit(stored(1, group_kind::unspecified))) << "learned main";
  EXPECT_TRUE(f.admit(removed(0))) << "removals keep the old rule (era F engines)";
  group_filter era_f;  // an engine that never states kinds: group 0 is presumed main
  EXPECT_TRUE(era_f.admit(stored(0, group_kind::unspecified)));
}

TEST(GroupFilter, LatestKindWinsAndResetForgets) {
  group_filter f;
  f.admit(stored(2, group_kind::other));
  f.admit(stored(2, group_kind::main));
  EXPECT_EQ(f.kind_of(2), group_kind::main);
  f.reset();
  EXPECT_EQ(f.learned(), 0u);
  EXPECT_FALSE(f.admit(removed(2)));
}

TEST(GroupFilter, LearnedTableIsBounded) {
  group_filter f;
  for (int64_t g = 0; g < static_cast<int64_t>(group_filter::max_groups) + 100; ++g)
    f.admit(stored(g, group_kind::main));
  EXPECT_EQ(f.learned(), group_filter::max_groups);
}

}  // namespace
}  // namespace kvrelay
