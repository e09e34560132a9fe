// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The replay ring's span as learnt from the engine's replies (actors/ingress/ring_span.hpp
// RS1-RS6).

#include "actors/ingress/ring_span.hpp"

#include <gtest/gtest.h>

namespace kvrelay::ingress {
namespace {

constexpr uint64_t sec = 1'000'000'000;

// A reply from `first` to `last` to a request asked from `asked`, ended (END) or cut short.
void reply(ring_span& r, uint64_t asked, uint64_t first, uint64_t last, bool complete = true) {
  r.on_request(asked);
  for (uint64_t s = first; s <= last; ++s) r.on_reply(s);
  r.on_reply_end(complete);
}

// RS1: a whole reply that starts later than asked is a full ring: its length is the capacity.
// The first seq it holds then follows the newest seq.
TEST(RingSpan, AWholeReplyLaterThanAskedIsTheExactCapacity) {
  ring_span r;
  reply(r, 0, 450, 499);  // a 50-batch ring, read at cold start
  auto e = r.estimate();
  EXPECT_TRUE(e.exact);
  EXPECT_EQ(e.capacity, 50u);
  EXPECT_EQ(e.first_seq, 450u);
  r.on_live(500, 5 * sec);
  EXPECT_EQ(r.estimate().first_seq, 451u) << "the ring moves with the newest seq";
}

// RS1: a reply from the seq asked, or one cut short (the engine's queue dropped its tail), is a
// lower bound; the exact capacity, once learnt, is not lowered by a later reply.
TEST(RingSpan, AReplyFromTheSeqAskedOrCutShortIsALowerBound) {
  ring_span r;
  reply(r, 0, 0, 29);
  auto e = r.estimate();
  EXPECT_FALSE(e.exact);
  EXPECT_EQ(e.capacity, 30u);
  EXPECT_FALSE(e.first_seq);
  reply(r, 0, 5000, 5999, /*complete=*/false);  // a 10 000-entry ring, cut at 1 000 replies
  EXPECT_FALSE(r.estimate().exact);
  EXPECT_EQ(r.estimate().capacity, 1000u);
  reply(r, 100, 140, 189);
  EXPECT_TRUE(r.estimate().exact);
  EXPECT_EQ(r.estimate().capacity, 50u);
  reply(r, 180, 180, 189);
  EXPECT_EQ(r.estimate().capacity, 50u) << "a later request within the ring says nothing new";
}

// RS2: ATOM's END with the ring's span.
TEST(RingSpan, AnEndWithTheRingsSpan) {
  ring_span r;
  r.on_span(0, 99);
  EXPECT_FALSE(r.estimate().exact);
  EXPECT_EQ(r.estimate().capacity, 100u);
  r.on_span(40, 139);
  EXPECT_TRUE(r.estimate().exact);
  EXPECT_EQ(r.estimate().capacity, 100u);
  EXPECT_EQ(r.estimate().first_seq, 40u);
}

// RS3: a new engine process forgets the capacity.
TEST(RingSpan, AResetForgetsTheCapacity) {
  ring_span r;
  reply(r, 10, 60, 99);
  ASSERT_TRUE(r.estimate().exact);
  r.on_reset();
  EXPECT_FALSE(r.estimate().exact);
  EXPECT_EQ(r.estimate().capacity, 0u);
}

// RS4, RS5: the rate over windows of a second, smoothed; the span in seconds.
TEST(RingSpan, TheRateIsMeasuredOverWholeSecondsAndGivesTheSpanInSeconds) {
  ring_span r;
  uint64_t seq = 0;
  for (uint64_t t = 0; t <= 3 * sec; t += sec / 200) r.on_live(seq++, t);  // 200 batches/s
  auto e = r.estimate();
  EXPECT_NEAR(e.batches_per_second, 200.0, 1.0);
  reply(r, 0, seq - 50, seq - 1);
  e = r.estimate();
  EXPECT_EQ(e.capacity, 50u);
  EXPECT_NEAR(e.seconds(), 0.25, 0.01);
  ring_span idle;
  idle.on_live(0, 0);
  idle.on_live(1, sec / 2);
  EXPECT_EQ(idle.estimate().batches_per_second, 0) << "no window closed yet";
}

// RS6: the capacity used for the interval.
TEST(RingSpan, TheSpanUsedIsTheLearntOneElseTheConfiguredOne) {
  ring_estimate e;
  EXPECT_EQ(e.used(10000), 10000u) << "nothing learnt: the configured size";
  e.capacity = 20000;
  EXPECT_EQ(e.used(10000), 20000u) << "a lower bound above it";
  e.capacity = 50;
  EXPECT_EQ(e.used(10000), 10000u) << "a lower bound below it says nothing";
  e.exact = true;
  EXPECT_EQ(e.used(10000), 50u) << "exact: the engine's, whatever was configured";
}

// The gauge carries an estimate across threads.
TEST(RingSpan, TheGaugeCarriesTheEstimate) {
  ring_span r;
  r.on_live(1000, 0);
  r.on_live(1200, sec);
  reply(r, 0, 1151, 1200);
  ring_gauge g;
  g.publish(r.estimate());
  const auto e = g.load();
  EXPECT_TRUE(e.exact);
  EXPECT_EQ(e.capacity, 50u);
  EXPECT_EQ(e.first_seq, 1151u);
  EXPECT_NEAR(e.batches_per_second, 200.0, 0.01);
}

}  // namespace
}  // namespace kvrelay::ingress
