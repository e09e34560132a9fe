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
  // One credit: unit 1 with the emitter, units 2 and 3 waiting.
  void one_out_two_waiting() {
    opts.credits = 1;
    make();
    offer(1);
    offer(2);
    offer(3);
    ASSERT_EQ(sent().size(), 1u);
  }
  // A healthy target that has just resynced (its probe answered).
  void resynced() {
    make();
    t->on_reconnected(now, out);
    auto s = sent();
    ASSERT_EQ(s.size(), 1u);
    ack(s[0]->id);
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
  EXPECT_EQ(t->stats().units_sent, 3u);
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
  EXPECT_EQ(t->last_error(), "UNAVAILABLE");
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
  EXPECT_EQ(s[0]->clear_ts_us, now.wall_us) << "the ALL_CLEARED is stamped when it goes";
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
  EXPECT_EQ(t->stats().units_failed, 1u);
  EXPECT_EQ(t->stats().probes_failed, 0u) << "no probe was out";
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
  ASSERT_NO_FATAL_FAILURE(one_out_two_waiting());
  t->offer_final(final_clear(9), out);
  EXPECT_EQ(t->queued_units(), 0u);
  EXPECT_EQ(t->queued_bytes(), 0u);
  EXPECT_EQ(t->stats().units_superseded, 2u);
  EXPECT_EQ(t->stats().entries_superseded, 2u);
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


// -- each rule's edges (found by scripts/mutate.sh) ------------------------------------------------

// The one probe sent now, if any.
emit_unit_ptr the_probe(std::vector<emit_unit_ptr> s) {
  if (s.size() != 1 || !s[0]->clear || !s[0]->adds.empty()) return nullptr;
  return s[0];
}
std::vector<const log::record*> lines_with(const actions& out, const std::string& text) {
  std::vector<const log::record*> v;
  for (const auto& a : out)
    if (a.kind == action_kind::log && a.line.message.find(text) != std::string::npos)
      v.push_back(&a.line);
  return v;
}
std::optional<ms> last_delay(const actions& out) {
  std::optional<ms> d;
  for (const auto& a : out)
    if (a.kind == action_kind::arm_resync) d = a.delay;
  return d;
}

// TD3, TD6: a resync's probe waiting for a credit takes the one a failed unit frees.
TEST_F(Target, AFailureDuringAResyncSendsItsWaitingProbeAtOnce) {
  make();
  offer(1);
  offer(2);
  ASSERT_EQ(sent().size(), 2u);
  t->on_reconnected(now, out);
  ASSERT_TRUE(sent().empty()) << "the probe waits for a credit";
  fail(1);
  EXPECT_TRUE(the_probe(sent()));
}

// TD5: "reachable again" is said after an outage only, with how long it lasted.
TEST_F(Target, OnlyARecoveryFromAnOutageSaysTheTargetIsReachableAgain) {
  make();
  t->on_reconnected(now, out);
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  out.clear();
  ack(p->id);
  EXPECT_TRUE(lines_with(out, "reachable again").empty()) << "a resync while healthy";
  offer(1);
  sent();
  fail(1);
  timer();
  p = the_probe(sent());
  ASSERT_TRUE(p);
  now.steady_ms += 7000;
  out.clear();
  ack(p->id);
  const auto l = lines_with(out, "reachable again");
  ASSERT_EQ(l.size(), 1u);
  ASSERT_NE(l[0]->find("outage_s"), nullptr);
  EXPECT_EQ(*l[0]->find("outage_s"), "7");
}

// TD4: a recovery resets the backoff: the next outage's first probe waits the initial delay.
TEST_F(Target, ARecoveryStartsTheNextOutagesBackoffFromTheStart) {
  make();
  offer(1);
  sent();
  fail(1);
  for (int i = 0; i < 3; ++i) {  // three probes fail: the backoff is at 4 s
    timer();
    auto p = the_probe(sent());
    ASSERT_TRUE(p);
    fail(p->id);
  }
  timer();
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  ack(p->id);
  offer(2);
  sent();
  out.clear();
  fail(2);
  ASSERT_TRUE(last_delay(out));
  EXPECT_LE(*last_delay(out), opts.backoff_initial);
}

// TD6: the interval runs from when the resync's probe was answered, not from when it was asked.
TEST_F(Target, AResyncCountsFromWhenItsProbeWasAnswered) {
  make();
  t->on_reconnected(now, out);
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  now.steady_ms += 4000;
  ack(p->id);
  now.steady_ms += 2000;  // 6 s after it was asked, 2 s after it was answered
  out.clear();
  t->on_reconnected(now, out);
  EXPECT_TRUE(sent().empty()) << "deferred";
  EXPECT_EQ(last_delay(out), ms(3000));
}

// TD6: a reconnect while a resync is out waits the rest of the interval from its start, and at
// least a millisecond when the resync outlasted the interval.
TEST_F(Target, AReconnectDuringAResyncWaitsTheRestOfTheIntervalFromItsStart) {
  for (const auto& [after, wait] : {std::pair{1500, 3500}, std::pair{9000, 1}}) {
    make();
    t->on_reconnected(now, out);
    ASSERT_TRUE(the_probe(sent()));
    now.steady_ms += after;
    out.clear();
    t->on_reconnected(now, out);
    EXPECT_EQ(last_delay(out), ms(wait)) << after << " ms into the resync";
  }
}

// TD6: exactly one interval after the last resync is outside it: resync at once.
TEST_F(Target, AReconnectExactlyAnIntervalAfterAResyncResyncsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(resynced());
  now.steady_ms += opts.reconnect_resync_interval.count();
  out.clear();
  t->on_reconnected(now, out);
  EXPECT_TRUE(the_probe(sent()));
}

// A timer the target armed before its current one is stale, like another target's.
TEST_F(Target, AnEarlierTimerOfTheSameTargetDoesNothing) {
  make();
  offer(1);
  sent();
  fail(1);
  const auto first = out.back().gen;
  ASSERT_EQ(out.back().kind, action_kind::arm_resync);
  timer();
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  fail(p->id);  // arms the next
  out.clear();
  t->on_timer(first, now, out);
  EXPECT_TRUE(sent().empty());
}

// TD6: a deferred resync, once fired, can be deferred again by a later reconnect.
TEST_F(Target, AFiredDeferredResyncCanBeDeferredAgain) {
  ASSERT_NO_FATAL_FAILURE(resynced());
  now.steady_ms += 1000;
  out.clear();
  t->on_reconnected(now, out);
  ASSERT_TRUE(last_delay(out));
  timer();
  auto p = the_probe(sent());
  ASSERT_TRUE(p) << "the deferred resync";
  ack(p->id);
  now.steady_ms += 1000;
  out.clear();
  t->on_reconnected(now, out);
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(last_delay(out), ms(4000)) << "deferred again";
}

// TD3, TD4: while a probe is out, neither the backoff timer nor a reconnect asks for another;
// when it fails, the next waits for the backoff.
TEST_F(Target, ATimerWhileAProbeIsOutAsksForNoSecondProbe) {
  make();
  offer(1);
  sent();
  t->on_reconnected(now, out);
  auto p = the_probe(sent());
  ASSERT_TRUE(p) << "the resync's probe takes the second credit";
  fail(1);  // unhealthy, the probe still out: the backoff is armed
  timer();
  EXPECT_TRUE(sent().empty());
  out.clear();
  fail(p->id);
  EXPECT_TRUE(sent().empty()) << "the next probe waits for the backoff";
  EXPECT_TRUE(last_delay(out));
}
TEST_F(Target, AReconnectWhileAProbeIsOutAsksForNoSecondProbe) {
  make();
  offer(1);
  sent();
  fail(1);
  timer();
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  t->on_reconnected(now, out);
  EXPECT_TRUE(sent().empty());
  out.clear();
  fail(p->id);
  EXPECT_TRUE(sent().empty()) << "the next probe waits for the backoff";
}

// TD4: a failure replaces a deferred resync: the timer then sends the probe.
TEST_F(Target, AFailureReplacesADeferredResyncWithTheProbesBackoff) {
  ASSERT_NO_FATAL_FAILURE(resynced());
  now.steady_ms += 1000;
  t->on_reconnected(now, out);  // deferred
  offer(1);
  ASSERT_EQ(sent().size(), 1u);
  fail(1);
  timer();
  EXPECT_TRUE(the_probe(sent())) << "the outage's probe, not the deferred resync";
}

// TD7: a probe lost with a replaced emitter is a failed probe: the next goes after the backoff.
TEST_F(Target, AReplacedEmitterWithAProbeOutProbesAgainAfterTheBackoff) {
  make();
  offer(1);
  sent();
  fail(1);
  timer();
  ASSERT_TRUE(the_probe(sent()));
  out.clear();
  t->on_emitter_replaced(now, out);
  EXPECT_EQ(t->stats().probes_failed, 1u);
  timer();
  EXPECT_TRUE(the_probe(sent()));
}

// TD7: units lost with a replaced emitter during an outage are not a failed probe.
TEST_F(Target, AReplacedEmitterWithOnlyUnitsOutFailsNoProbe) {
  make();
  offer(1);
  offer(2);
  sent();
  fail(1);  // the outage; 2 still out
  out.clear();
  t->on_emitter_replaced(now, out);
  EXPECT_EQ(t->stats().probes_failed, 0u);
  EXPECT_FALSE(last_delay(out)) << "the outage's backoff is already armed";
}

// TD7, TD8: the final clear lost with a replaced emitter goes to the new one at once.
TEST_F(Target, AFinalClearInFlightGoesAgainToTheNewEmitter) {
  make();
  t->drain();
  t->offer_final(final_clear(9), out);
  ASSERT_EQ(sent().size(), 1u);
  t->on_emitter_replaced(now, out);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->id, 9u);
}

// TD8: a final clear waiting for the credit a probe holds goes when the probe is answered.
TEST_F(Target, AFinalClearWaitingBehindAProbeGoesWhenTheProbeIsAnswered) {
  opts.credits = 1;
  make(false);  // the join's probe takes the one credit
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  t->drain();
  t->offer_final(final_clear(9), out);
  ASSERT_TRUE(sent().empty());
  EXPECT_EQ(ack(p->id), target_delivery::outcome::probe_acked);
  auto s = sent();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]->id, 9u);
}

// TD8: the final clear goes once, whatever answers come after it.
TEST_F(Target, TheFinalClearGoesOnce) {
  make();
  offer(1);
  ASSERT_EQ(sent().size(), 1u);
  t->drain();
  t->offer_final(final_clear(9), out);
  ASSERT_EQ(sent().size(), 1u);
  ack(1);
  EXPECT_TRUE(sent().empty());
}

// TD6: a resync drops what waits (the re-report supersedes it).
TEST_F(Target, AResyncDropsWhatWaits) {
  ASSERT_NO_FATAL_FAILURE(one_out_two_waiting());
  t->on_reconnected(now, out);
  EXPECT_EQ(t->queued_units(), 0u);
  EXPECT_EQ(t->stats().units_superseded, 2u);
}

// TD8: a drain cancels a resync whose probe waits for a credit.
TEST_F(Target, ADrainCancelsAProbeWaitingForACredit) {
  opts.credits = 1;
  make();
  offer(1);
  ASSERT_EQ(sent().size(), 1u);
  t->on_reconnected(now, out);
  ASSERT_TRUE(t->resync_in_progress());
  t->drain();
  ack(1);
  EXPECT_TRUE(sent().empty());
}

// TD8: a failure while draining drops what waits: nothing more will reach that server.
TEST_F(Target, AFailureWhileDrainingDropsWhatWaits) {
  ASSERT_NO_FATAL_FAILURE(one_out_two_waiting());
  t->drain();
  fail(1);
  EXPECT_TRUE(t->drain_failed());
  EXPECT_EQ(t->queued_units(), 0u);
  EXPECT_TRUE(sent().empty());
}

// TD3: "still unreachable" summarises the failures since the outage began or since it last
// spoke; a new outage counts afresh.
TEST_F(Target, TheOutageSummaryCountsTheFailuresSinceItLastSpoke) {
  make();
  offer(1);
  offer(2);
  sent();
  fail(1);  // the outage begins
  fail(2);  // one failure since
  timer();
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  out.clear();
  fail(p->id);  // and the probe
  auto l = lines_with(out, "still unreachable");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(*l[0]->find("units_failed"), "2");
  now.steady_ms += 60'000;
  timer();
  p = the_probe(sent());
  ASSERT_TRUE(p);
  out.clear();
  fail(p->id);
  l = lines_with(out, "still unreachable");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(*l[0]->find("units_failed"), "1") << "since it last spoke";
}
TEST_F(Target, ANewOutageCountsItsFailuresAfresh) {
  make();
  offer(1);
  offer(2);
  sent();
  fail(1);
  fail(2);  // counted, never said: no probe failed in this outage
  timer();
  auto p = the_probe(sent());
  ASSERT_TRUE(p);
  ack(p->id);
  offer(3);
  sent();
  fail(3);  // a new outage
  timer();
  p = the_probe(sent());
  ASSERT_TRUE(p);
  out.clear();
  fail(p->id);
  const auto l = lines_with(out, "still unreachable");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(*l[0]->find("units_failed"), "1");
}

}  // namespace
}  // namespace kvrelay::debounce
