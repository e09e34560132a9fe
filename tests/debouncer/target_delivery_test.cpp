// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// One target's delivery driven through its rules (target_delivery.hpp, TD1-TD9).
#include "actors/debouncer/target_delivery.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace kvrelay::debounce {
namespace {

emit_unit_ptr unit(uint64_t id, size_t adds = 1) {
  auto u = std::make_shared<emit_unit>();
  u->id = id;
  for (size_t i = 0; i < adds; ++i) u->adds.push_back(prefix_add{i + 1, 16, tier::t1, ""});
  return u;
}

struct Target : ::testing::Test {
  target_options opts;
  std::optional<target_delivery> t;
  moment now{1'000'000, 5'000'000};
  actions out;

  void SetUp() override {
    opts.credits = 2;
    opts.seed = 7;
    opts.max_lag_bytes = 1 << 20;
  }
  void make(bool live = true) { t.emplace("a:1", 3, opts, live, now, out); }
  std::vector<emit_unit_ptr> sent() {
    std::vector<emit_unit_ptr> v;
    for (auto& a : out)
      if (a.kind == action_kind::send_unit) {
        EXPECT_EQ(a.target, "a:1");
        v.push_back(a.unit);
      }
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const action& a) { return a.kind == action_kind::send_unit; }),
              out.end());
    return v;
  }
  target_delivery::outcome ack(uint64_t id) {
    return t->on_result(emit_result{"a:1", id, true, 0, true, ""}, now, out);
  }
  target_delivery::outcome fail(uint64_t id) {
    return t->on_result(emit_result{"a:1", id, false, 1, true, "UNAVAILABLE"}, now, out);
  }
  void offer(uint64_t id, size_t adds = 1) {
    auto u = unit(id, adds);
    t->offer(u, unit_bytes(*u), now, out);
  }
  // Fires the timer armed last.
  void timer() {
    uint64_t gen = 0;
    for (const auto& a : out)
      if (a.kind == action_kind::arm_resync) gen = a.gen;
    ASSERT_NE(gen, 0u) << "no timer armed";
    out.clear();
    t->on_timer(gen, now, out);
  }
  bool only_clear(const emit_unit& u) const {
    return u.clear && u.adds.empty() && u.evicts.empty() && u.downgrades.empty();
  }
};

TEST_F(Target, UnitsBeyondTheCreditsWaitInOrder) {  // TD1
  make();
  offer(1);
  offer(2);
  offer(3);
  auto s = sent();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]->id, 1u);
  EXPECT_EQ(s[1]->id, 2u);
  EXPECT_EQ(t->queued_units(), 1u);
  EXPECT_FALSE(t->wants_more());
  EXPECT_EQ(ack(1), target_delivery::outcome::ok);
  s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->id, 3u);
  EXPECT_TRUE(t->up());
}

TEST_F(Target, FallingBehindTheLagBoundDropsTheQueueAndResyncs) {  // TD2
  opts.max_lag_bytes = 4096;
  make();
  offer(1);
  offer(2);
  ASSERT_EQ(sent().size(), 2u);  // the server is not answering: the credits stay taken
  for (uint64_t id = 3; id < 40; ++id) offer(id, 8);
  EXPECT_EQ(t->stats().lag_overflows, 1u);
  EXPECT_EQ(t->queued_units(), 0u) << "nothing held for a server that does not keep up";
  EXPECT_TRUE(t->resync_in_progress());
  EXPECT_FALSE(t->live()) << "later units are dropped too until the re-report";
  EXPECT_GT(t->stats().units_superseded, 0u);
  EXPECT_EQ(ack(1), target_delivery::outcome::ok);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(only_clear(*s[0])) << "the probe: ALL_CLEARED alone";
  EXPECT_EQ(ack(2), target_delivery::outcome::ok);
  EXPECT_EQ(ack(s[0]->id), target_delivery::outcome::probe_acked) << "the debouncer re-reports";
  EXPECT_TRUE(t->live());
}

TEST_F(Target, AFailureMakesItUnhealthyAndOnlyProbesGoUntilOneSucceeds) {  // TD3, TD4, TD5
  make();
  offer(1);
  offer(2);
  offer(3);
  sent();
  EXPECT_EQ(fail(1), target_delivery::outcome::failed);
  EXPECT_FALSE(t->healthy());
  EXPECT_FALSE(t->up());
  EXPECT_EQ(t->queued_units(), 0u);
  offer(4);
  EXPECT_TRUE(sent().empty()) << "nothing but the probe while unhealthy";
  EXPECT_EQ(t->stats().units_superseded, 2u);  // 3 queued, 4 offered
  timer();
  auto s = sent();
  ASSERT_EQ(s.size(), 1u) << "unit 2 still holds a credit; the probe takes the other";
  EXPECT_TRUE(only_clear(*s[0]));
  EXPECT_EQ(fail(s[0]->id), target_delivery::outcome::failed);
  EXPECT_EQ(t->stats().probes_failed, 1u);
  timer();
  s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(ack(s[0]->id), target_delivery::outcome::probe_acked);
  EXPECT_TRUE(t->healthy());
  EXPECT_EQ(t->stats().resyncs, 1u);
}

TEST_F(Target, AReconnectWhileUnhealthyProbesAtOnce) {  // TD4
  make();
  offer(1);
  sent();
  fail(1);
  out.clear();
  t->on_reconnected(now, out);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(only_clear(*s[0]));
}

TEST_F(Target, ReconnectsWhileHealthyResyncAtMostOncePerInterval) {  // TD6
  make();
  t->on_reconnected(now, out);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  ack(s[0]->id);
  out.clear();
  now.steady_ms += 1000;
  t->on_reconnected(now, out);
  t->on_reconnected(now, out);
  EXPECT_TRUE(sent().empty()) << "within the interval: deferred";
  EXPECT_EQ(std::count_if(out.begin(), out.end(),
                          [](const action& a) { return a.kind == action_kind::arm_resync; }),
            1);
  EXPECT_EQ(out.back().delay, ms(4000));
  timer();
  s = sent();
  ASSERT_EQ(s.size(), 1u) << "the deferred resync";
  EXPECT_TRUE(only_clear(*s[0]));
}

TEST_F(Target, AJoiningTargetStartsWithAProbe) {  // TD5
  make(false);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(only_clear(*s[0]));
  offer(1);
  EXPECT_TRUE(sent().empty()) << "the re-report after the probe brings it";
  EXPECT_EQ(ack(s[0]->id), target_delivery::outcome::probe_acked);
}

TEST_F(Target, AReplacedEmitterLosesTheUnitsInFlight) {  // TD7
  make();
  offer(1);
  sent();
  t->on_emitter_replaced(now, out);
  EXPECT_FALSE(t->healthy());
  EXPECT_EQ(t->in_flight(), 0u);
  EXPECT_EQ(ack(1), target_delivery::outcome::none) << "from the old emitter";
}

TEST_F(Target, TheFinalClearGoesWhateverTheHealthAndNoProbeAfterIt) {  // TD8
  make();
  offer(1);
  sent();
  fail(1);
  t->drain();
  EXPECT_TRUE(t->drain_failed());
  auto fin = unit(9, 0);
  std::const_pointer_cast<emit_unit>(fin)->clear = true;
  t->offer_final(fin, out);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->id, 9u);
  EXPECT_EQ(ack(9), target_delivery::outcome::final_answered);
  EXPECT_TRUE(t->final_acked());
  out.clear();
  t->on_reconnected(now, out);
  EXPECT_TRUE(sent().empty());
}

TEST_F(Target, TimerGenerationsNameTheirTarget) {
  make();
  offer(1);
  sent();
  fail(1);
  uint64_t gen = 0;
  for (const auto& a : out)
    if (a.kind == action_kind::arm_resync) gen = a.gen;
  EXPECT_EQ(target_delivery::gen_serial(gen), 3u);
  out.clear();
  t->on_timer((uint64_t{4} << 32) | (gen & 0xffffffffu), now, out);
  EXPECT_TRUE(sent().empty()) << "another target's timer";
  t->on_timer(gen, now, out);
  EXPECT_EQ(sent().size(), 1u);
}

TEST_F(Target, ZeroCreditsIsOneUnitWithTheEmitter) {  // TD1
  opts.credits = 0;
  make();
  offer(1);
  offer(2);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u) << "0 is one credit: not none, not two";
  EXPECT_EQ(s[0]->id, 1u);
  EXPECT_EQ(t->queued_units(), 1u);
  ack(1);
  s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->id, 2u);
}

TEST_F(Target, UnitsOfferedWhileNotLiveAreCountedWithTheirEntries) {  // TD1
  make(false);  // the join's probe is out: not live
  offer(1, 3);
  offer(2, 2);
  EXPECT_EQ(sent().size(), 1u) << "the probe only";
  EXPECT_EQ(t->stats().units_superseded, 2u);
  EXPECT_EQ(t->stats().entries_superseded, 5u);
}

TEST_F(Target, EveryLineItLogsNamesTheTarget) {
  make(false);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  fail(s[0]->id);
  size_t lines = 0;
  for (const auto& a : out) {
    if (a.kind != action_kind::log) continue;
    ++lines;
    const auto* v = a.line.find("target");
    ASSERT_NE(v, nullptr) << a.line.message;
    EXPECT_EQ(*v, "a:1") << a.line.message;
  }
  EXPECT_EQ(lines, 2u) << "the join's resync and the outage";
}

TEST_F(Target, ALagOfExactlyTheBoundIsWithinIt) {  // TD2
  const size_t b = unit_bytes(*unit(0));
  opts.credits = 1;
  opts.max_lag_bytes = 3 * b;
  make();
  offer(1);
  ASSERT_EQ(sent().size(), 1u);
  offer(2);
  offer(3);
  offer(4);
  EXPECT_EQ(t->queued_bytes(), 3 * b);
  EXPECT_EQ(t->stats().lag_overflows, 0u) << "the bound is not past it";
  offer(5);
  EXPECT_EQ(t->stats().lag_overflows, 1u);
  EXPECT_EQ(t->queued_units(), 0u);
}

TEST_F(Target, DrainingALagPastTheBoundStillDropsWhatWaits) {  // TD2, TD8
  opts.credits = 1;
  opts.max_lag_bytes = 4096;
  make();
  offer(1);
  ASSERT_EQ(sent().size(), 1u);
  t->drain();
  for (uint64_t id = 2; id < 40; ++id) {
    offer(id, 8);
    ASSERT_LE(t->queued_bytes(), opts.max_lag_bytes) << "unit " << id;
  }
  EXPECT_GT(t->stats().lag_overflows, 0u);
  EXPECT_FALSE(t->resync_in_progress()) << "no resync while draining";
}

emit_unit_ptr final_clear(uint64_t id) {
  auto u = std::make_shared<emit_unit>();
  u->id = id;
  u->clear = true;
  return u;
}

TEST_F(Target, TheFinalClearDropsWhatWaits) {  // TD8
  opts.credits = 1;
  make();
  offer(1);
  offer(2);
  offer(3);
  ASSERT_EQ(sent().size(), 1u);
  t->offer_final(final_clear(9), out);
  EXPECT_EQ(t->queued_units(), 0u);
  EXPECT_EQ(t->queued_bytes(), 0u);
  EXPECT_EQ(t->stats().units_superseded, 2u);
  ack(1);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->id, 9u) << "the clear and nothing else";
}

TEST_F(Target, TheFinalClearCancelsAResyncWaitingForACredit) {  // TD8
  opts.credits = 1;
  make();
  offer(1);
  ASSERT_EQ(sent().size(), 1u);
  t->on_reconnected(now, out);
  ASSERT_TRUE(t->resync_in_progress()) << "its probe waits for the credit";
  t->offer_final(final_clear(9), out);
  EXPECT_FALSE(t->resync_in_progress());
  ack(1);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->id, 9u) << "the clear, not the probe";
}

TEST_F(Target, AFailedFinalClearIsDownCountedAndSaysWhy) {  // TD8, TD9
  make();
  offer(1);
  sent();
  ack(1);
  ASSERT_TRUE(t->up());
  t->drain();
  t->offer_final(final_clear(9), out);
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_EQ(fail(9), target_delivery::outcome::final_answered);
  EXPECT_TRUE(t->final_answered());
  EXPECT_FALSE(t->final_acked());
  EXPECT_FALSE(t->up());
  EXPECT_EQ(t->last_error(), "UNAVAILABLE");
  EXPECT_EQ(t->stats().units_failed, 1u);
}

TEST_F(Target, AnAckedFinalClearIsUpAndNoFailure) {  // TD8, TD9
  make();
  t->drain();
  t->offer_final(final_clear(9), out);
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_FALSE(t->up()) << "nothing answered yet";
  EXPECT_EQ(ack(9), target_delivery::outcome::final_answered);
  EXPECT_TRUE(t->final_acked());
  EXPECT_TRUE(t->up());
  EXPECT_EQ(t->last_error(), "");
  EXPECT_EQ(t->stats().units_failed, 0u);
}

// The delays of the probes of a joining target whose every probe fails (TD4).
std::vector<ms> probe_delays(uint64_t seed) {
  target_options o;
  o.seed = seed;
  moment now{1'000'000, 5'000'000};
  actions out;
  target_delivery t("a:1", 1, o, false, now, out);  // joins with a probe (TD5)
  std::vector<ms> delays;
  for (int i = 0; i < 6; ++i) {
    uint64_t probe = 0;
    for (const auto& a : out)
      if (a.kind == action_kind::send_unit) probe = a.unit->id;
    EXPECT_NE(probe, 0u) << "probe " << i;
    out.clear();
    t.on_result(emit_result{"a:1", probe, false, 1, true, "UNAVAILABLE"}, now, out);
    uint64_t gen = 0;
    for (const auto& a : out)
      if (a.kind == action_kind::arm_resync) {
        gen = a.gen;
        delays.push_back(a.delay);
      }
    out.clear();
    t.on_timer(gen, now, out);
  }
  return delays;
}

TEST_F(Target, ASeedRepeatsTheProbeJitterAndSeedZeroIsRandom) {  // TD4
  const auto a = probe_delays(7);
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a, probe_delays(7)) << "the same seed, the same delays";
  // Seed 0 draws a random seed: six delays picked from 251, 501, 1001, 2001, 4001 and 8001 values
  // all match by chance with a probability below 1e-18.
  EXPECT_NE(probe_delays(0), probe_delays(0));
}

}  // namespace
}  // namespace kvrelay::debounce
