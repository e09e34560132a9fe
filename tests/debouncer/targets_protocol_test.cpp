// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The debouncer with several policy server targets (debouncer_protocol.hpp DB7-DB12, WK1-WK6):
// each target's stream on its own, a walk of the index for one target alone, readiness policies.
// A model server per target applies what it is sent, so each test checks what every server
// ends up holding, the way the end-to-end tests check a real one.
#include "actors/debouncer/debouncer_protocol.hpp"

#include <gtest/gtest.h>

#include "tests/debouncer/model_shard.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace kvrelay::debounce {
namespace {

prefix_op up(uint64_t fp) { return prefix_op{prefix_op::kind::upsert, fp, 16, tier::t1}; }
prefix_op ev(uint64_t fp) { return prefix_op{prefix_op::kind::evict, fp, 16, tier::t1}; }

// One policy server: what it holds after the units it acknowledged, in the order sent.
struct model_server {
  std::set<uint64_t> keys;
  std::vector<emit_unit_ptr> unanswered;
  size_t units = 0;
  size_t clears = 0;
  void apply(const emit_unit& u) {
    ++units;
    if (u.clear) {
      keys.clear();
      ++clears;
    }
    for (const auto& a : u.adds) keys.insert(a.fingerprint);
    for (const auto& g : u.downgrades)
      for (const auto& a : g.entries) keys.insert(a.fingerprint);
    for (const auto& e : u.evicts) keys.erase(e.fingerprint);
  }
};

struct Targets : ::testing::Test {
  options opts;
  std::optional<protocol> p;
  moment t{1'000'000, 5'000'000};
  actions out;
  std::map<std::string, model_server> servers;
  std::set<std::string> down;     // these fail every unit
  std::set<std::string> stalled;  // these never answer
  std::set<uint64_t> engine;      // what the engine holds
  std::vector<bool> told;         // every health fact, in order
  std::vector<bool> drained;      // every drain answer, in order
  size_t walk_chunks = 0;

  void SetUp() override {
    opts.refresh_interval = ms(0);
    opts.seed = 42;
    opts.shutdown_clear = false;
    opts.window = ms(10);
  }
  void start(std::vector<std::string> names = {"a", "b", "c"}) {
    p.emplace(opts);
    p->start(t, out);
    p->on_emitter(t, out);
    p->on_targets(names, t, out);
    p->on_decoder(0, t, out);
    settle();
  }
  // The engine changed: ops to the debouncer, the engine model follows.
  void ops(std::vector<prefix_op> v, bool resync = false) {
    for (const auto& o : v) {
      if (o.op == prefix_op::kind::upsert) engine.insert(o.fingerprint);
      else engine.erase(o.fingerprint);
    }
    shard_ops s;
    s.epoch = p->epoch(0);
    s.ts_us = t.wall_us;
    s.had_store = true;
    s.resync = resync;
    s.ops = std::move(v);
    p->on_ops(0, s, t, out);
  }
  void clear() {
    engine.clear();
    p->on_clear(0, p->epoch(0) + 1, t.wall_us, t, out);
  }
  // Runs every action until nothing moves: servers answer (or fail, or stall), windows and
  // resync timers fire, re-reports come from the engine model.
  void settle(int rounds = 50) {
    for (int i = 0; i < rounds && !out.empty(); ++i) {
      auto now = std::exchange(out, {});
      for (auto& a : now) {
        switch (a.kind) {
          case action_kind::send_unit: {
            if (stalled.count(a.target)) {
              servers[a.target].unanswered.push_back(a.unit);
              break;
            }
            const bool ok = down.count(a.target) == 0;
            if (ok) servers[a.target].apply(*a.unit);
            p->on_result(emit_result{a.target, a.unit->id, ok, ok ? 0u : 1u, true,
                                     ok ? "" : "UNAVAILABLE"},
                         t, out);
            break;
          }
          case action_kind::arm_flush:
            p->on_flush_timer(a.gen, t, out);
            break;
          case action_kind::health:
            told.push_back(a.ok);
            break;
          case action_kind::answer_drains:
            drained.push_back(a.ok);
            break;
          case action_kind::arm_resync:
            t.steady_ms += a.delay.count();
            p->on_resync_timer(a.gen, t, out);
            break;
          case action_kind::walk: {  // the shard reads the engine's state now
            model_shard shard;
            shard.epoch = p->epoch(0);
            for (auto fp : engine) shard.store(fp);
            ++walk_chunks;
            p->on_ops(0, shard.answer(a.ask), t, out);
            break;
          }
          default:
            break;
        }
      }
    }
  }
  // Answers what a stalled target was sent, in order, and lets it work again.
  void unstall(const std::string& name) {
    stalled.erase(name);
    auto& s = servers[name];
    for (auto& u : std::exchange(s.unanswered, {})) {
      s.apply(*u);
      p->on_result(emit_result{name, u->id, true, 0, true, ""}, t, out);
    }
    settle();
  }
  void exact(const std::string& name) {
    EXPECT_EQ(servers[name].keys, engine) << name << " holds what the engine holds";
  }
};

TEST_F(Targets, EveryUnitReachesEveryTarget) {  // DB8
  start();
  ops({up(1), up(2), ev(1)});
  settle();
  for (const auto& n : {"a", "b", "c"}) {
    exact(n);
    EXPECT_EQ(servers[n].clears, 1u) << "the start's clear";
  }
  EXPECT_EQ(p->stats().units_sent, servers["a"].units) << "each unit taken once, sent to each";
}

TEST_F(Targets, AStalledTargetNeverHoldsTheOthersBackAndCatchesUpWithinItsBound) {  // DB8, TD1
  start();
  stalled.insert("c");
  for (uint64_t i = 1; i <= 20; ++i) {
    ops({up(i)});
    settle();
    exact("a");
    exact("b");
  }
  EXPECT_GT(p->targets().at("c").queued_units(), 0u);
  unstall("c");
  exact("c");
}

TEST_F(Targets, AStalledTargetPastItsLagBoundIsReReportedInFullWhenItAnswers) {  // TD2, WK1
  opts.target.max_lag_bytes = 2048;
  start();
  stalled.insert("c");
  for (uint64_t i = 1; i <= 40; ++i) {
    ops({up(i), ev(i > 3 ? i - 3 : 0)});
    settle();
  }
  EXPECT_EQ(p->targets().at("c").queued_units(), 0u) << "stopped queueing";
  EXPECT_GE(p->targets().at("c").stats().lag_overflows, 1u);
  const size_t a_units = servers["a"].units;
  unstall("c");
  exact("c");
  exact("a");
  EXPECT_EQ(servers["a"].units, a_units) << "the others see nothing of c's re-report";
  EXPECT_EQ(servers["a"].clears, 1u);
}

TEST_F(Targets, ATargetThatRestartedEmptyGetsTheWholeIndexAndTheOthersNothingExtra) {  // WK1
  start();
  ops({up(1), up(2), up(3)});
  settle();
  servers["b"].keys.clear();  // restarted empty
  const size_t a_units = servers["a"].units;
  p->on_reconnected("b", t, out);
  settle();
  exact("b");
  EXPECT_EQ(servers["b"].clears, 2u);
  EXPECT_EQ(servers["a"].units, a_units);
  EXPECT_TRUE(p->walks().empty()) << "the walk ended";
}

TEST_F(Targets, AWalkKeepsEachTargetsOrder) {  // WK2: the chunk, then every later change
  start();
  ops({up(1), up(2)});
  settle();
  servers["b"].keys.clear();
  p->on_reconnected("b", t, out);
  // The probe goes; before the walk reads the index, 1 is evicted and 4 added (pending); the
  // chunk (without 1, with 4) comes; then 4 is evicted.
  auto first = std::exchange(out, {});
  for (auto& a : first) {
    if (a.kind != action_kind::send_unit) continue;
    servers[a.target].apply(*a.unit);
    p->on_result(emit_result{a.target, a.unit->id, true, 0, true, ""}, t, out);
  }
  ops({ev(1), up(4)});
  settle();
  ops({ev(4)});
  settle();
  for (const auto& n : {"a", "b", "c"}) exact(n);
}

TEST_F(Targets, AddEvictAddAcrossOneTargetsOutage) {
  start();
  ops({up(7)});
  settle();
  down.insert("b");
  ops({ev(7)});
  settle();
  ops({up(7)});
  settle();
  exact("a");
  exact("c");
  EXPECT_FALSE(p->targets().at("b").healthy());
  down.erase("b");
  p->on_reconnected("b", t, out);
  settle();
  for (const auto& n : {"a", "b", "c"}) exact(n);
}

TEST_F(Targets, AClearWhileOneTargetIsDownReachesItAfterItsOutage) {  // DB14 per target
  start();
  ops({up(1), up(2)});
  settle();
  down.insert("c");
  ops({up(3)});
  settle();
  clear();
  ops({up(5)});
  settle();
  exact("a");
  exact("b");
  down.erase("c");
  settle();  // the backoff's probe
  for (int i = 0; i < 5 && !p->targets().at("c").healthy(); ++i) {
    p->on_reconnected("c", t, out);
    settle();
  }
  exact("c");
}

TEST_F(Targets, JoiningBeforeAnythingWasSentIsLiveJoiningLaterResyncs) {  // DB7
  p.emplace(opts);
  p->start(t, out);
  p->on_emitter(t, out);
  p->on_decoder(0, t, out);
  ops({up(1)});
  settle();
  EXPECT_EQ(p->stats().units_sent, 0u) << "no target: nothing taken";
  p->on_targets({"a"}, t, out);
  settle();
  exact("a");
  EXPECT_EQ(servers["a"].clears, 1u) << "the start's clear, no resync";
  p->on_targets({"a", "d"}, t, out);
  settle();
  exact("d");
  EXPECT_EQ(servers["d"].clears, 1u) << "its probe";
  EXPECT_EQ(servers["a"].clears, 1u);
  p->on_targets({"d"}, t, out);
  EXPECT_EQ(p->targets().count("a"), 0u);
  ops({up(2)});
  settle();
  exact("d");
}

TEST_F(Targets, ReadinessFollowsThePolicy) {  // DB12, TD9
  const std::map<readiness_policy, std::vector<bool>> expected{
      {readiness_policy::any, {true}},             // ready while one of three is up
      {readiness_policy::all, {true, false}},      // not ready once one is down
      {readiness_policy::quorum, {true, false}}};  // not ready once two are down
  for (const auto& [policy, want] : expected) {
    opts.readiness = policy;
    down.clear();
    servers.clear();
    told.clear();
    out.clear();
    start();
    ops({up(1)});
    settle();
    down.insert("a");
    ops({ev(1)});
    settle();
    if (policy == readiness_policy::quorum) {
      EXPECT_EQ(told, std::vector<bool>{true});
    }
    down.insert("b");
    ops({up(2)});
    settle();
    EXPECT_EQ(told, want) << to_string(policy);
  }
}

TEST_F(Targets, ShutdownClearGoesToEveryTargetAndTheAnswerNeedsEveryAck) {  // DB16
  opts.shutdown_clear = true;
  start();
  ops({up(1)});
  settle();
  stalled.insert("b");
  p->on_drain(t, out);
  settle();
  EXPECT_EQ(servers["a"].keys.size(), 0u);
  EXPECT_TRUE(drained.empty()) << "b has not answered";
  unstall("b");
  EXPECT_EQ(drained, std::vector<bool>{true});
  EXPECT_EQ(servers["b"].keys.size(), 0u);
}

}  // namespace
}  // namespace kvrelay::debounce
