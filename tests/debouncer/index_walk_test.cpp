// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// One walk of the index (actors/debouncer/index_walk.hpp, IW1-IW5), driven directly.
#include "actors/debouncer/index_walk.hpp"

#include <gtest/gtest.h>

namespace kvrelay::debounce {
namespace {

TEST(IndexWalk, IW1_RanksInOrderEachFromTheStart) {
  index_walk w(walk_kind::resync, {0, 3}, 0);
  ASSERT_EQ(w.rank(), 0u);
  auto a = w.ask(1, 10);
  EXPECT_EQ(a.rank, 0u);
  EXPECT_EQ(a.partition, 0u);
  EXPECT_EQ(a.key, 0u);
  EXPECT_EQ(a.max, 10u);
  ASSERT_TRUE(w.answered(1, 2, 77, false, 10, 100));
  a = w.ask(2, 10);
  EXPECT_EQ(a.partition, 2u);
  EXPECT_EQ(a.key, 77u) << "the cursor the shard gave";
  ASSERT_TRUE(w.answered(2, 0, 0, true, 4, 100));
  ASSERT_EQ(w.rank(), 3u);
  a = w.ask(3, 10);
  EXPECT_EQ(a.rank, 3u);
  EXPECT_EQ(a.partition, 0u);
  EXPECT_EQ(a.key, 0u) << "the next rank from its start";
  ASSERT_TRUE(w.answered(3, 0, 0, true, 0, 5));
  EXPECT_TRUE(w.done());
  EXPECT_EQ(w.blocks_sent(), 14u);
  EXPECT_EQ(w.resident(), 105u);
}

TEST(IndexWalk, IW2_OneRequestAtATimeAndOnlyItsAnswerCounts) {
  index_walk w(walk_kind::resync, {0}, 0);
  EXPECT_FALSE(w.waiting());
  w.ask(5, 10);
  EXPECT_TRUE(w.waiting());
  EXPECT_FALSE(w.answered(4, 9, 9, false, 10, 10)) << "an older request's answer";
  EXPECT_FALSE(w.partial(4, 10));
  EXPECT_TRUE(w.waiting());
  EXPECT_TRUE(w.partial(5, 3));
  EXPECT_TRUE(w.waiting()) << "part of the answer";
  EXPECT_TRUE(w.answered(5, 0, 40, false, 7, 10));
  EXPECT_FALSE(w.waiting());
  EXPECT_EQ(w.blocks_sent(), 10u);
  EXPECT_FALSE(w.answered(5, 0, 99, false, 1, 10)) << "answered once";
  EXPECT_EQ(w.ask(6, 10).key, 40u);
}

TEST(IndexWalk, IW3_ARestartedRankIsAskedAgainAClearedOneIsDone) {
  index_walk w(walk_kind::resync, {0, 1}, 0);
  w.ask(1, 10);
  w.answered(1, 1, 50, false, 10, 100);
  w.ask(2, 10);
  w.rank_restarted(1);  // another rank: nothing changes
  EXPECT_TRUE(w.waiting());
  w.rank_restarted(0);
  EXPECT_FALSE(w.waiting()) << "the request went to a data path that is gone";
  auto a = w.ask(3, 10);
  EXPECT_EQ(a.partition, 1u);
  EXPECT_EQ(a.key, 50u) << "asked again at the same cursor";
  EXPECT_FALSE(w.answered(2, 0, 0, true, 0, 0)) << "the old request's late answer";
  w.rank_cleared(1);  // not the cursor's rank: nothing yet
  EXPECT_EQ(w.rank(), 0u);
  w.rank_cleared(0);
  EXPECT_EQ(w.rank(), 1u) << "after a clear every block is a live add";
  EXPECT_FALSE(w.waiting());
  w.ask(4, 10);
  w.rank_cleared(1);
  EXPECT_TRUE(w.done());
}

TEST(IndexWalk, IW4_RestartGoesBackToTheFirstRank) {
  index_walk w(walk_kind::catchup, {0, 1}, 0);
  w.ask(1, 10);
  w.answered(1, 0, 0, true, 10, 100);
  w.ask(2, 10);
  w.restart(walk_kind::resync, 500);
  EXPECT_EQ(w.kind(), walk_kind::resync);
  EXPECT_FALSE(w.waiting());
  EXPECT_EQ(w.rank(), 0u);
  EXPECT_EQ(w.blocks_sent(), 0u);
  EXPECT_EQ(w.started_ms(), 500);
  EXPECT_FALSE(w.answered(2, 0, 0, true, 0, 0));
}

TEST(IndexWalk, IW5_ARefreshIsPacedOverItsIntervalOtherWalksAreNot) {
  index_walk r(walk_kind::refresh, {0}, 1000, 100'000);
  EXPECT_EQ(r.allowance(1000, 500), 1u) << "one block to learn how many there are";
  r.ask(1, 1);
  r.answered(1, 0, 10, false, 1, 10'000);
  EXPECT_EQ(r.allowance(1000, 500), 0u);
  EXPECT_EQ(r.allowance(11'000, 500), 500u) << "a tenth of the interval: a tenth is due, capped";
  EXPECT_EQ(r.allowance(1000 + 2'000, 5000), 199u) << "2 % of 10 000, less the 1 sent";
  index_walk c(walk_kind::catchup, {0}, 1000, 100'000);
  EXPECT_EQ(c.allowance(1000, 500), 500u) << "credits pace it, not time";
}

// IW5: each rank is asked one block before its count is known. A small rank ahead of a large one
// would otherwise pace the whole pass by the small one's count (its one block is the whole
// share for an interval, and the large rank waits).
TEST(IndexWalk, IW5_EachRankIsAskedOneBlockToLearnItsCount) {
  index_walk r(walk_kind::refresh, {0, 1}, 1000, 100'000);
  EXPECT_TRUE(r.learning());
  r.ask(1, 1);
  r.answered(1, 0, 0, true, 1, 1);  // rank 0 holds one block: done
  EXPECT_TRUE(r.learning()) << "rank 1 has not said";
  EXPECT_EQ(r.allowance(1000, 500), 1u) << "not 0: the one block sent is not the whole share";
  r.ask(2, 1);
  r.answered(2, 0, 7, false, 1, 100'000);
  EXPECT_FALSE(r.learning());
  EXPECT_EQ(r.resident(), 100'001u);
  EXPECT_EQ(r.allowance(1000 + 1'000, 5000), 998u) << "1 % of 100 001, less the 2 sent";
}

}  // namespace
}  // namespace kvrelay::debounce
