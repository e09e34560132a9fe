// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The debouncer's protocol driven directly through its rules (debouncer_protocol.hpp): windows,
// credits, epochs, outage and resync, walks of the index, reconnects, never-sent pairs, merged DP
// ranks, drains.
#include "actors/debouncer/debouncer_protocol.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "tests/debouncer/model_shard.hpp"

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
  std::map<uint32_t, model_shard> shards;  // what each rank's shard holds (walks read it)

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
  // The walk requests asked since the last call.
  std::vector<walk_ask> walk_asks() {
    std::vector<walk_ask> v;
    for (const auto& a : out)
      if (a.kind == action_kind::walk) v.push_back(a.ask);
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const action& a) { return a.kind == action_kind::walk; }),
              out.end());
    return v;
  }
  // Each rank's shard answers the walk requests asked (the shard's mailbox order: now).
  size_t serve() {
    std::vector<action> asks;
    for (const auto& a : out)
      if (a.kind == action_kind::walk) asks.push_back(a);
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const action& a) { return a.kind == action_kind::walk; }),
              out.end());
    for (const auto& a : asks) p->on_ops(a.rank, shards[a.rank].answer(a.ask), t, out);
    return asks.size();
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
  // Starts with 50 blocks stored and a resync's walk of them to "a" under way (its probe
  // answered), in chunks of 5.
  void walking() {
    opts.walk_chunk = 5;
    start();
    for (uint64_t k = 1; k <= 50; ++k) shards[0].store(k);
    p->on_reconnected("a", t, out);
    auto probe = take_units();
    ASSERT_EQ(probe.size(), 1u);
    ack(probe[0]->id);
  }
  // Starts with 30 blocks stored and a refresh pass (every 10 s) running to "a".
  void refresh_running() {
    opts.refresh_interval = ms(10'000);
    start();
    for (uint64_t k = 1; k <= 30; ++k) shards[0].store(k);
    p->on_refresh_timer(t, out);  // first seen
    t.steady_ms += 10'000;
    p->on_refresh_timer(t, out);
    ASSERT_EQ(p->walks().at("a").kind(), walk_kind::refresh);
  }
  // Two units out (adds 1-2, then 3), each after its window: both credits in use, so pending
  // keeps what comes next.
  void both_credits_in_use() {
    ops({up(1), up(2)});
    window();
    ops({up(3)});
    window();
    EXPECT_EQ(take_units().size(), 2u) << "both credits in use";
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

// ---- history (a replay) -----------------------------------------------------------------------

shard_ops replayed(std::vector<prefix_op> v) {
  shard_ops o = batch(std::move(v));
  o.replayed = true;
  return o;
}

struct History : Protocol {
  // Replayed ops at `at` ms after the start's moment; fires the last armed window whose time has
  // come on the way (the timer a shell would have fired).
  int64_t t0 = 0;
  void start_history(std::vector<uint32_t> ranks = {0}) {
    start(std::move(ranks));
    t0 = t.steady_ms;
  }
  void replay_at(int64_t at, std::vector<prefix_op> v, uint32_t rank = 0) {
    advance_to(at);
    p->on_ops(rank, replayed(std::move(v)), t, out);
  }
  void live_at(int64_t at, std::vector<prefix_op> v, uint32_t rank = 0) {
    advance_to(at);
    p->on_ops(rank, batch(std::move(v)), t, out);
  }
  void advance_to(int64_t at) {
    ASSERT_GE(t0 + at, t.steady_ms) << "time only goes forward";
    note_arms();  // armed by the ops of the moment t still says
    while (true) {
      const auto arms = of(action_kind::arm_flush);
      if (arms.empty() || arms.back().gen == fired_ ||
          armed_at_[arms.back().gen] + arms.back().delay.count() > t0 + at)
        break;
      const auto& a = arms.back();
      fired_ = a.gen;
      t.steady_ms = armed_at_[a.gen] + a.delay.count();
      p->on_flush_timer(a.gen, t, out);
      note_arms();
    }
    t.steady_ms = t0 + at;
  }
  // When each window was armed (a shell arms it when the action comes out).
  void note_arms() {
    for (const auto& a : of(action_kind::arm_flush)) armed_at_.try_emplace(a.gen, t.steady_ms);
  }
  std::vector<emit_unit_ptr> units() {
    note_arms();
    return take_units();
  }
  std::map<uint64_t, int64_t> armed_at_;
  uint64_t fired_ = 0;
};

TEST_F(History, ReplayedAddsAndEvictionsWaitAndTheFirstLiveOpSendsThem) {  // DB19
  start_history();
  live_at(0, {up(5)});
  advance_to(100);
  auto u = units();
  ASSERT_EQ(u.size(), 1u);
  ack(u[0]->id);  // the server holds 5
  t0 = t.steady_ms;
  replay_at(0, {up(1, true), up(2, true), ev(5)});
  EXPECT_TRUE(units().empty()) << "a replayed eviction waits too";
  replay_at(60, {ev(1), up(3, true)});
  replay_at(120, {up(4, true)});
  EXPECT_TRUE(units().empty()) << "the replay goes on: the window looked and waited";
  live_at(150, {up(6, true)});
  u = units();
  ASSERT_EQ(u.size(), 1u) << "the first live op ends the history";
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{2, 3, 4, 6}));
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{5});
  EXPECT_EQ(p->pending().drops().unsent_pairs, 1u) << "1 came and went inside the replay";
  ack(u[0]->id);
  live_at(160, {ev(2)});
  EXPECT_EQ(units().size(), 1u) << "DB2 again: a live eviction goes at once";
}

TEST_F(History, AnEvictionHeldAfterALiveOpGoesWithTheWindow) {  // DB19
  start_history();
  replay_at(0, {up(1, true)});
  live_at(50, {ev(9)});
  auto u = units();
  ASSERT_EQ(u.size(), 1u) << "a live eviction goes at once";
  ack(u[0]->id);
  replay_at(60, {ev(20)});
  EXPECT_TRUE(units().empty()) << "held: it came from the replay";
  advance_to(1000);
  u = units();
  ASSERT_EQ(u.size(), 1u) << "never left pending without a window";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{20});
  EXPECT_TRUE(p->pending().empty());
}

TEST_F(History, AReplayThatLeavesNothingPendingStillEnds) {  // DB19
  start_history();
  replay_at(0, {up(1, true)});
  replay_at(10, {ev(1)});  // a never-sent pair: nothing pending
  advance_to(60'000);
  replay_at(60'000, {up(2, true)});
  EXPECT_TRUE(units().empty()) << "a replay a minute later waits from its own start";
  advance_to(60'150);
  EXPECT_EQ(units().size(), 1u) << "and ends a window after its last op";
}

TEST_F(History, AWindowWithoutAReplayedOpEndsIt) {  // DB19
  start_history();
  replay_at(0, {up(1, true), ev(7)});
  replay_at(80, {up(2, true)});
  EXPECT_TRUE(units().empty());
  advance_to(179);
  EXPECT_TRUE(units().empty()) << "a replayed op came within the last window";
  advance_to(400);
  auto u = units();
  ASSERT_EQ(u.size(), 1u) << "the replay stopped: what waited goes";
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{7});
  ack(u[0]->id);
  live_at(410, {ev(1)});
  EXPECT_EQ(units().size(), 1u) << "the normal rules are back";
}

TEST_F(History, ALiveRankBesideAReplayingOneKeepsItsWindow) {  // DB19, DB15
  opts.merged = true;
  start_history({0, 1});
  replay_at(0, {up(1, true)}, 1);
  live_at(10, {up(2, true)}, 0);
  EXPECT_TRUE(units().empty()) << "the live op's rules: adds wait for the window";
  replay_at(20, {up(3, true)}, 1);
  live_at(30, {up(4, true)}, 0);
  replay_at(40, {up(5, true)}, 1);
  EXPECT_TRUE(units().empty());
  advance_to(100);
  auto u = units();
  ASSERT_EQ(u.size(), 1u) << "the live ops' window, not held by the replaying rank";
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

TEST_F(History, TheLiveOpThatArmedTheWindowKeepsIt) {  // DB19, DB15
  opts.merged = true;
  start_history({0, 1});
  live_at(0, {up(2, true)}, 0);
  replay_at(50, {up(3, true)}, 1);
  advance_to(100);
  auto u = units();
  ASSERT_EQ(u.size(), 1u) << "the live add's window";
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{2, 3}));
}

TEST_F(History, ItWaitsAtMostHistoryWindowsSinceTheLastUnit) {  // DB19
  opts.history_windows = 3;
  start_history();
  std::vector<int64_t> sent_at;
  for (int64_t at = 0; at <= 3300; at += 50) {  // the bound, ten times over
    replay_at(at, {up(static_cast<uint64_t>(100 + at), true)});
    for (const auto& u : units()) {
      sent_at.push_back(t.steady_ms - t0);
      ack(u->id);
    }
  }
  ASSERT_GE(sent_at.size(), 10u);
  EXPECT_GE(sent_at[0], 300) << "three windows of 100 ms";
  EXPECT_LE(sent_at[0], 400);
  for (size_t i = 1; i < sent_at.size(); ++i) {
    EXPECT_GE(sent_at[i] - sent_at[i - 1], 300) << "the wait starts over from each unit";
    EXPECT_LE(sent_at[i] - sent_at[i - 1], 400);
  }
}

TEST_F(History, PendingPastItsBoundGoesAtOnce) {  // DB19
  opts.history_max_pending = 3;
  start_history();
  replay_at(0, {up(1, true), up(2, true)});
  EXPECT_TRUE(units().empty());
  replay_at(10, {up(3, true)});
  auto u = units();
  ASSERT_EQ(u.size(), 1u) << "three keys: no window, no threshold awaited";
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1, 2, 3}));
}

TEST_F(History, ItNeverHoldsPendingToTheBoundThatShedsAdds) {  // DB19, DB11
  opts.max_pending = 8;  // history_max_pending (65 536) is above it: half of it rules
  start_history();
  replay_at(0, {up(1, true), up(2, true), up(3, true)});
  EXPECT_TRUE(units().empty());
  replay_at(10, {up(4, true)});
  auto u = units();
  ASSERT_EQ(u.size(), 1u) << "half of max_pending";
  EXPECT_EQ(u[0]->adds.size(), 4u);
  EXPECT_EQ(p->pending().drops().shed, 0u);
}

TEST_F(History, PendingTenTimesItsBoundGoesOutABoundAtATime) {  // DB19, DB11
  opts.max_pending = 8;  // the wait's bound: 4 keys
  start_history();
  size_t adds = 0;
  for (uint64_t k = 0; k < 40; ++k) {
    replay_at(static_cast<int64_t>(k), {up(1000 + k, true)});
    EXPECT_LT(p->pending().size(), 4u) << "never held at its bound";
    for (const auto& u : units()) {
      EXPECT_EQ(u->adds.size(), 4u);
      adds += u->adds.size();
      ack(u->id);
    }
  }
  EXPECT_EQ(adds, 40u);
  EXPECT_EQ(p->pending().drops().shed, 0u);
}

TEST_F(History, AClearNeverWaits) {  // DB19, DB14
  start_history();
  replay_at(0, {up(1, true)});
  p->on_clear(0, 2, 777, t, out);
  auto u = units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(only_clear(*u[0]));
}

TEST_F(History, ZeroWindowsKeepsTheWindowRules) {  // DB19 off
  opts.history_windows = 0;
  start_history();
  replay_at(0, {up(1, true), ev(7)});
  auto u = units();
  ASSERT_EQ(u.size(), 1u) << "an eviction never waits for the window (DB2)";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{7});
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

// DB1, DB2: in L2 mode too, a batch that carries a clear (its epoch is newer) goes in one unit
// with it: the adds before a downgrade are flushed first only when there are some.
TEST_F(Protocol, L2ModeEpochBumpWithADowngradeIsOneUnitWithTheClear) {
  opts.l2_mode = true;
  start();
  ops({up(1)});
  ops({ev(7)}, 0, 2);
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear);
  EXPECT_TRUE(u[0]->adds.empty()) << "1 was before the clear";
  ASSERT_EQ(u[0]->downgrades.size(), 1u);
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

TEST_F(Protocol, AfterAResyncEvictionsOfKeysNotReReportedAreDropped) {  // DB6, DB9, WK1
  opts.walk_chunk = 2;
  start();
  shards[0].store(1);
  shards[0].store(2);
  shards[0].store(3);
  shards[0].store(4);
  p->on_reconnected("a", t, out);
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ack(probe[0]->id);
  ASSERT_EQ(p->walks().count("a"), 1u) << "the probe's success starts a walk";
  EXPECT_TRUE(p->pending().tracking());
  shards[0].evict(1);
  ops({ev(1)});  // evicted before the walk read it: the server cannot hold it
  ASSERT_EQ(serve(), 1u);  // 2, 3
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u) << "one chunk, one unit";
  EXPECT_TRUE(u[0]->evicts.empty());
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{2, 3}));
  ack(u[0]->id);
  shards[0].evict(2);
  ops({ev(2)});
  u = take_units();
  ASSERT_EQ(u.size(), 1u) << "2 was re-reported";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{2});
  ack(u[0]->id);
  EXPECT_EQ(p->pending().drops().unreported, 1u);
  ASSERT_EQ(serve(), 1u);  // 4, and the end
  ack(take_units()[0]->id);
  EXPECT_TRUE(p->walks().empty());
  EXPECT_FALSE(p->pending().tracking()) << "DB6 ends with the walk";
  EXPECT_EQ(p->pending().tracked(), 0u) << "tracking memory released";
  ops({ev(50)});
  EXPECT_EQ(take_units().size(), 1u) << "after the walk, evictions go as before";
}

// DB3: one window at a time, of the configured length; a timer of an earlier window is stale.
TEST_F(Protocol, OneWindowAtATimeAndAnEarlierWindowsTimerIsStale) {
  start();
  ops({up(1)});
  ops({up(2)});
  auto arms = of(action_kind::arm_flush);
  ASSERT_EQ(arms.size(), 1u) << "armed once for both";
  EXPECT_EQ(arms[0].delay, opts.window);
  const uint64_t first = arms[0].gen;
  const uint64_t sent_before = p->stats().entries_sent;
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(p->stats().entries_sent, sent_before + 2);
  ack(u[0]->id);
  out.clear();
  ops({up(3)});
  ASSERT_EQ(of(action_kind::arm_flush).size(), 1u);
  p->on_flush_timer(first, t, out);
  EXPECT_TRUE(take_units().empty()) << "the first window's timer, fired late";
  window();
  EXPECT_EQ(take_units().size(), 1u);
}

// DB3: a flush takes unit after unit while what is left is still due (the threshold, or a
// drain); what is left below it waits for a window armed for it.
TEST_F(Protocol, AFlushGoesOnWhileWhatIsLeftIsDue) {
  opts.max_adds_per_unit = 2;
  opts.flush_threshold = 2;
  start();
  ops({up(1), up(2), up(3), up(4)});
  EXPECT_EQ(take_units().size(), 2u) << "two left after the first unit: due still";
}
TEST_F(Protocol, ADrainFlushesUnitAfterUnit) {
  opts.max_adds_per_unit = 2;
  start();
  ops({up(1), up(2), up(3), up(4), up(5)});
  p->on_drain(t, out);
  EXPECT_EQ(take_units().size(), 2u) << "as many as the credits take";
}
TEST_F(Protocol, WhatAFlushLeavesBelowTheThresholdGetsAWindow) {
  opts.max_adds_per_unit = 2;
  start();
  ops({up(1), up(2), up(3)});
  const auto arms = of(action_kind::arm_flush);
  ASSERT_EQ(arms.size(), 1u);
  out.clear();
  t.steady_ms += arms[0].delay.count();
  p->on_flush_timer(arms[0].gen, t, out);
  ASSERT_EQ(take_units().size(), 1u);
  EXPECT_EQ(of(action_kind::arm_flush).size(), 1u) << "one add left: its own window";
}

// DB3: evictions go at once; a window is armed only for adds.
TEST_F(Protocol, EvictionsAloneArmNoWindow) {
  start();
  ops({ev(1)});
  EXPECT_EQ(take_units().size(), 1u);
  EXPECT_TRUE(of(action_kind::arm_flush).empty());
}

// WK1, WK2: a chunk goes alone: pending adds not yet due wait for their window.
TEST_F(Protocol, AChunkGoesAloneAndPendingAddsWaitForTheirWindow) {
  start();
  shards[0].store(1);
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);
  ops({up(9)});  // pending, not due
  serve();
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_added(*u[0]), std::vector<uint64_t>{1});
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
  ASSERT_EQ(of(action_kind::walk).size(), 1u) << "a walk re-reports everything";
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
  EXPECT_EQ(of(action_kind::walk).size(), 1u);
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

// WK5, WK4: a catch-up replaces a refresh pass that is running (it reports everything anyway,
// and from the start: a shed add may lie behind the refresh's cursor).
TEST_F(Protocol, ACatchUpReplacesARunningRefreshPass) {
  opts.max_pending = 3;
  opts.flush_threshold = 100;
  opts.walk_chunk = 2;
  ASSERT_NO_FATAL_FAILURE(refresh_running());
  for (uint64_t k = 100; k <= 110; ++k) ops({up(k)});  // over the bound: adds shed
  ASSERT_GE(p->stats().sheds, 1u);
  ASSERT_EQ(p->walks().count("a"), 1u);
  EXPECT_EQ(p->walks().at("a").kind(), walk_kind::catchup);
}

// WK4, WK5: a restored index's walk replaces a running refresh pass.
TEST_F(Protocol, ARestoredIndexsWalkReplacesARunningRefreshPass) {
  opts.walk_chunk = 2;
  ASSERT_NO_FATAL_FAILURE(refresh_running());
  shard_ops note;
  note.epoch = 1;
  note.restored = true;
  p->on_ops(0, note, t, out);
  ASSERT_EQ(p->walks().count("a"), 1u);
  EXPECT_EQ(p->walks().at("a").kind(), walk_kind::start);
}

TEST_F(Protocol, PendingOverItsBoundShedsItsAddsAndWalksWithoutAClear) {  // DB11, WK4
  opts.max_pending = 3;
  opts.flush_threshold = 100;
  opts.walk_chunk = 2;
  start();
  for (uint64_t k = 1; k <= 30; ++k) shards[0].store(k);  // ten times the bound
  for (uint64_t k = 1; k <= 30; ++k) ops({up(k)});
  EXPECT_TRUE(of(action_kind::hold).empty()) << "adds are copies of the index: shed, not held";
  EXPECT_GE(p->stats().sheds, 1u);
  EXPECT_LE(p->pending().size(), 3u);
  EXPECT_EQ(p->stats().walks_catchup, 1u) << "one walk, started over while it runs";
  EXPECT_EQ(p->stats().walk_restarts + 1, p->stats().sheds);
  // The walk reports everything the index holds, in chunks, and no unit clears.
  std::set<uint64_t> got;
  size_t chunks = 0;
  for (int i = 0; i < 100 && !p->walks().empty(); ++i) {
    chunks += serve();
    for (auto& u : take_units()) {
      EXPECT_FALSE(u->clear);
      for (const auto& a : u->adds) got.insert(a.fingerprint);
      ack(u->id);
    }
  }
  EXPECT_TRUE(p->walks().empty());
  EXPECT_GE(chunks, 15u) << "30 blocks at 2 a chunk";
  window();
  for (auto& u : take_units())
    for (const auto& a : u->adds) got.insert(a.fingerprint);
  EXPECT_EQ(got.size(), 30u) << "every block reached the server";
}

TEST_F(Protocol, EvictionsAloneOverTheBoundHoldTheReadersNeverClear) {  // DB11
  opts.max_pending = 4;
  start();
  ops({up(1), up(2)});
  window();
  auto first = take_units();
  ASSERT_EQ(first.size(), 1u);
  ops({up(3)});
  window();
  auto second = take_units();
  ASSERT_EQ(second.size(), 1u) << "both credits in use now: pending keeps what comes";
  ops({ev(1), ev(2), ev(3), ev(4)});
  EXPECT_TRUE(of(action_kind::hold).empty()) << "at the bound, not over it";
  ops({ev(5), ev(6)});
  auto holds = of(action_kind::hold);
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_TRUE(holds[0].ok) << "the readers pause: an overload declared upstream";
  ops({ev(7)});  // what was in the queues still comes: kept, not dropped
  EXPECT_EQ(p->pending().size(), 7u);
  EXPECT_EQ(of(action_kind::hold).size(), 1u) << "held once";
  EXPECT_FALSE(p->resync_in_progress()) << "never a clear for an overflow";
  out.clear();
  ack(first[0]->id);  // the server takes some: pending drains
  ack(second[0]->id);
  for (int i = 0; i < 5 && p->pending().size() > 0; ++i)
    for (auto& u : take_units()) {
      EXPECT_FALSE(u->clear);
      ack(u->id);
    }
  holds = of(action_kind::hold);
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_FALSE(holds[0].ok) << "let go once pending fell to half its bound";
  EXPECT_EQ(p->stats().holds, 1u);
}

// DB11, DB17: a drain lets the readers go at once (what is left is reported or dropped by it),
// and lets them go only once.
TEST_F(Protocol, ADrainEndsAHoldOnce) {
  opts.max_pending = 4;
  start();
  ASSERT_NO_FATAL_FAILURE(both_credits_in_use());
  ops({ev(1), ev(2), ev(3), ev(4), ev(5), ev(6)});
  ASSERT_EQ(of(action_kind::hold).size(), 1u);
  out.clear();
  p->on_drain(t, out);
  auto holds = of(action_kind::hold);
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_FALSE(holds[0].ok);
  out.clear();
  p->on_drain(t, out);
  EXPECT_TRUE(of(action_kind::hold).empty()) << "let go already";
}

// WK6, DB17: a drain ends the walks: the shutdown reports what is pending, not the index.
TEST_F(Protocol, WK6_ADrainEndsTheWalks) {
  ASSERT_NO_FATAL_FAILURE(walking());
  ASSERT_EQ(serve(), 1u);
  ASSERT_FALSE(p->walks().empty());
  for (auto& u : take_units()) ack(u->id);
  walk_asks();  // the next chunk was asked before the drain; its answer will find no walk
  p->on_drain(t, out);
  EXPECT_TRUE(p->walks().empty());
  EXPECT_TRUE(walk_asks().empty());
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_TRUE(of(action_kind::answer_drains)[0].ok);
}

// DB16, DB17: what is pending when a drain begins is dropped, and counted, when it can go
// nowhere or the shutdown clear supersedes it.
TEST_F(Protocol, ADrainDropsAndCountsWhatCannotOrNeedNotGo) {
  for (const bool final_clear : {false, true}) {
    opts.shutdown_clear = final_clear;
    start();
    ops({up(1)});
    window();
    ops({up(2)});
    window();
    ASSERT_EQ(take_units().size(), 2u) << "both credits in use: what comes now waits";
    ops({ev(7), ev(8)});
    const size_t pending = p->pending().size();
    ASSERT_GT(pending, 0u);
    if (!final_clear) p->on_targets({}, t, out);  // nowhere to go
    const uint64_t before = p->stats().superseded;
    p->on_drain(t, out);
    EXPECT_EQ(p->pending().size(), 0u) << "final_clear " << final_clear;
    EXPECT_EQ(p->stats().superseded, before + pending) << "final_clear " << final_clear;
  }
}

TEST_F(Protocol, AHoldEndsWhenNoTargetIsLive) {  // DB11, DB8
  opts.max_pending = 2;
  start();
  ops({up(1), up(2)});
  window();
  auto a = take_units();
  ops({up(3)});
  window();
  auto b = take_units();
  ops({ev(1), ev(2), ev(3)});
  ASSERT_EQ(of(action_kind::hold).size(), 1u);
  out.clear();
  const uint64_t superseded = p->stats().superseded;
  const size_t pending = p->pending().size();
  fail(a[0]->id);  // the server is gone: the walk after its probe will carry the truth
  auto holds = of(action_kind::hold);
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_FALSE(holds[0].ok);
  EXPECT_EQ(p->pending().size(), 0u);
  EXPECT_EQ(p->stats().superseded, superseded + pending) << "what was dropped is counted";
  EXPECT_FALSE(p->pending().tracking()) << "no re-report is under way to track";
}

TEST_F(Protocol, RefreshWalksPacedAcrossItsInterval) {  // WK5, IW5
  opts.refresh_interval = ms(100'000);
  opts.walk_chunk = 1000;
  start();
  for (uint64_t k = 1; k <= 10'000; ++k) shards[0].store(k);
  out.clear();
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(p->walks().empty()) << "first seen live: what the server holds is fresh";
  t.steady_ms += 99'999;
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(p->walks().empty()) << "not yet an interval";
  t.steady_ms += 1;
  p->on_refresh_timer(t, out);
  ASSERT_EQ(p->walks().count("a"), 1u) << "an interval after it was first seen";
  EXPECT_EQ(p->walks().at("a").kind(), walk_kind::refresh);
  EXPECT_FALSE(p->pending().tracking()) << "no clear, no tracking";
  ASSERT_EQ(serve(), 1u) << "one block, to learn how many there are";
  for (auto& u : take_units()) {
    EXPECT_FALSE(u->clear);
    ack(u->id);
  }
  // A tenth of the interval: about a tenth of the blocks, never a burst of all of them.
  uint64_t sent = 0;
  for (int tick = 0; tick < 10; ++tick) {
    t.steady_ms += 1000;
    p->on_refresh_timer(t, out);
    serve();
    for (auto& u : take_units()) {
      sent += u->adds.size();
      ack(u->id);
    }
    serve();
    for (auto& u : take_units()) {
      sent += u->adds.size();
      ack(u->id);
    }
  }
  EXPECT_GE(sent, 900u);
  EXPECT_LE(sent, 1100u) << "paced: 10 s of a 100 s interval";
  auto arms = of(action_kind::arm_refresh);
  ASSERT_FALSE(arms.empty());
  EXPECT_EQ(arms.back().delay, ms(10'000)) << "interval x chunk / resident";
  // Unhealthy: no refresh.
  out.clear();
  ops({ev(1)});
  fail(take_units()[0]->id);
  EXPECT_TRUE(p->walks().empty()) << "WK6: a target that failed loses its walk";
  out.clear();
  t.steady_ms += 200'000;
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(of(action_kind::walk).empty());
}

// ---- drain -------------------------------------------------------------------------------------

// ---- walks of the index -----------------------------------------------------------------------

TEST_F(Protocol, WK1_AWalkAsksOneChunkAtATimeOnlyWhileTheTargetHasACredit) {
  opts.walk_chunk = 10;
  start();
  for (uint64_t k = 1; k <= 100; ++k) shards[0].store(k);  // ten times the chunk
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);  // the probe
  std::set<uint64_t> got;
  size_t asks = 0;
  for (int round = 0; round < 50 && !p->walks().empty(); ++round) {
    const auto a = walk_asks();
    ASSERT_LE(a.size(), 1u) << "one request at a time";
    if (a.empty()) break;
    ++asks;
    EXPECT_EQ(a[0].max, 10u);
    p->on_ops(0, shards[0].answer(a[0]), t, out);
    auto u = take_units();
    ASSERT_EQ(u.size(), 1u);
    EXPECT_LE(u[0]->adds.size(), 10u) << "O(chunk): never the whole index at once";
    for (const auto& x : u[0]->adds) got.insert(x.fingerprint);
    // Both credits busy: the next chunk waits for an answer.
    if (p->units_in_flight() >= 2) {
      EXPECT_TRUE(walk_asks().empty());
    }
    ack(u[0]->id);
  }
  EXPECT_TRUE(p->walks().empty());
  EXPECT_EQ(got.size(), 100u);
  EXPECT_EQ(asks, 10u);
  EXPECT_EQ(p->stats().walks_done, 1u);
  EXPECT_EQ(p->stats().walk_blocks, 100u);
}

TEST_F(Protocol, WK2_AChunkMakesAPendingIntroducedAddStaleSoItsEvictionGoes) {
  start();
  shards[0].store(5);
  auto o = batch({up(5, true)});  // new to the partition: DB5 would drop it with its eviction
  p->on_ops(0, o, t, out);
  p->on_reconnected("a", t, out);  // the add waits for the window; a resync meanwhile
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ASSERT_TRUE(only_clear(*probe[0]));
  ack(probe[0]->id);
  // The probe's success dropped pending (DB9); the walk carries 5.
  serve();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_added(*u[0]), std::vector<uint64_t>{5});
  ack(u[0]->id);
  shards[0].evict(5);
  ops({ev(5)});
  u = take_units();
  ASSERT_EQ(u.size(), 1u) << "the server holds 5 from the walk: the eviction must go";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{5});
}

TEST_F(Protocol, WK2_ALiveAddAndAWalkOfTheSameKeyBothLeaveTheLatestState) {
  opts.walk_chunk = 1;
  start();
  shards[0].store(1);
  shards[0].store(2);
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);
  serve();  // 1 at T1
  ack(take_units()[0]->id);
  // 1 moves to CPU before the walk reaches 2: the change follows the chunk that carried 1.
  shards[0].store(1, tier::t2);
  ops({up(1, false, tier::t2)});
  serve();  // 2 (and the end)
  window();
  tier last = tier::t1;
  for (auto& u : take_units())
    for (const auto& a : u->adds)
      if (a.fingerprint == 1) last = a.t;
  EXPECT_EQ(last, tier::t2);
}

TEST_F(Protocol, WK3_AChunkReadBeforeAClearIsDroppedAndEndsTheRanksWalk) {
  start();
  shards[0].store(1);
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);
  auto a = walk_asks();
  ASSERT_EQ(a.size(), 1u);
  const shard_ops before = shards[0].answer(a[0]);  // read before the clear
  p->on_clear(0, 2, 99, t, out);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear);
  ack(u[0]->id);
  p->on_ops(0, before, t, out);
  EXPECT_TRUE(take_units().empty()) << "stale: after the clear every block is a live add";
  EXPECT_TRUE(p->walks().empty());
}

TEST_F(Protocol, WK4_ARestoredIndexIsWalkedAfterTheStartClear) {
  p.emplace(opts);
  p->start(t, out);
  p->on_emitter(t, out);
  p->on_decoder(0, t, out);
  shards[0].store(3);
  shards[0].store(4);
  shard_ops note;
  note.epoch = 1;
  note.restored = true;
  p->on_ops(0, note, t, out);  // before the targets are known
  EXPECT_TRUE(walk_asks().empty()) << "no target yet";
  p->on_targets({"a"}, t, out);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(only_clear(*u[0])) << "the start clear first";
  ASSERT_EQ(p->walks().count("a"), 1u);
  EXPECT_EQ(p->walks().at("a").kind(), walk_kind::start);
  serve();
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(p->stats().walks_start, 1u);
  EXPECT_EQ(p->stats().walks_started, 1u);
  size_t said = 0;
  for (const auto& a : of(action_kind::log))
    said += a.line.message.find("walking the index") != std::string::npos;
  EXPECT_EQ(said, 1u) << "a walk other than a refresh pass is said";
}

// WK6: a walk ends with its target, also when no target is left to pump for; the name coming
// back is a new target that starts with its own probe, not the old walk's next chunk.
TEST_F(Protocol, WK6_AWalkEndsWhenItsTargetLeavesEvenTheLastOne) {
  ASSERT_NO_FATAL_FAILURE(walking());  // the probe: the walk begins
  ASSERT_EQ(serve(), 1u);
  ASSERT_FALSE(p->walks().empty());
  p->on_targets({}, t, out);
  EXPECT_TRUE(p->walks().empty());
  out.clear();
  p->on_targets({"a"}, t, out);
  EXPECT_TRUE(walk_asks().empty()) << "nothing walked before the new target's probe";
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(only_clear(*u[0]));
}

TEST_F(Protocol, WK6_AnOutageMidWalkCostsOneClearAndTheNextWalkStartsOver) {
  opts.walk_chunk = 5;
  start();
  for (uint64_t k = 1; k <= 50; ++k) shards[0].store(k);
  p->on_reconnected("a", t, out);
  auto probe = take_units();
  ack(probe[0]->id);
  size_t clears = 1;
  serve();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  fail(u[0]->id);  // the server went away mid-walk
  EXPECT_TRUE(p->walks().empty()) << "a target that is not live has no walk";
  for (int i = 0; i < 3; ++i) {  // the outage lasts: probes fail
    resync_timer();
    for (auto& pr : take_units()) {
      EXPECT_TRUE(only_clear(*pr));
      fail(pr->id);
    }
  }
  resync_timer();
  auto ok = take_units();
  ASSERT_EQ(ok.size(), 1u);
  ack(ok[0]->id);
  ++clears;  // the one the server acknowledged
  std::set<uint64_t> got;
  for (int i = 0; i < 40 && !p->walks().empty(); ++i) {
    serve();
    for (auto& x : take_units()) {
      EXPECT_FALSE(x->clear) << "no clear during the walk";
      for (const auto& a : x->adds) got.insert(a.fingerprint);
      ack(x->id);
    }
  }
  EXPECT_EQ(got.size(), 50u) << "walked from the start again";
  EXPECT_EQ(p->stats().walks_resync, 2u);
  EXPECT_EQ(clears, 2u) << "one acknowledged ALL_CLEARED per incident";
}

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
  out.clear();
  p->on_reconnected("a", t, out);
  EXPECT_TRUE(of(action_kind::answer_drains).empty()) << "answered once";
}

TEST_F(Protocol, DrainWaitingWhenTheEmitterIsReplacedAnswersFalseAtOnce) {  // DB17, TD7
  start();
  ops({ev(1)});
  ASSERT_EQ(take_units().size(), 1u);
  p->on_drain(t, out);
  EXPECT_TRUE(of(action_kind::answer_drains).empty()) << "the unit is in flight";
  p->on_emitter(t, out);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u) << "it was lost with the old emitter";
  EXPECT_FALSE(of(action_kind::answer_drains)[0].ok);
}

// The merged DP debouncer starts before its emitter is announced: what was due meanwhile (DB7:
// nothing is taken without an emitter) goes out as soon as it arrives, not at the next window.
TEST_F(Protocol, WhatWasDueBeforeTheEmitterGoesOutWhenItArrives) {  // DB7
  opts.flush_threshold = 2;  // two adds are due at once
  p.emplace(opts);
  p->start(t, out);
  p->on_targets({"a"}, t, out);
  p->on_decoder(0, t, out);
  out.clear();
  ops({up(1, true), up(2, true)});
  EXPECT_TRUE(take_units().empty()) << "no emitter yet";
  p->on_emitter(t, out);
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u) << "the due adds wait for a later input";
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1, 2}));
}

TEST_F(Protocol, AnEmitterReplacedUnderAUnitSaysTheTargetIsDown) {  // TD7, DB12
  start();
  ops({ev(1)});
  ack(take_units()[0]->id);
  ops({ev(2)});
  ASSERT_EQ(take_units().size(), 1u);
  out.clear();
  p->on_emitter(t, out);
  ASSERT_EQ(of(action_kind::health).size(), 1u);
  EXPECT_FALSE(of(action_kind::health)[0].ok);
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
  EXPECT_GT(last[0]->id, u[0]->id) << "a unit of its own";
  EXPECT_EQ(last[0]->clear_ts_us, t.wall_us);
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

// DB7, DB16: a target that joins after the shutdown clear went out gets it too, and nothing else.
TEST_F(Protocol, ATargetJoiningAfterTheShutdownClearGetsItToo) {
  opts.shutdown_clear = true;
  start();
  ops({ev(1)});
  take_units();
  p->on_drain(t, out);
  const auto fin = take_units();
  ASSERT_EQ(fin.size(), 1u);
  p->on_targets({"a", "b"}, t, out);
  std::vector<emit_unit_ptr> to_b;
  for (const auto& a : of(action_kind::send_unit))
    if (a.target == "b") to_b.push_back(a.unit);
  ASSERT_FALSE(to_b.empty());
  EXPECT_EQ(to_b.back()->id, fin[0]->id) << "the same final clear";
}

// DB7, DB17: a target that joins during a drain drains too: its probe's answer does not start a
// re-report, so the drain says not everything reached it.
TEST_F(Protocol, ATargetJoiningDuringADrainDrainsToo) {
  start();
  ops({ev(1)});
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  p->on_drain(t, out);
  p->on_targets({"a", "b"}, t, out);
  std::vector<uint64_t> probes_b;
  for (const auto& a : of(action_kind::send_unit))
    if (a.target == "b") probes_b.push_back(a.unit->id);
  ASSERT_EQ(probes_b.size(), 1u) << "b joined after something was sent: its probe";
  ack(u[0]->id);
  p->on_result(emit_result{"b", probes_b[0], true, 0, true, ""}, t, out);
  const auto answers = of(action_kind::answer_drains);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].ok) << "b is empty now and will not be re-reported";
}

// ---- each handler's follow-ups (found by scripts/mutate.sh) -----------------------------------

// DB12: readiness follows the targets there are: the failed one leaving makes it ready at once.
TEST_F(Protocol, AFailedTargetLeavingMakesItReadyAtOnce) {
  opts.readiness = readiness_policy::all;
  start();
  ops({up(1)});
  window();
  fail(take_units()[0]->id);
  ASSERT_EQ(of(action_kind::health).size(), 1u);
  ASSERT_FALSE(of(action_kind::health)[0].ok);
  p->on_targets({"a", "b"}, t, out);
  for (const auto& a : of(action_kind::send_unit))
    if (a.target == "b") p->on_result(emit_result{"b", a.unit->id, true, 0, true, ""}, t, out);
  out.clear();
  p->on_targets({"b"}, t, out);  // a leaves: every target left is up
  ASSERT_EQ(of(action_kind::health).size(), 1u);
  EXPECT_TRUE(of(action_kind::health)[0].ok);
}

// DB6: the tracking a resync began ends when its target leaves mid-walk.
TEST_F(Protocol, TrackingEndsWhenTheResyncsTargetLeaves) {
  ASSERT_NO_FATAL_FAILURE(walking());
  ASSERT_TRUE(p->pending().tracking()) << "a's re-report is under way";
  p->on_targets({}, t, out);
  EXPECT_FALSE(p->pending().tracking());
}

// WK5: a walk that re-reported everything counts as a refresh from when it began.
TEST_F(Protocol, WK5_AFinishedResyncWalkIsTheLastRefresh) {
  opts.refresh_interval = ms(10'000);
  start();
  shards[0].store(1);
  p->on_refresh_timer(t, out);  // first seen
  t.steady_ms += 5'000;
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);
  for (int i = 0; i < 5 && !p->walks().empty(); ++i) {
    serve();
    for (auto& u : take_units()) ack(u->id);
  }
  ASSERT_TRUE(p->walks().empty()) << "the resync walk is done";
  t.steady_ms += 7'000;  // 12 s after first seen, 7 s after the walk began
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(p->walks().empty());
}

// WK5: a target that leaves and comes back is new: its refresh is due an interval after it is
// first seen again, not after the one that left.
TEST_F(Protocol, WK5_ATargetThatComesBackIsRefreshedAnIntervalAfterItsReturn) {
  opts.start_with_clear = false;  // nothing sent: the one that comes back is live at once
  opts.refresh_interval = ms(10'000);
  start();
  p->on_refresh_timer(t, out);  // first seen
  t.steady_ms += 8'000;
  p->on_targets({}, t, out);
  p->on_targets({"a"}, t, out);
  t.steady_ms += 3'000;  // 11 s after the first, 3 s after the return
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(p->walks().empty());
}

// DB3: a window that finds no add pending leaves nothing due: the next add waits for its own.
TEST_F(Protocol, AWindowWithNothingPendingLeavesTheNextAddToItsOwnWindow) {
  opts.flush_threshold = 2;
  start();
  ops({up(1), up(2)});  // due at once: the threshold
  ASSERT_EQ(take_units().size(), 1u);
  window();             // the window the adds armed, now empty
  ops({up(3)});
  EXPECT_TRUE(take_units().empty());
}

// WK6: a walk ends when its target starts a resync (a deferred one firing, or a reconnect).
TEST_F(Protocol, WK6_AWalkEndsWhenItsTargetResyncs) {
  for (const bool deferred : {false, true}) {
    ASSERT_NO_FATAL_FAILURE(walking());
    ASSERT_FALSE(p->walks().empty());
    if (deferred) {
      t.steady_ms += 1'000;  // within the interval: deferred
      p->on_reconnected("a", t, out);
      ASSERT_FALSE(p->walks().empty());
      resync_timer();
    } else {
      t.steady_ms += 60'000;
      p->on_reconnected("a", t, out);
    }
    EXPECT_TRUE(p->walks().empty()) << (deferred ? "deferred" : "at once");
    out.clear();
  }
}

// DB17: a drain waiting only for the unit a target holds is answered when that target leaves.
TEST_F(Protocol, ADrainWaitingOnATargetThatLeavesIsAnsweredThen) {
  start();
  p->on_targets({"a", "b"}, t, out);
  for (const auto& a : of(action_kind::send_unit))
    if (a.target == "b") p->on_result(emit_result{"b", a.unit->id, true, 0, true, ""}, t, out);
  out.clear();
  ops({ev(1)});
  std::vector<action> sends = of(action_kind::send_unit);
  ASSERT_EQ(sends.size(), 2u);
  ack(sends[0].unit->id);  // a answers; b does not
  p->on_drain(t, out);
  ASSERT_TRUE(of(action_kind::answer_drains).empty()) << "b holds the unit";
  p->on_targets({"a"}, t, out);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_TRUE(of(action_kind::answer_drains)[0].ok);
}

// IW3: a walk waiting on a rank's answer asks the rank's new decoder at once.
TEST_F(Protocol, AWalkAsksARanksNewDecoderAtOnce) {
  start();
  shards[0].store(1);
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);
  ASSERT_EQ(walk_asks().size(), 1u);  // never answered: the decoder went
  p->on_decoder(0, t, out);
  EXPECT_EQ(walk_asks().size(), 1u);
}
// DB14: outside the merged mode a restarted data path clears nothing here (its first batch or a
// clear notice does).
TEST_F(Protocol, ARestartedRankClearsNothingOutsideTheMergedMode) {
  start();
  ops({up(1)});
  p->on_rank_started(0, t, out);
  window();
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_FALSE(u[0]->clear);
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1}));
}

// WK3, DB1: a chunk whose epoch is newer (the clear notice is behind it) clears at once.
TEST_F(Protocol, WK3_AChunkOfANewerEpochSendsTheClearAtOnce) {
  start();
  shards[0].store(1);
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);
  const auto a = walk_asks();
  ASSERT_EQ(a.size(), 1u);
  shard_ops chunk = shards[0].answer(a[0]);
  chunk.epoch = 2;
  p->on_ops(0, chunk, t, out);
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear);
}

// WK4: a second rank's restored index while the first one's walk runs starts it over as a
// catch-up of every rank.
TEST_F(Protocol, WK4_ASecondRestoredRankStartsTheWalkOverAsACatchUp) {
  start({0, 1});
  shards[0].store(3);
  shards[1].store(4);
  shard_ops note;
  note.epoch = 1;
  note.restored = true;
  p->on_ops(0, note, t, out);
  ASSERT_EQ(p->walks().at("a").kind(), walk_kind::start);
  p->on_ops(1, note, t, out);
  ASSERT_EQ(p->walks().count("a"), 1u);
  EXPECT_EQ(p->walks().at("a").kind(), walk_kind::catchup);
  EXPECT_EQ(p->stats().walk_restarts, 1u);
}

// WK5: a refresh pass counts from when it began: the timer right after it does not start another.
TEST_F(Protocol, WK5_ARefreshPassCountsFromItsStart) {
  opts.refresh_interval = ms(10'000);
  start();
  shards[0].store(1);
  p->on_refresh_timer(t, out);  // first seen
  t.steady_ms += 10'000;
  p->on_refresh_timer(t, out);  // the pass begins
  ASSERT_EQ(p->walks().count("a"), 1u);
  for (int i = 0; i < 10 && !p->walks().empty(); ++i) {
    serve();
    for (auto& u : take_units()) ack(u->id);
  }
  ASSERT_TRUE(p->walks().empty()) << "one block: the pass is done at once";
  t.steady_ms += 1'000;
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(p->walks().empty()) << "not due before an interval from the pass's start";
}

// DB17: a drain with no emitter to deliver through is answered false.
TEST_F(Protocol, ADrainWithoutAnEmitterIsFalse) {
  p.emplace(opts);
  p->start(t, out);
  p->on_targets({"a"}, t, out);
  p->on_decoder(0, t, out);
  out.clear();
  p->on_drain(t, out);
  ASSERT_EQ(of(action_kind::answer_drains).size(), 1u);
  EXPECT_FALSE(of(action_kind::answer_drains)[0].ok);
}

// WK4: a restored index announced to a live target is walked to it; not during a drain.
TEST_F(Protocol, WK4_ARestoredIndexAnnouncedToALiveTargetIsWalked) {
  start();
  shards[0].store(3);
  shard_ops note;
  note.epoch = 1;
  note.restored = true;
  p->on_ops(0, note, t, out);
  EXPECT_EQ(p->walks().count("a"), 1u);
}
TEST_F(Protocol, WK4_ARestoredIndexAnnouncedDuringADrainIsNotWalked) {
  start();
  p->on_drain(t, out);
  shard_ops note;
  note.epoch = 1;
  note.restored = true;
  p->on_ops(0, note, t, out);
  EXPECT_TRUE(p->walks().empty());
}

// DB1: a clear notice of the epoch already in force is a repeat, not a second clear.
TEST_F(Protocol, AClearNoticeOfTheCurrentEpochIsARepeat) {
  start();
  ops({up(1)});
  p->on_clear(0, 1, 99, t, out);
  window();
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_FALSE(u[0]->clear);
}

// WK5: refresh passes only with a positive interval (1 ms is one), never during a drain.
TEST_F(Protocol, WK5_NoRefreshWithoutAnInterval) {
  start();
  p->on_refresh_timer(t, out);
  t.steady_ms += 3'600'000;
  p->on_refresh_timer(t, out);
  EXPECT_TRUE(p->walks().empty());
}
TEST_F(Protocol, WK5_AOneMillisecondIntervalRefreshes) {
  opts.refresh_interval = ms(1);
  start();
  p->on_refresh_timer(t, out);  // first seen live: fresh
  t.steady_ms += 1;
  p->on_refresh_timer(t, out);
  ASSERT_EQ(p->walks().count("a"), 1u);
  EXPECT_EQ(p->walks().at("a").kind(), walk_kind::refresh);
}

// WK5: a target that is not live starts no refresh pass (its probe's answer starts a resync,
// which reports everything), and its refresh clock starts only once it is seen live.
TEST_F(Protocol, WK5_ATargetThatIsNotLiveStartsNoRefreshPass) {
  opts.refresh_interval = ms(10'000);
  start();
  ops({ev(1)});
  fail(take_units()[0]->id);  // unhealthy: only its probe goes out
  for (int tick = 0; tick < 3; ++tick) {
    p->on_refresh_timer(t, out);
    t.steady_ms += 10'000;
  }
  EXPECT_TRUE(p->walks().empty());
  EXPECT_EQ(p->stats().walks_started, 0u) << "not even one the next pump would drop";
  EXPECT_EQ(p->stats().walks_refresh, 0u);
}

// WK5: the refresh timer. Off without an interval; while a pass runs it ticks every
// interval x walk_chunk / resident (unknown: soon), within [1 s, 1 min] and never past the
// interval.
TEST_F(Protocol, WK5_TheRefreshTickIsIntervalTimesChunkOverResidentWithinASecondAndAMinute) {
  p.emplace(opts);  // refresh_interval 0
  p->start(t, out);
  EXPECT_TRUE(of(action_kind::arm_refresh).empty()) << "no interval: no timer at all";
  out.clear();
  opts.refresh_interval = ms(1);
  p.emplace(opts);
  p->start(t, out);
  ASSERT_EQ(of(action_kind::arm_refresh).size(), 1u);
  EXPECT_EQ(of(action_kind::arm_refresh)[0].delay, ms(1)) << "never longer than the interval";

  struct tick_case {
    uint64_t resident;
    ms delay;
  };
  for (const auto c : {tick_case{0, ms(1000)}, tick_case{30, ms(60'000)},
                       tick_case{30'000, ms(2'000)}, tick_case{120'000, ms(1'000)}}) {
    SCOPED_TRACE(c.resident);
    opts.refresh_interval = ms(600'000);
    opts.walk_chunk = 100;
    shards.clear();
    start();
    for (uint64_t k = 1; k <= c.resident; ++k) shards[0].store(k);
    p->on_refresh_timer(t, out);  // first seen
    t.steady_ms += 600'000;
    p->on_refresh_timer(t, out);
    ASSERT_EQ(p->walks().count("a"), 1u);
    if (c.resident > 0) {
      ASSERT_EQ(serve(), 1u);  // the first answer says how much there is
      ASSERT_EQ(p->walks().at("a").resident(), c.resident);
    }
    out.clear();
    p->on_refresh_timer(t, out);
    ASSERT_EQ(of(action_kind::arm_refresh).size(), 1u);
    EXPECT_EQ(of(action_kind::arm_refresh)[0].delay, c.delay);
  }

  // A rank at a partition's end says what it holds without being done: one block, or none.
  for (const auto c : {tick_case{1, ms(60'000)}, tick_case{0, ms(60'000)}}) {
    SCOPED_TRACE(c.resident);
    opts.refresh_interval = ms(100'000);
    opts.walk_chunk = 1;
    shards.clear();
    start();
    shards[0].store(1);
    p->on_refresh_timer(t, out);
    t.steady_ms += 100'000;
    p->on_refresh_timer(t, out);
    const auto asks = walk_asks();
    ASSERT_EQ(asks.size(), 1u);
    shard_ops end_of_partition = shards[0].answer(asks[0]);
    end_of_partition.ops.resize(c.resident);
    end_of_partition.walk_done = false;
    end_of_partition.walk_partition = 1;
    end_of_partition.walk_key = 0;
    end_of_partition.resident = c.resident;
    p->on_ops(0, end_of_partition, t, out);
    ASSERT_FALSE(p->walks().at("a").learning());
    out.clear();
    p->on_refresh_timer(t, out);
    ASSERT_EQ(of(action_kind::arm_refresh).size(), 1u);
    EXPECT_EQ(of(action_kind::arm_refresh)[0].delay, c.delay) << "100 s x 1 / 1, at most a minute";
  }
}

// WK1, IW5: a refresh pass asks for nothing beyond its share of the interval, and no walk asks a
// rank whose decoder is not there to answer.
TEST_F(Protocol, WK1_NoChunkIsAskedBeyondAPassShareOrOfARankWithoutADecoder) {
  ASSERT_NO_FATAL_FAILURE(refresh_running());
  ASSERT_EQ(serve(), 1u) << "one block, to learn how many there are";
  for (auto& u : take_units()) ack(u->id);
  EXPECT_TRUE(walk_asks().empty()) << "no time has passed: its share is the block it has sent";
  t.steady_ms += 5'000;
  p->on_refresh_timer(t, out);
  auto asks = walk_asks();
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].max, 14u) << "half the interval: half of the 30, less the one sent";

  shards.clear();
  opts.refresh_interval = ms(0);
  start({});  // no decoder yet
  shards[0].store(1);
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);
  ASSERT_EQ(p->walks().count("a"), 1u);
  EXPECT_TRUE(walk_asks().empty()) << "nobody to answer it";
  p->on_decoder(0, t, out);
  EXPECT_EQ(walk_asks().size(), 1u);
}

// WK1: a chunk the shard answers in several parts (one per adapter) counts every part.
TEST_F(Protocol, WK1_AChunkAnsweredInPartsCountsEveryPart) {
  ASSERT_NO_FATAL_FAILURE(walking());
  const auto asks = walk_asks();
  ASSERT_EQ(asks.size(), 1u);
  shard_ops last = shards[0].answer(asks[0]);
  ASSERT_EQ(last.ops.size(), 5u);
  shard_ops part = last;
  part.walk_last = false;
  part.adapter = "lora-1";
  part.ops.resize(2);
  last.ops.erase(last.ops.begin(), last.ops.begin() + 2);
  p->on_ops(0, part, t, out);
  p->on_ops(0, last, t, out);
  EXPECT_EQ(take_units().size(), 2u) << "each part is a unit";
  EXPECT_EQ(p->walks().at("a").blocks_sent(), 5u);
}

// DB11: a hold ends as soon as pending is at half its bound, not one entry above. Adds that come
// over pending evictions of the same keys take their place, and over the bound they are shed
// (a walk re-reports them): that is how pending shrinks while nothing can be sent.
TEST_F(Protocol, AHoldEndsOncePendingIsAtHalfItsBound) {
  opts.max_pending = 8;
  start();
  both_credits_in_use();
  ASSERT_EQ(p->pending().size(), 0u);
  ops({ev(1), ev(2), ev(3), ev(4), ev(5), ev(6), ev(7), ev(8), ev(9)});
  ASSERT_EQ(of(action_kind::hold).size(), 1u);
  out.clear();
  ops({up(1), up(2), up(3), up(4), up(10)});
  ASSERT_EQ(p->pending().size(), 5u) << "the adds shed: evictions of 5-9 are left";
  EXPECT_TRUE(of(action_kind::hold).empty()) << "5 of 8: still held";
  ops({up(5), up(11), up(12), up(13), up(14)});
  ASSERT_EQ(p->pending().size(), 4u);
  const auto holds = of(action_kind::hold);
  ASSERT_EQ(holds.size(), 1u) << "4 of 8: let go";
  EXPECT_FALSE(holds[0].ok);
}

// DB9: what pending held when the target went away is dropped when its probe is answered (the
// walk after it brings the truth), and counted.
TEST_F(Protocol, DB9_AResyncDropsWhatWasPendingAndCountsIt) {
  start();
  ops({up(1)});
  window();
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  ops({up(2), up(3)});  // waiting for their window
  fail(u[0]->id);
  ASSERT_EQ(p->pending().size(), 2u) << "kept until the probe says the server is empty";
  resync_timer();
  const auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  const uint64_t before = p->stats().superseded;
  ack(probe[0]->id);
  EXPECT_EQ(p->pending().size(), 0u);
  EXPECT_EQ(p->stats().superseded, before + 2);
}

// DB6, WK6: a drain ends the resync's walk, and the eviction window (and its memory) with it.
TEST_F(Protocol, DB6_ADrainEndsTheResyncsEvictionWindowWithItsWalk) {
  ASSERT_NO_FATAL_FAILURE(walking());
  ASSERT_TRUE(p->pending().tracking());
  p->on_drain(t, out);
  EXPECT_TRUE(p->walks().empty());
  EXPECT_FALSE(p->pending().tracking());
}

// DB17: a target whose unit failed during the drain still gets what is pending; the answer (false)
// comes once nothing is, not at the failure.
TEST_F(Protocol, ADrainAnswersOnlyOncePendingIsOfferedEvenWhenATargetFailed) {
  opts.max_adds_per_unit = 1;
  start();
  ops({ev(1)});
  ops({ev(2)});
  const auto busy = take_units();
  ASSERT_EQ(busy.size(), 2u) << "both credits in use";
  ops({up(3), up(4), up(5)});
  p->on_drain(t, out);
  fail(busy[0]->id);
  EXPECT_TRUE(of(action_kind::answer_drains).empty()) << "two adds are still pending";
  std::vector<emit_unit_ptr> rest = take_units();
  ack(busy[1]->id);
  for (int i = 0; i < 10 && !p->pending().empty(); ++i) {
    EXPECT_TRUE(of(action_kind::answer_drains).empty());
    for (auto& u : take_units()) rest.push_back(u);
    if (!rest.empty()) {
      ack(rest.front()->id);
      rest.erase(rest.begin());
    }
  }
  ASSERT_TRUE(p->pending().empty());
  const auto answers = of(action_kind::answer_drains);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].ok) << "a unit failed";
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

// DB15: what passes the merge keeps its adapter and its batch's time, as does what a rank's
// clear evicts.
TEST_F(Merged, WhatPassesTheMergeKeepsItsAdapterAndBatchTime) {
  start({});
  join(0);
  join(1);
  shard_ops adds = batch({up(1), up(2)}, 1, 777);
  adds.adapter = "lora-1";
  p->on_ops(0, adds, t, out);
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0]->adds.size(), 2u);
  for (const auto& a : u[0]->adds) EXPECT_EQ(a.adapter, "lora-1");
  EXPECT_EQ(u[0]->adds_ts_us, 777);
  ack(u[0]->id);
  shard_ops evict = batch({ev(1)}, 1, 888);
  evict.adapter = "lora-1";
  p->on_ops(0, evict, t, out);
  window();
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0]->evicts.size(), 1u);
  EXPECT_EQ(u[0]->evicts[0].adapter, "lora-1");
  EXPECT_EQ(u[0]->evicts[0].ts_us, 888);
  ack(u[0]->id);
  p->on_clear(0, 2, 999, t, out);  // rank 0 alone held 2
  window();
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0]->evicts.size(), 1u);
  EXPECT_EQ(u[0]->evicts[0].fingerprint, 2u);
  EXPECT_EQ(u[0]->evicts[0].adapter, "lora-1");
  EXPECT_EQ(u[0]->evicts[0].ts_us, 999);
}

// DB15: a rank's re-store of a key only it holds passes the merge (its tier may have moved); a
// key another rank holds already does not.
TEST_F(Merged, AReStoreByTheOnlyHolderPassesAndOneByASecondDoesNot) {
  start({});
  join(0);
  join(1);
  ops({up(1)}, 0);
  window();
  ack(take_units()[0]->id);
  ops({up(1, false, tier::t2)}, 0);  // rank 0 again: its own key, now in T2
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0]->adds.size(), 1u);
  EXPECT_EQ(u[0]->adds[0].t, tier::t2);
  ack(u[0]->id);
  out.clear();
  ops({up(1)}, 1);  // rank 1 stores it too: the server has it already
  if (!of(action_kind::arm_flush).empty()) window();
  EXPECT_TRUE(take_units().empty());
}

// DB15: a rank whose data path restarts releases what it alone held, at once.
TEST_F(Merged, ARestartedRankReleasesWhatItAloneHeldAtOnce) {
  start({});
  join(0);
  join(1);
  ops({up(1)}, 0);
  ops({up(2)}, 1);
  window();
  ack(take_units()[0]->id);
  p->on_rank_started(0, t, out);
  const auto u = take_units();
  ASSERT_EQ(u.size(), 1u) << "evictions never wait";
  EXPECT_EQ(fps_evicted(*u[0]), std::vector<uint64_t>{1});
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

TEST_F(Merged, OnlyTheReplicaStartClearsAndAResyncWalksEveryRankInOrder) {  // DB14, DB15, DB9
  start({});
  join(0);
  join(1);
  EXPECT_TRUE(take_units().empty()) << "joining ranks never clear the replica";
  ops({up(1)}, 0);
  ops({up(1), up(2)}, 1);
  shards[0].store(1);
  shards[1].store(1);
  shards[1].store(2);
  window();
  ack(take_units()[0]->id);
  p->on_reconnected("a", t, out);
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ack(probe[0]->id);
  EXPECT_FALSE(p->pending().tracking()) << "the holder set does DB6's work";
  auto asks = of(action_kind::walk);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].rank, 0u) << "rank order";
  serve();
  ack(take_units()[0]->id);
  asks = of(action_kind::walk);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].rank, 1u);
  ops({ev(1)}, 0);
  EXPECT_TRUE(take_units().empty()) << "rank 1 still holds 1";
  EXPECT_EQ(p->held_keys(), 2u) << "a server's clear does not change what the ranks hold";
  serve();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(fps_added(*u[0]), (std::vector<uint64_t>{1, 2}));
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

TEST_F(Protocol, AZeroThresholdAndAZeroChunkAreOne) {  // DB2, WK1
  opts.flush_threshold = 0;
  opts.walk_chunk = 0;
  start();
  ops({up(1)});
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u) << "one add reaches a threshold of one: no window";
  ack(u[0]->id);
  shards[0].store(7);
  shards[0].store(8);
  p->on_reconnected("a", t, out);
  ack(take_units()[0]->id);  // the probe
  const auto a = walk_asks();
  ASSERT_EQ(a.size(), 1u) << "a chunk of none would be a walk that never asks";
  EXPECT_EQ(a[0].max, 1u);
}

TEST_F(Protocol, ARankNotSeenYetIsAtTheDecodersFirstEpoch) {  // DB1
  start();
  EXPECT_EQ(p->epoch(0), 1u);
  EXPECT_EQ(p->epoch(7), 1u);
}

TEST_F(Protocol, ATargetThatLeavesKeepsItsCountsInTheTotals) {
  start();
  ops({up(1)});
  window();
  fail(take_units()[0]->id);
  resync_timer();
  auto probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  fail(probe[0]->id);
  p->on_reconnected("a", t, out);  // probes at once (TD4)
  probe = take_units();
  ASSERT_EQ(probe.size(), 1u);
  ack(probe[0]->id);
  const counters before = p->stats();
  EXPECT_EQ(before.units_failed, 2u);
  EXPECT_EQ(before.probes_failed, 1u);
  EXPECT_EQ(before.reconnects, 1u);
  EXPECT_EQ(before.resyncs, 1u);
  p->on_targets({"b"}, t, out);
  const counters after = p->stats();
  EXPECT_EQ(after.units_failed, before.units_failed);
  EXPECT_EQ(after.probes_failed, before.probes_failed);
  EXPECT_EQ(after.reconnects, before.reconnects);
  EXPECT_EQ(after.resyncs, before.resyncs);
}

// What a target that left had superseded (units offered while it was unreachable) stays counted.
TEST_F(Protocol, ATargetThatLeavesKeepsItsSupersededEntriesInTheTotals) {
  start();
  p->on_targets({"a", "b"}, t, out);
  for (const auto& a : of(action_kind::send_unit))  // b joined after the start clear: a probe
    if (a.target == "b") p->on_result(emit_result{"b", a.unit->id, true, 0, true, ""}, t, out);
  out.clear();
  ops({up(1)});
  window();
  const auto u = take_units();
  ASSERT_EQ(u.size(), 2u) << "one unit, to both";
  p->on_result(emit_result{"a", u[0]->id, false, 1, true, "UNAVAILABLE"}, t, out);
  p->on_result(emit_result{"b", u[0]->id, true, 0, true, ""}, t, out);
  const uint64_t own = p->stats().superseded;
  ops({up(2), up(3)});  // b takes them; a, unreachable, supersedes them
  window();
  const counters before = p->stats();
  ASSERT_EQ(before.superseded, own + 2);
  p->on_targets({"b"}, t, out);
  EXPECT_EQ(p->stats().superseded, before.superseded);
}

// The probe delays of target "a" through an outage whose every probe fails (TD4).
std::vector<uint64_t> outage_delays(Protocol& f) {
  f.start();
  f.ops({up(1)});
  f.window();
  f.fail(f.take_units()[0]->id);
  std::vector<uint64_t> d;
  for (int i = 0; i < 5; ++i) {
    d.push_back(f.resync_timer());
    auto probe = f.take_units();
    if (probe.size() != 1) {
      ADD_FAILURE() << "no probe after delay " << i;
      break;
    }
    f.out.clear();
    f.fail(probe[0]->id);
  }
  return d;
}

TEST_F(Protocol, ASeedRepeatsTheTargetsJitterAndSeedZeroIsRandom) {  // TD4
  opts.seed = 1;  // the smallest seed: 1 is a seed like any other, only 0 means none
  const auto a = outage_delays(*this);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a, outage_delays(*this)) << "the same seed, the same delays";
  // Seed 0 draws a random seed per target: five delays picked from 251, 501, 1001, 2001 and
  // 4001 values all match by chance with a probability below 1e-15.
  opts.seed = 0;
  EXPECT_NE(outage_delays(*this), outage_delays(*this));
}

TEST_F(Protocol, StartArmsTheRefresh) {  // WK5
  opts.refresh_interval = ms(30'000);
  p.emplace(opts);
  p->start(t, out);
  EXPECT_EQ(of(action_kind::arm_refresh).size(), 1u);
}

// What a target that is not live drops (TD1) is in the totals: the entries it will not get.
TEST_F(Protocol, EntriesATargetInAResyncDropsAreCountedSuperseded) {  // TD1
  start();
  p->on_targets({"a", "b"}, t, out);  // b joins with a probe: not live until it answers
  take_units();
  ops({up(1), up(2)});
  window();
  ASSERT_EQ(take_units().size(), 1u) << "for a";
  EXPECT_EQ(p->stats().superseded, 2u) << "b's two entries";
}

TEST_F(Protocol, ATargetThatLeavesIsLoggedByName) {
  start();
  p->on_targets({"b"}, t, out);
  size_t removed = 0;
  for (const auto& a : of(action_kind::log)) {
    if (a.line.message != "policy server target removed") continue;
    ++removed;
    const auto* v = a.line.find("target");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, "a");
  }
  EXPECT_EQ(removed, 1u);
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

// DB18, SR4: the mirror past its bound (max_pending) is counted in the protocol's totals.
TEST_F(Protocol, DB18_AMirrorPastItsBoundIsCounted) {
  opts.repair_base_sweeps = true;
  opts.max_pending = 2;
  start();
  p->on_ops(0, adapter_batch("sql", {up(1), up(2)}), t, out);
  window();
  auto u = take_units();
  ASSERT_EQ(u.size(), 1u);
  ack(u[0]->id);
  EXPECT_EQ(p->stats().sweep_repair_overflows, 0u);
  p->on_ops(0, adapter_batch("sql", {up(3)}), t, out);
  window();
  u = take_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(p->stats().sweep_repair_overflows, 1u);
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

// DB5, DB15: a first holder's add keeps the shard's `introduces`: with its eviction in the same
// window neither goes (the server never saw the key).
TEST_F(Merged, AFirstHoldersIntroducedAddAndItsEvictionSendNothing) {
  start({});
  join(0);
  join(1);
  ops({up(1, true)}, 0);
  ops({ev(1)}, 0);
  EXPECT_TRUE(take_units().empty());
  EXPECT_EQ(p->pending().size(), 0u);
  EXPECT_EQ(p->held_keys(), 0u);
}

// WK5, IW5: a refresh pass over several ranks learns each rank's count with one block. A rank of
// one block ahead of a rank of a hundred once made the pass wait two intervals for the second.
TEST_F(Merged, WK5_ARefreshPassLearnsEachRanksCountBeforePacingByIt) {
  opts.refresh_interval = ms(600'000);
  opts.walk_chunk = 100;
  start({});
  join(0);
  join(1);
  shards[0].store(1);
  for (uint64_t k = 2; k <= 101; ++k) shards[1].store(k);
  p->on_refresh_timer(t, out);  // first seen
  t.steady_ms += 600'000;
  p->on_refresh_timer(t, out);
  ASSERT_EQ(p->walks().count("a"), 1u);
  ASSERT_EQ(serve(), 1u) << "rank 0's one block: that rank is done";
  for (auto& u : take_units()) ack(u->id);
  const auto asks = walk_asks();
  ASSERT_EQ(asks.size(), 1u) << "rank 1 is asked at once, not after its share grew past 1";
  EXPECT_EQ(asks[0].rank, 1u);
  EXPECT_EQ(asks[0].max, 1u);
  out.clear();
  p->on_refresh_timer(t, out);
  ASSERT_EQ(of(action_kind::arm_refresh).size(), 1u);
  EXPECT_EQ(of(action_kind::arm_refresh)[0].delay, ms(1'000)) << "still learning: soon";
}

}  // namespace
}  // namespace kvrelay::debounce
