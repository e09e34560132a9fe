// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The debouncer's protocol driven directly through its rules (debouncer_protocol.hpp): windows,
// credits, epochs, outage and resync, reconnects, never-sent pairs, merged DP ranks, drains.
#include "actors/debouncer/debouncer_protocol.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvrelay::debounce {
namespace {

prefix_op up(uint64_t fp, bool introduces = false, tier t = tier::t1) {
  prefix_op o{prefix_op::kind::upsert, fp, 16, t};
  o.introduces = introduces;
  return o;
}
prefix_op ev(uint64_t fp) { return prefix_op{prefix_op::kind::evict, fp, 16, tier::t1}; }

shard_ops batch(std::vector<prefix_op> v, uint64_t epoch = 1, int64_t ts_us = 1000) {
  shard_ops o;
  o.epoch = epoch;
  o.ts_us = ts_us;
  o.had_store = true;
  o.ops = std::move(v);
  return o;
}

struct Protocol : ::testing::Test {
  options opts;
  std::optional<protocol> p;
  moment t{1'000'000, 5'000'000};
  actions out;

  void SetUp() override {
    opts.refresh_interval = ms(0);
    opts.seed = 42;
    opts.shutdown_clear = false;
  }
  // Starts with an emitter and a decoder for each rank given; forgets the start's actions.
  void start(std::vector<uint32_t> ranks = {0}) {
    p.emplace(opts);
    p->start(t, out);
    p->on_emitter(t, out);
    p->on_targets({"a"}, t, out);
    for (auto r : ranks) p->on_decoder(r, t, out);
    if (opts.start_with_clear) {
      auto u = take_units();
      EXPECT_EQ(u.size(), 1u);
      if (!u.empty()) ack(u[0]->id);
    }
    out.clear();
  }
  std::vector<action> of(action_kind k) const {
    std::vector<action> v;
    for (const auto& a : out)
      if (a.kind == k) v.push_back(a);
    return v;
  }
  // The units sent since the last call.
  std::vector<emit_unit_ptr> take_units() {
    std::vector<emit_unit_ptr> v;
    for (auto& a : out)
      if (a.kind == action_kind::send_unit) v.push_back(a.unit);
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const action& a) { return a.kind == action_kind::send_unit; }),
              out.end());
    return v;
  }
  void ack(uint64_t id) { p->on_result(emit_result{"a", id, true, 0, true, ""}, t, out); }
  void fail(uint64_t id) { p->on_result(emit_result{"a", id, false, 1, true, "UNAVAILABLE"}, t, out); }
  void ops(std::vector<prefix_op> v, uint32_t rank = 0, uint64_t epoch = 1) {
    p->on_ops(rank, batch(std::move(v), epoch), t, out);
  }
  // Fires the flush timer the protocol armed last.
  void window() {
    auto arms = of(action_kind::arm_flush);
    ASSERT_FALSE(arms.empty()) << "no window armed";
    t.steady_ms += arms.back().delay.count();
    p->on_flush_timer(arms.back().gen, t, out);
  }
  uint64_t resync_timer() {
    auto arms = of(action_kind::arm_resync);
    EXPECT_FALSE(arms.empty()) << "no resync timer armed";
    if (arms.empty()) return 0;
    t.steady_ms += arms.back().delay.count();
    p->on_resync_timer(arms.back().gen, t, out);
    return static_cast<uint64_t>(arms.back().delay.count());
  }
  bool only_clear(const emit_unit& u) {
    return u.clear && u.adds.empty() && u.evicts.empty() && u.downgrades.empty();
  }
  std::vector<uint64_t> fps_added(const emit_unit& u) {
    std::vector<uint64_t> v;
    for (const auto& a : u.adds) v.push_back(a.fingerprint);
    std::sort(v.begin(), v.end());
    return v;
  }
  std::vector<uint64_t> fps_evicted(const emit_unit& u) {
    std::vector<uint64_t> v;
    for (const auto& e : u.evicts) v.push_back(e.fingerprint);
    std::sort(v.begin(), v.end());
    return v;
  }
};

// ---- flushing ----------------------------------------------------------------------------------

TEST_F(Protocol, StartClearGoesAtOnceAndAskForReconnectNotices) {  // DB14
  p.emplace(opts);
  p->start(t, out);
  EXPECT_TRUE(take_units().empty()) << "no emitter yet (DB4)";
  p->on_emitter(t, out);
  p->on_targets({"a"}, t, out);
  EXPECT_EQ(of(action_kind::listen).size(), 1u);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(only_clear(*u[0]));
  EXPECT_EQ(u[0]->clear_ts_us, t.wall_us);
}

TEST_F(Protocol, AddsWaitForTheWindowEvictionsDoNot) {  // DB2
  start();
  ops({up(1), up(2)});
  EXPECT_TRUE(take_units().empty());
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1, 2}));
  ack(u[0]->id);
  ops({ev(1)});
  u = take_units();
  ASSERT_EQ(u.size(), 1u) << "an eviction never waits for the window";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{1});
}

TEST_F(Protocol, ThresholdFlushesWithoutTheWindow) {  // DB2
  opts.flush_threshold = 3;
  start();
  ops({up(1), up(2)});
  EXPECT_TRUE(take_units().empty());
  ops({up(3)});
  EXPECT_EQ(take_units().size(), 1u);
}

TEST_F(Protocol, CreditExhaustionCoalescesUntilAnAnswer) {  // DB3
  start();
  ops({ev(1)});
  ops({ev(2)});
  auto u = take_units();
  ASSERT_EQ(u.size(), 2u) << "two credits";
  ops({ev(3)});
  ops({up(4)});
  ops({ev(4)});  // final state of 4: evicted
  ops({ev(5)});
  EXPECT_TRUE(take_units().empty()) << "no credit left";
  EXPECT_EQ(p->units_in_flight(), 2u);
  ack(u[0]->id);
  auto next = take_units();
  ASSERT_EQ(next.size(), 1u) << "the due flush goes at the next answer";
  EXPECT_EQ(fps_evicted(*next[0]), (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_TRUE(next[0]->adds.empty());
}

TEST_F(Protocol, UnitsAreCappedAndTheRestFollows) {  // DB3
  opts.max_adds_per_unit = 2;
  opts.flush_threshold = 100;
  start();
  ops({up(1), up(2), up(3)});
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0]->adds.size(), 2u);
  window();
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0]->adds.size(), 1u);
}

TEST_F(Protocol, L2ModeFlushesAddsBeforeTheirDowngrade) {  // DB2, L08
  opts.l2_mode = true;
  start();
  ops({up(1)});
  ops({ev(1)});
  auto u = take_units();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(fps_added(*u[0]), std::vector<uint64_t>{1});
  ASSERT_EQ(u[1]->downgrades.size(), 1u);
  EXPECT_EQ(u[1]->downgrades[0].entries[0].t, tier::t2);
}

// ---- epochs and clears -------------------------------------------------------------------------

TEST_F(Protocol, ClearDuringAUnitInFlightHeadsTheNextUnit) {  // DB14
  start();
  ops({up(1)});
  window();
  auto first = take_units();
  ASSERT_EQ(first.size(), 1u);
  ops({up(2)});
  p->on_clear(0, 2, 777, t, out);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u) << "the clear goes at once, behind the unit in flight";
  EXPECT_TRUE(only_clear(*u[0])) << "what was pending before the clear is superseded";
  EXPECT_EQ(u[0]->clear_ts_us, 777);
  ops({up(3)}, 0, 1);
  EXPECT_EQ(p->stats().stale_ops, 1u) << "an op from before the clear never follows it";
}

TEST_F(Protocol, EpochBumpMidBatchClearsFirst) {  // DB1
  start();
  ops({up(1)});
  ops({up(2), ev(9)}, 0, 3);  // the clear notice of epoch 3 is behind this batch
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear);
  EXPECT_EQ(fps_added(*u[0]), std::vector<uint64_t>{2}) << "1 was before the clear";
  EXPECT_EQ(p->epoch(), 3u);
  p->on_clear(0, 3, 0, t, out);
  EXPECT_TRUE(take_units().empty()) << "the late notice changes nothing";
}

// ---- never send what the server never saw ------------------------------------------------------

TEST_F(Protocol, AnIntroducedAddAndItsEvictionAreBothDropped) {  // DB5
  start();
  ops({up(1, true), up(2, true), up(3)});
  ops({ev(1), ev(3)});
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_added(*u[0]), std::vector<uint64_t>{2});
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{3}) << "3 may be on the server";
  EXPECT_EQ(p->pending().drops().unsent_pairs, 1u);
  ack(u[0]->id);
  ops({ev(2)});
  u = take_units();
  ASSERT_EQ(u.size(), 1u) << "2's add went out: its eviction must follow";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{2});
}

TEST_F(Protocol, AnAddOverAPendingEvictionIsNeverDropped) {  // DB5
  start();
  ops({up(8)});
  window();
  ack(take_units()[0]->id);  // the server holds 8
  ops({ev(100)});
  ops({ev(101)});
  auto busy = take_units();
  ASSERT_EQ(busy.size(), 2u);  // both credits taken
  ops({ev(8)});                // pending: evict 8
  ops({up(8, true)});          // re-stored: new to the partition, but the server still has 8
  ops({ev(8)});                // evicted again before anything went out
  ack(busy[0]->id);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{8}) << "the first eviction still goes";
  EXPECT_EQ(p->pending().drops().unsent_pairs, 0u);
}

TEST_F(Protocol, AfterAResyncEvictionsOfKeysNotReReportedAreDropped) {  // DB6, DB9
  start();
  p->on_reconnected("a", t, out);
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ack(probe[0]->id);
  auto reports = of(action_kind::report);
  ASSERT_EQ(reports.size(), 1u);
  ASSERT_NE(reports[0].gen, 0u) << "a barrier ends the window";
  EXPECT_TRUE(p->reporting());
  ops({ev(1)});  // evicted before its re-report: the server cannot hold it
  shard_ops rr = batch({up(2), up(3)});
  rr.resync = true;
  p->on_ops(0, rr, t, out);
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->evicts.empty());
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{2, 3}));
  ack(u[0]->id);
  ops({ev(2)});
  u = take_units();
  ASSERT_EQ(u.size(), 1u) << "2 was re-reported";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{2});
  ack(u[0]->id);
  EXPECT_EQ(p->pending().drops().unreported, 1u);
  p->on_reported(0, reports[0].gen, t, out);
  EXPECT_FALSE(p->reporting());
  EXPECT_EQ(p->pending().tracked(), 0u) << "tracking memory released";
  ops({ev(50)});
  EXPECT_EQ(take_units().size(), 1u) << "after the window, evictions go as before";
}

// ---- outage, resync, reconnect -----------------------------------------------------------------

TEST_F(Protocol, DuringAnOutageOnlyTheProbeGoesOutAndRecoveryClearsFirst) {  // TD3-TD5, DB9
  start();
  ops({up(1)});
  window();
  auto u = take_units();
  fail(u[0]->id);
  EXPECT_FALSE(p->healthy());
  ASSERT_EQ(of(action_kind::health).size(), 1u);
  EXPECT_FALSE(of(action_kind::health)[0].ok);
  ops({up(2), ev(3)});
  ops({ev(4)});
  EXPECT_TRUE(take_units().empty()) << "nothing but the probe while unhealthy";
  EXPECT_EQ(p->pending().size(), 0u) << "the re-report will bring the truth: memory stays flat";
  EXPECT_EQ(p->stats().superseded, 3u);
  const auto first_delay = resync_timer();
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_TRUE(only_clear(*probe[0]));
  out.clear();
  fail(probe[0]->id);
  const auto second_delay = resync_timer();
  EXPECT_LE(first_delay, 500u);
  EXPECT_GE(second_delay, 500u) << "the backoff doubles";
  EXPECT_EQ(p->stats().probes_failed, 1u);
  probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  out.clear();
  ack(probe[0]->id);
  EXPECT_TRUE(p->healthy());
  EXPECT_EQ(p->stats().resyncs, 1u);
  ASSERT_EQ(of(action_kind::report).size(), 1u) << "the decoder re-reports everything";
  ASSERT_EQ(of(action_kind::health).size(), 1u);
  EXPECT_TRUE(of(action_kind::health)[0].ok);
}

TEST_F(Protocol, OutageDuringAResyncProbesAgainWithBackoff) {
  start();
  p->on_reconnected("a", t, out);  // healthy: a resync starts at once (TD6)
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ops({up(7)});
  ops({ev(8)});
  EXPECT_TRUE(take_units().empty()) << "nothing follows the probe before it answers";
  fail(probe[0]->id);
  EXPECT_FALSE(p->healthy());
  EXPECT_TRUE(take_units().empty());
  resync_timer();
  probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ack(probe[0]->id);
  EXPECT_TRUE(p->healthy());
  EXPECT_EQ(p->pending().size(), 0u);
  EXPECT_EQ(of(action_kind::report).size(), 1u);
}

TEST_F(Protocol, UnitsFailedAfterTheFirstOnlyCount) {  // TD3, U3
  start();
  ops({ev(1)});
  ops({ev(2)});
  auto u = take_units();
  ASSERT_EQ(u.size(), 2u);
  fail(u[0]->id);
  p->on_result(emit_result{"a", u[1]->id, false, 0, false, "abandoned"}, t, out);
  EXPECT_EQ(p->stats().units_failed, 2u);
  EXPECT_EQ(of(action_kind::arm_resync).size(), 1u) << "one outage, one backoff";
  size_t warns = 0;
  for (const auto& a : of(action_kind::log)) warns += a.line.severity == log::level::warn;
  EXPECT_EQ(warns, 1u);
}

TEST_F(Protocol, StillUnreachableIsLoggedAtMostOncePer10sWithCounts) {  // TD3
  start();
  ops({ev(1)});
  fail(take_units()[0]->id);
  size_t lines = 0;
  for (int i = 0; i < 20; ++i) {
    resync_timer();
    auto probe = take_units();
    ASSERT_EQ(probe.size(), 1u);
    t.steady_ms += 100;
    fail(probe[0]->id);
  }
  for (const auto& a : of(action_kind::log))
    if (a.line.message == "policy server target still unreachable") ++lines;
  EXPECT_LT(lines, 20u);
  EXPECT_GE(lines, 1u);
  EXPECT_EQ(p->stats().probes_failed, 20u);
}

TEST_F(Protocol, ReconnectWhileUnhealthyProbesAtOnce) {  // TD4
  start();
  ops({ev(1)});
  fail(take_units()[0]->id);
  EXPECT_TRUE(take_units().empty());
  p->on_reconnected("a", t, out);
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_TRUE(only_clear(*probe[0]));
}

TEST_F(Protocol, ReconnectResyncsAreRateLimited) {  // TD6
  start();
  p->on_reconnected("a", t, out);
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ack(probe[0]->id);
  out.clear();
  t.steady_ms += 1000;
  p->on_reconnected("a", t, out);
  p->on_reconnected("a", t, out);
  EXPECT_TRUE(take_units().empty()) << "within 5 s of the last resync";
  auto arms = of(action_kind::arm_resync);
  ASSERT_EQ(arms.size(), 1u) << "one deferred resync, however many notices";
  EXPECT_EQ(arms[0].delay, ms(4000));
  resync_timer();
  probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_TRUE(only_clear(*probe[0]));
  EXPECT_EQ(p->stats().reconnects, 3u);
}

TEST_F(Protocol, EmitterReplacedWithUnitsInFlightResyncs) {  // TD7
  start();
  ops({ev(1)});
  ASSERT_EQ(take_units().size(), 1u);
  p->on_emitter(t, out);
  p->on_targets({"a"}, t, out);
  EXPECT_EQ(of(action_kind::listen).size(), 1u) << "the new emitter learns whom to tell";
  EXPECT_FALSE(p->healthy());
  EXPECT_EQ(p->units_in_flight(), 0u);
  resync_timer();
  EXPECT_EQ(take_units().size(), 1u);
}

TEST_F(Protocol, OverflowDropsPendingAndResyncs) {  // DB11
  opts.max_pending = 3;
  opts.flush_threshold = 100;
  start();
  ops({up(1), up(2), up(3), up(4)});
  EXPECT_EQ(p->stats().overflows, 1u);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(only_clear(*u[0]));
  EXPECT_TRUE(p->resync_in_progress());
}

TEST_F(Protocol, RefreshReReportsWithoutAClearOnlyWhenHealthy) {  // DB13
  opts.refresh_interval = ms(60'000);
  start();
  p->on_refresh_timer(t, out);
  ASSERT_EQ(of(action_kind::report).size(), 1u);
  EXPECT_NE(of(action_kind::report)[0].gen, 0u) << "a barrier: no lane starts before it ends";
  EXPECT_FALSE(p->pending().tracking()) << "no clear, no tracking";
  EXPECT_EQ(of(action_kind::arm_refresh).size(), 1u);
  EXPECT_TRUE(take_units().empty());
  out.clear();
  ops({ev(1)});
  fail(take_units()[0]->id);
  out.clear();
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(of(action_kind::report).empty());
}

// ---- drain -------------------------------------------------------------------------------------

TEST_F(Protocol, DrainWithUnitsOutstandingAnswersAfterTheirAcks) {  // DB17
  start();
  ops({ev(1)});
  ops({ev(2)});
  auto u = take_units();
  ASSERT_EQ(u.size(), 2u);
  ops({up(3)});
  p->on_drain(t, out);
  EXPECT_TRUE(of(action_kind::answer_drains).empty());
  ack(u[0]->id);
  auto last = take_units();
  ASSERT_EQ(last.size(), 1u) << "the drain does not wait for the window";
  ack(u[1]->id);
  EXPECT_TRUE(of(action_kind::answer_drains).empty());
  ack(last[0]->id);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_TRUE(of(action_kind::answer_drains)[0].ok);
}

TEST_F(Protocol, DrainAnswersFalseWhenAUnitFails) {  // DB17
  start();
  ops({ev(1)});
  auto u = take_units();
  p->on_drain(t, out);
  fail(u[0]->id);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_FALSE(of(action_kind::answer_drains)[0].ok);
  EXPECT_TRUE(of(action_kind::arm_resync).empty()) << "no resync while shutting down";
}

TEST_F(Protocol, DrainWhileUnhealthyInKeepModeIsFalseAtOnce) {  // DB17
  start();
  ops({ev(1)});
  fail(take_units()[0]->id);
  out.clear();
  p->on_drain(t, out);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_FALSE(of(action_kind::answer_drains)[0].ok);
}

TEST_F(Protocol, ShutdownClearIsTheLastUnitAndTheAnswerSaysItWasAcked) {  // DB16
  opts.shutdown_clear = true;
  start();
  ops({ev(1)});
  auto u = take_units();
  ops({up(2)});
  p->on_drain(t, out);
  auto last = take_units();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_TRUE(only_clear(*last[0])) << "pending is moot: the clear supersedes it";
  ops({up(3)});
  EXPECT_EQ(p->stats().after_final_clear, 1u);
  ack(u[0]->id);
  EXPECT_TRUE(of(action_kind::answer_drains).empty()) << "the clear is not acknowledged yet";
  ack(last[0]->id);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_TRUE(of(action_kind::answer_drains)[0].ok);
  out.clear();
  p->on_drain(t, out);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u) << "a later drain is answered at once";
}

TEST_F(Protocol, ShutdownClearGoesEvenWhileUnhealthyAndAFailureIsFalse) {  // DB16
  opts.shutdown_clear = true;
  start();
  ops({ev(1)});
  fail(take_units()[0]->id);
  p->on_drain(t, out);
  auto last = take_units();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_TRUE(only_clear(*last[0]));
  fail(last[0]->id);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_FALSE(of(action_kind::answer_drains)[0].ok);
}

// ---- merged DP mode ----------------------------------------------------------------------------

struct Merged : Protocol {
  void SetUp() override {
    Protocol::SetUp();
    opts.merged = true;
  }
  void join(uint32_t r) {
    p->on_rank_started(r, t, out);
    p->on_decoder(r, t, out);
  }
};

TEST_F(Merged, AnEvictionGoesOnlyWhenNoRankHoldsThePrefix) {  // DB15
  start({});
  join(0);
  join(1);
  ops({up(1), up(2)}, 0);
  ops({up(1)}, 1);
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1, 2})) << "1 once";
  ack(u[0]->id);
  ops({ev(1)}, 0);
  EXPECT_TRUE(take_units().empty()) << "rank 1 still holds 1";
  ops({ev(1)}, 1);
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{1});
  EXPECT_EQ(p->held_keys(), 1u);
}

TEST_F(Merged, ARankClearEvictsOnlyWhatItAloneHeld) {  // DB15
  start({});
  join(0);
  join(1);
  ops({up(1), up(2)}, 0);
  ops({up(2), up(3)}, 1);
  window();
  ack(take_units()[0]->id);
  p->on_clear(1, 2, 99, t, out);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_FALSE(u[0]->clear) << "ALL_CLEARED would wipe rank 0 too";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{3});
  ops({up(4)}, 1, 1);
  EXPECT_EQ(p->stats().stale_ops, 1u) << "rank 1's epochs are its own";
  ops({up(4)}, 0, 1);
  EXPECT_EQ(p->stats().stale_ops, 1u);
}

TEST_F(Merged, ARankRestartReleasesItsKeysAndStartsAtEpochOne) {  // DB15
  start({});
  join(0);
  join(1);
  ops({up(1)}, 0);
  ops({up(1), up(5)}, 1, 4);
  window();
  ack(take_units()[0]->id);
  join(1);  // rank 1's data path restarted
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{5});
  EXPECT_FALSE(u[0]->clear);
  EXPECT_EQ(p->epoch(1), 1u);
}

TEST_F(Merged, OnlyTheReplicaStartClearsAndAResyncAsksEveryRank) {  // DB14, DB15, DB9
  start({});
  join(0);
  join(1);
  EXPECT_TRUE(take_units().empty()) << "joining ranks never clear the replica";
  ops({up(1)}, 0);
  ops({up(1)}, 1);
  window();
  ack(take_units()[0]->id);
  p->on_reconnected("a", t, out);
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ack(probe[0]->id);
  ASSERT_EQ(of(action_kind::report).size(), 2u);
  EXPECT_EQ(of(action_kind::report)[0].gen, 0u) << "the holder set does DB6's work";
  EXPECT_FALSE(p->pending().tracking());
  EXPECT_EQ(p->held_keys(), 0u) << "the re-reports rebuild the holder set";
  ops({ev(1)}, 0);
  EXPECT_TRUE(take_units().empty()) << "rank 0 did not re-report 1 yet: nothing to evict";
}

TEST_F(Merged, NoEmitterYetHoldsEverything) {  // DB4
  p.emplace(opts);
  p->start(t, out);
  join(1);
  ops({ev(1)}, 1);
  EXPECT_TRUE(take_units().empty());
  p->on_emitter(t, out);
  p->on_targets({"a"}, t, out);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear) << "the start's clear first";
}

}  // namespace
}  // namespace kvrelay::debounce

// ---- rpc evictions and LoRA partitions (DB18) ----------------------------------------------------

namespace kvrelay::debounce {
namespace {

shard_ops adapter_batch(std::string adapter, std::vector<prefix_op> v) {
  auto o = batch(std::move(v));
  o.adapter = std::move(adapter);
  return o;
}

TEST_F(Protocol, DB18_ABaseEvictionCarriesTheAdapterEntriesItSweepsAndTheResyncForgetsThem) {
  opts.repair_base_sweeps = true;
  start();
  p->on_ops(0, adapter_batch("", {up(7)}), t, out);
  p->on_ops(0, adapter_batch("sql", {up(7)}), t, out);
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->restores.empty());
  ack(u[0]->id);
  EXPECT_EQ(p->mirrored_keys(), 1u);

  ops({ev(7)});  // the base model's block goes; the adapter's stays
  u = take_units();
  ASSERT_EQ(u.size(), 1u) << "an eviction never waits for the window";
  EXPECT_EQ(fps_evicted(*u[0]), (std::vector<uint64_t>{7}));
  ASSERT_EQ(u[0]->restores.size(), 1u);
  EXPECT_EQ(u[0]->restores[0].adapter, "sql");
  EXPECT_EQ(u[0]->restores[0].fingerprint, 7u);
  EXPECT_EQ(p->stats().sweep_restores, 1u);
  // The unit fails: the resync's clear empties the server, and the mirror with it (SR3).
  fail(u[0]->id);
  resync_timer();
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(only_clear(*u[0]));
  ack(u[0]->id);  // the server is empty now
  EXPECT_EQ(p->mirrored_keys(), 0u);
}

TEST_F(Protocol, DB18_OffByDefault) {
  start();
  p->on_ops(0, adapter_batch("sql", {up(7)}), t, out);
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  ack(u[0]->id);
  ops({ev(7)});
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->restores.empty());
  EXPECT_EQ(p->mirrored_keys(), 0u);
}

}  // namespace
}  // namespace kvrelay::debounce
