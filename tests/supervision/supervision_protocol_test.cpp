// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The supervisor's restart and teardown policy, driven directly
// (supervision/supervision_protocol.hpp, rules 1-10): no actors, no clock but the one the test
// passes in.

#include <gtest/gtest.h>

#include <algorithm>

#include "supervision/supervision_protocol.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;
using proto = supervision_protocol;
using type = proto::action::type;
using clock_t_ = proto::clock;

proto::options opts(bool scraper = true) {
  proto::options o;
  o.backoff_min = 100ms;
  o.backoff_max = 10'000ms;
  o.unhealthy_backoff = 30'000ms;
  o.max_restarts = 5;
  o.restart_window = 60'000ms;
  o.teardown_deadline = 3'000ms;
  o.has_scraper = scraper;
  o.pipeline = "p-0";
  o.seed = 7;
  return o;
}

// The actions without logs (logs are checked where they matter).
proto::actions no_logs(proto::actions a) {
  a.erase(std::remove_if(a.begin(), a.end(),
                         [](const proto::action& x) { return x.what == type::log; }),
          a.end());
  return a;
}

std::vector<type> types(const proto::actions& a) {
  std::vector<type> out;
  for (const auto& x : no_logs(a)) out.push_back(x.what);
  return out;
}

const proto::action* find(const proto::actions& a, type t) {
  for (const auto& x : a)
    if (x.what == t) return &x;
  return nullptr;
}

// A log action's field by key ("" when absent), and the log action with `message`.
std::string field_of(const proto::action& a, const std::string& key) {
  for (const auto& f : a.fields)
    if (f.key == key) return f.value;
  return {};
}
const proto::action* log_of(const proto::actions& a, const std::string& message) {
  for (const auto& x : a)
    if (x.what == type::log && x.message == message) return &x;
  return nullptr;
}

size_t count(const proto::actions& a, type t) {
  return static_cast<size_t>(
      std::count_if(a.begin(), a.end(), [t](const proto::action& x) { return x.what == t; }));
}

struct fixture {
  proto p{opts()};
  clock_t_::time_point now = clock_t_::time_point{} + 1000s;

  proto::actions down(actor_kind k, const std::string& why = "boom") {
    return p.child_down(k, p.live_incarnation(k), why, now);
  }
  // The teardown's DOWNs of the data path's first incarnation, then the scraper's; the types
  // of the last answer.
  std::vector<type> data_path_then_scraper_down() {
    for (auto k : {actor_kind::ingress, actor_kind::decoder, actor_kind::debouncer})
      p.child_down(k, 1, "", now);
    return types(p.child_down(actor_kind::scraper, 1, "", now));
  }
  // Fails `k`'s unit and fires its restart timer; returns the restart's delay.
  std::chrono::milliseconds crash_and_restart(actor_kind k) {
    auto a = down(k);
    const auto* r = find(a, type::schedule_restart);
    EXPECT_NE(r, nullptr);
    if (!r) return {};
    now += r->delay;
    auto s = p.restart_timer(r->unit, r->number, now);
    EXPECT_NE(find(s, type::spawn), nullptr) << "the timer must restart the unit";
    return r->delay;
  }
};

TEST(SupervisionProtocol, SV1_StartsEmitterThenDataPathThenScraper) {
  fixture f;
  auto a = no_logs(f.p.start(f.now));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].unit, pipeline_unit::emitter);
  EXPECT_EQ(a[1].unit, pipeline_unit::datapath);
  EXPECT_EQ(a[2].unit, pipeline_unit::scraper);
  for (const auto& x : a) {
    EXPECT_EQ(x.what, type::spawn);
    EXPECT_EQ(x.number, 1u);
  }
  proto no_scraper{opts(false)};
  EXPECT_EQ(types(no_scraper.start(f.now)), (std::vector<type>{type::spawn, type::spawn}));
  // Each unit's record says when its incarnation started (the admin tree's uptime).
  EXPECT_EQ(f.p.record(pipeline_unit::datapath).started, f.now);
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).incarnation, 1u);
}

TEST(SupervisionProtocol, SV3_AnEmitterRestartsAloneAfterItsBackoff) {
  fixture f;
  f.p.start(f.now);
  auto a = f.down(actor_kind::emitter, "rpc thread died");
  EXPECT_EQ(types(a), (std::vector<type>{type::schedule_restart}));
  const auto* r = find(a, type::schedule_restart);
  EXPECT_EQ(r->unit, pipeline_unit::emitter);
  EXPECT_GE(r->delay, 50ms);
  EXPECT_LE(r->delay, 100ms);
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).last_error, "rpc thread died");
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).restarts, 1);
  EXPECT_EQ(f.p.live_incarnation(actor_kind::ingress), 1u) << "the data path is untouched";

  auto s = no_logs(f.p.restart_timer(pipeline_unit::emitter, r->number, f.now + r->delay));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].what, type::spawn);
  EXPECT_EQ(s[0].unit, pipeline_unit::emitter);
  EXPECT_EQ(s[0].number, 2u);
  EXPECT_EQ(f.p.live_incarnation(actor_kind::emitter), 2u);
}

TEST(SupervisionProtocol, SV3_ADataPathMemberTakesTheWholeUnitDown) {
  fixture f;
  f.p.start(f.now);
  auto a = no_logs(f.down(actor_kind::decoder));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].what, type::stop);
  EXPECT_EQ(a[0].child, actor_kind::ingress);
  EXPECT_EQ(a[1].what, type::stop);
  EXPECT_EQ(a[1].child, actor_kind::debouncer);
  EXPECT_EQ(a[2].what, type::schedule_restart);
  EXPECT_EQ(a[2].unit, pipeline_unit::datapath);
  EXPECT_EQ(f.p.live_incarnation(actor_kind::emitter), 1u) << "side actors are untouched";
  EXPECT_EQ(f.p.live_incarnation(actor_kind::scraper), 1u);

  // The stopped members' DOWNs follow: the unit is already down, nothing more happens.
  EXPECT_TRUE(f.p.child_down(actor_kind::ingress, 1, "user_shutdown", f.now).empty());
  EXPECT_TRUE(f.p.child_down(actor_kind::debouncer, 1, "user_shutdown", f.now).empty());
  EXPECT_EQ(f.p.record(pipeline_unit::datapath).restarts, 1) << "one restart for the unit";
}

TEST(SupervisionProtocol, SV2_ADownForAChildAlreadyReplacedIsIgnored) {
  fixture f;
  f.p.start(f.now);
  f.crash_and_restart(actor_kind::emitter);
  ASSERT_EQ(f.p.live_incarnation(actor_kind::emitter), 2u);
  // A second DOWN of incarnation 1 (monitored twice, or queued behind the restart).
  EXPECT_TRUE(f.p.child_down(actor_kind::emitter, 1, "late", f.now).empty());
  EXPECT_EQ(f.p.live_incarnation(actor_kind::emitter), 2u);
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).restarts, 1);
  EXPECT_NE(f.p.record(pipeline_unit::emitter).last_error, "late");
  // A data path restarted after a crash: the old members' DOWNs are stale as well.
  f.crash_and_restart(actor_kind::debouncer);
  EXPECT_TRUE(f.p.child_down(actor_kind::ingress, 1, "user_shutdown", f.now).empty());
  EXPECT_EQ(f.p.live_incarnation(actor_kind::ingress), 2u);
}

TEST(SupervisionProtocol, SV4_BackoffDoublesWithJitterUpToItsCap) {
  fixture f;
  f.p.start(f.now);
  std::chrono::milliseconds ceiling{100};
  for (int i = 0; i < 5; ++i) {
    auto d = f.crash_and_restart(actor_kind::scraper);
    EXPECT_GE(d, ceiling / 2) << "restart " << i + 1;
    EXPECT_LE(d, ceiling) << "restart " << i + 1;
    ceiling *= 2;
  }
  EXPECT_FALSE(f.p.unhealthy()) << "five restarts are within the limit";
}

TEST(SupervisionProtocol, SV4_AStaleOrRepeatedRestartTimerIsIgnored) {
  fixture f;
  f.p.start(f.now);
  auto a = f.down(actor_kind::emitter);
  const auto* r = find(a, type::schedule_restart);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(f.p.restart_timer(pipeline_unit::emitter, r->number + 1, f.now).empty());
  EXPECT_TRUE(f.p.restart_timer(pipeline_unit::scraper, r->number, f.now).empty())
      << "a timer for a unit that is up";
  EXPECT_NE(find(f.p.restart_timer(pipeline_unit::emitter, r->number, f.now), type::spawn),
            nullptr);
  EXPECT_TRUE(f.p.restart_timer(pipeline_unit::emitter, r->number, f.now).empty())
      << "the same timer twice";
  EXPECT_EQ(f.p.live_incarnation(actor_kind::emitter), 2u);
}

TEST(SupervisionProtocol, SV5_RestartIntensityExceededMarksUnhealthyAndRetriesSlowly) {
  fixture f;
  f.p.start(f.now);
  for (int i = 0; i < 5; ++i) f.crash_and_restart(actor_kind::ingress);
  EXPECT_FALSE(f.p.unhealthy());
  auto a = f.down(actor_kind::ingress, "endpoint unusable");
  EXPECT_EQ(count(a, type::mark_unhealthy), 1u);
  const auto* r = find(a, type::schedule_restart);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->delay, 30'000ms) << "slow retry";
  const auto* err = find(a, type::log);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->level, log::level::error);
  EXPECT_TRUE(f.p.unhealthy());
  EXPECT_TRUE(f.p.record(pipeline_unit::datapath).unhealthy);
  EXPECT_FALSE(f.p.record(pipeline_unit::emitter).unhealthy) << "per unit";

  // Still failing: slow retries, no second transition.
  f.now += r->delay;
  f.p.restart_timer(pipeline_unit::datapath, r->number, f.now);
  a = f.down(actor_kind::ingress);
  EXPECT_EQ(count(a, type::mark_unhealthy), 0u);
  EXPECT_EQ(find(a, type::schedule_restart)->delay, 30'000ms);
  EXPECT_EQ(f.p.record(pipeline_unit::datapath).restarts, 7);
}

TEST(SupervisionProtocol, SV5_RestartsSpreadOverMoreThanTheWindowNeverMarkUnhealthy) {
  fixture f;
  f.p.start(f.now);
  for (int i = 0; i < 12; ++i) {
    f.crash_and_restart(actor_kind::emitter);
    f.now += 15s;  // ~4 restarts per 60 s window
  }
  EXPECT_FALSE(f.p.unhealthy());
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).restarts, 12);
}

TEST(SupervisionProtocol, SV6_AUnitUpForAWindowAfterBeingUnhealthyIsHealthyAgain) {
  fixture f;
  f.p.start(f.now);
  for (int i = 0; i < 6; ++i) f.crash_and_restart(actor_kind::emitter);
  ASSERT_TRUE(f.p.unhealthy());
  // The last restart (while unhealthy) asked for a stable check; the timer comes a window later.
  auto a = f.down(actor_kind::emitter);
  const auto* r = find(a, type::schedule_restart);
  f.now += r->delay;
  auto s = f.p.restart_timer(pipeline_unit::emitter, r->number, f.now);
  const auto* stable = find(s, type::schedule_stable);
  ASSERT_NE(stable, nullptr);
  EXPECT_EQ(stable->delay, 60'000ms);
  EXPECT_EQ(stable->unit, pipeline_unit::emitter);
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).started, f.now) << "the new incarnation's start";
  // A stable timer of an older incarnation changes nothing.
  EXPECT_TRUE(f.p.stable_timer(pipeline_unit::emitter, stable->number - 1).empty());
  EXPECT_TRUE(f.p.unhealthy());
  auto h = f.p.stable_timer(pipeline_unit::emitter, stable->number);
  EXPECT_EQ(count(h, type::mark_healthy), 1u);
  EXPECT_FALSE(f.p.unhealthy());
  // The count starts over: the next crash waits the short backoff again.
  a = f.down(actor_kind::emitter);
  EXPECT_LE(find(a, type::schedule_restart)->delay, 100ms);
}

TEST(SupervisionProtocol, SV6_AStableTimerAfterTheUnitFailedAgainDoesNothing) {
  fixture f;
  f.p.start(f.now);
  for (int i = 0; i < 6; ++i) f.crash_and_restart(actor_kind::emitter);
  auto a = f.down(actor_kind::emitter);
  f.now += find(a, type::schedule_restart)->delay;
  auto s = f.p.restart_timer(pipeline_unit::emitter, find(a, type::schedule_restart)->number,
                             f.now);
  const uint64_t inc = find(s, type::schedule_stable)->number;
  f.down(actor_kind::emitter);  // fails again before the window is over
  EXPECT_TRUE(f.p.stable_timer(pipeline_unit::emitter, inc).empty());
  EXPECT_TRUE(f.p.unhealthy());
}

TEST(SupervisionProtocol, SV7_NothingRestartsWhileDraining) {
  fixture f;
  f.p.start(f.now);
  auto a = f.down(actor_kind::scraper);  // a restart is pending when the drain begins
  const auto* r = find(a, type::schedule_restart);
  ASSERT_NE(r, nullptr);
  const auto gen = r->number;
  f.p.drain_begun();
  auto b = f.down(actor_kind::debouncer, "drained badly");
  EXPECT_EQ(find(b, type::schedule_restart), nullptr);
  EXPECT_EQ(count(b, type::stop), 2u) << "the unit still goes down as one";
  EXPECT_EQ(f.p.record(pipeline_unit::datapath).last_error, "drained badly");
  EXPECT_TRUE(no_logs(f.p.restart_timer(pipeline_unit::scraper, gen, f.now)).empty());
  EXPECT_EQ(f.p.live_incarnation(actor_kind::scraper), 0u);
}

TEST(SupervisionProtocol, SV8_TeardownStopsChildrenOneByOneUpstreamFirst) {
  fixture f;
  f.p.start(f.now);
  auto a = no_logs(f.p.teardown_requested());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].what, type::schedule_deadline);
  EXPECT_EQ(a[0].delay, 3'000ms);
  EXPECT_EQ(a[1].what, type::stop);
  EXPECT_EQ(a[1].child, actor_kind::ingress);
  const actor_kind order[] = {actor_kind::ingress, actor_kind::decoder, actor_kind::debouncer,
                              actor_kind::scraper, actor_kind::emitter};
  for (size_t i = 0; i + 1 < std::size(order); ++i) {
    auto next = no_logs(f.p.child_down(order[i], 1, "user_shutdown", f.now));
    ASSERT_EQ(next.size(), 1u) << i;
    EXPECT_EQ(next[0].what, type::stop);
    EXPECT_EQ(next[0].child, order[i + 1]);
  }
  EXPECT_EQ(types(f.p.child_down(actor_kind::emitter, 1, "user_shutdown", f.now)),
            (std::vector<type>{type::quit}));
  EXPECT_TRUE(f.p.teardown_deadline().empty()) << "the deadline after quitting does nothing";
  EXPECT_TRUE(f.p.teardown_requested().empty());
}

TEST(SupervisionProtocol, SV8_ARestartTimerAfterTeardownBeganSpawnsNothing) {
  fixture f;
  f.p.start(f.now);
  auto a = f.down(actor_kind::emitter);
  const auto* r = find(a, type::schedule_restart);
  ASSERT_NE(r, nullptr);
  const auto gen = r->number;
  auto t = f.p.teardown_requested();
  EXPECT_EQ(find(t, type::stop)->child, actor_kind::ingress);
  EXPECT_TRUE(f.p.restart_timer(pipeline_unit::emitter, gen, f.now + 1s).empty());
  EXPECT_EQ(f.p.live_incarnation(actor_kind::emitter), 0u);
  // The emitter is not in the teardown queue: the scraper's DOWN ends it.
  EXPECT_EQ(f.data_path_then_scraper_down(), (std::vector<type>{type::quit}));
}

TEST(SupervisionProtocol, SV8_AChildDyingOnItsOwnDuringTeardownLeavesTheQueue) {
  fixture f;
  f.p.start(f.now);
  f.p.teardown_requested();  // stopping the ingress
  // The emitter crashes meanwhile: no restart, and it will not be stopped later.
  auto a = f.p.child_down(actor_kind::emitter, 1, "crash", f.now);
  EXPECT_TRUE(no_logs(a).empty());
  EXPECT_EQ(f.data_path_then_scraper_down(), (std::vector<type>{type::quit}));
}

TEST(SupervisionProtocol, SV8_TeardownWithNothingAliveQuitsAtOnce) {
  proto p{opts(false)};
  const auto now = clock_t_::time_point{} + 5s;
  p.start(now);
  p.child_down(actor_kind::emitter, 1, "x", now);
  p.child_down(actor_kind::decoder, 1, "x", now);  // stops ingress and debouncer
  EXPECT_EQ(types(p.teardown_requested()), (std::vector<type>{type::quit}));
}

TEST(SupervisionProtocol, SV9_TeardownWithAChildThatNeverGoesDownKillsItAtTheDeadline) {
  fixture f;
  f.p.start(f.now);
  f.p.teardown_requested();
  f.p.child_down(actor_kind::ingress, 1, "", f.now);  // the decoder is stopped next ...
  // ... and never goes down.
  auto a = f.p.teardown_deadline();
  std::vector<actor_kind> killed;
  for (const auto& x : a)
    if (x.what == type::kill) killed.push_back(x.child);
  EXPECT_EQ(killed, (std::vector<actor_kind>{actor_kind::decoder, actor_kind::debouncer,
                                             actor_kind::scraper, actor_kind::emitter}));
  EXPECT_EQ(no_logs(a).back().what, type::quit);
  const auto* warn = find(a, type::log);
  ASSERT_NE(warn, nullptr);
  EXPECT_EQ(warn->level, log::level::warn);
  // Their DOWNs, if they ever come, change nothing.
  EXPECT_TRUE(f.p.child_down(actor_kind::decoder, 1, "killed", f.now).empty());
  EXPECT_TRUE(f.p.teardown_deadline().empty());
}

// Every log action names its pipeline and says what happened, with the unit and the reason.
TEST(SupervisionProtocol, LogsNameThePipelineAndWhatHappened) {
  fixture f;
  f.p.start(f.now);
  auto a = f.down(actor_kind::emitter, "rpc thread died");
  const auto* l = log_of(a, "actor failed; restarting");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->level, log::level::warn);
  EXPECT_EQ(field_of(*l, "pipeline"), "p-0");
  EXPECT_EQ(field_of(*l, "unit"), "emitter");
  EXPECT_EQ(field_of(*l, "err"), "rpc thread died");
  const auto* r = find(a, type::schedule_restart);
  ASSERT_NE(r, nullptr);
  f.now += r->delay;
  a = f.p.restart_timer(pipeline_unit::emitter, r->number, f.now);
  l = log_of(a, "actor restarted");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(field_of(*l, "pipeline"), "p-0");
  EXPECT_EQ(field_of(*l, "restarts"), "1");
  for (int i = 0; i < 4; ++i) f.crash_and_restart(actor_kind::emitter);
  a = f.down(actor_kind::emitter, "still dying");  // the sixth within the window
  l = log_of(a, "pipeline keeps failing; marked unhealthy, retrying slowly");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->level, log::level::error);
  EXPECT_EQ(field_of(*l, "last_error"), "still dying");
  EXPECT_EQ(field_of(*l, "retry_ms"), "30000");
  // The teardown deadline names every child it killed.
  f.p.teardown_requested();
  a = f.p.teardown_deadline();
  l = log_of(a, "children did not stop in time; killed");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(field_of(*l, "pipeline"), "p-0");
  EXPECT_EQ(field_of(*l, "children"), "ingress,decoder,debouncer,scraper")
      << "the emitter was down, waiting for its restart";
}

// Stops and kills name the incarnation they are for, so the shell never stops a newer actor.
TEST(SupervisionProtocol, SV2_StopsAndKillsNameTheCurrentIncarnation) {
  fixture f;
  f.p.start(f.now);
  f.crash_and_restart(actor_kind::decoder);  // the data path is incarnation 2 now
  auto a = no_logs(f.down(actor_kind::decoder));
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a[i].what, type::stop);
    EXPECT_EQ(a[i].number, 2u) << i;
  }
  f.now += a[2].delay;
  ASSERT_NE(find(f.p.restart_timer(pipeline_unit::datapath, a[2].number, f.now), type::spawn),
            nullptr);  // 3
  auto t = no_logs(f.p.teardown_requested());
  ASSERT_EQ(t.back().what, type::stop);
  EXPECT_EQ(t.back().child, actor_kind::ingress);
  EXPECT_EQ(t.back().number, 3u);
  auto k = f.p.teardown_deadline();
  for (const auto& x : k) {
    if (x.what != type::kill) continue;
    const bool side = x.child == actor_kind::emitter || x.child == actor_kind::scraper;
    EXPECT_EQ(x.number, side ? 1u : 3u) << to_string(x.child);
  }
}

// The window is inclusive: a restart exactly one window after the first still counts with it.
TEST(SupervisionProtocol, SV5_TheWindowIncludesItsEdge) {
  fixture f;
  f.p.start(f.now);
  const auto first = f.now;
  f.crash_and_restart(actor_kind::emitter);
  for (int i = 0; i < 4; ++i) f.crash_and_restart(actor_kind::emitter);
  f.now = first + 60'000ms;  // the sixth failure, exactly a window after the first
  auto a = f.down(actor_kind::emitter);
  EXPECT_EQ(count(a, type::mark_unhealthy), 1u) << "six restarts within the window";
}

// A child that went down on its own during the teardown is no longer alive (and is not killed).
TEST(SupervisionProtocol, SV8_AChildDownDuringTeardownIsNotAliveAnyMore) {
  fixture f;
  f.p.start(f.now);
  f.p.teardown_requested();
  f.p.child_down(actor_kind::scraper, 1, "crash", f.now);
  EXPECT_EQ(f.p.live_incarnation(actor_kind::scraper), 0u);
  for (const auto& x : f.p.teardown_deadline())
    EXPECT_FALSE(x.what == type::kill && x.child == actor_kind::scraper);
}

// A second teardown request while one runs changes nothing: no second deadline, no stop twice.
TEST(SupervisionProtocol, SV8_ASecondTeardownRequestDoesNothing) {
  fixture f;
  f.p.start(f.now);
  ASSERT_FALSE(f.p.teardown_requested().empty());
  EXPECT_TRUE(f.p.teardown_requested().empty());
  // The order goes on as if asked once.
  auto next = no_logs(f.p.child_down(actor_kind::ingress, 1, "user_shutdown", f.now));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].child, actor_kind::decoder);
}

// A failed spawn counts only for the unit's current, live incarnation, and not in a teardown.
TEST(SupervisionProtocol, SV10_AStaleOrLateFailedSpawnIsIgnored) {
  fixture f;
  f.p.start(f.now);
  f.crash_and_restart(actor_kind::emitter);  // incarnation 2 is up
  EXPECT_TRUE(f.p.spawn_failed(pipeline_unit::emitter, 1, "old", f.now).empty());
  EXPECT_EQ(f.p.live_incarnation(actor_kind::emitter), 2u);
  f.p.teardown_requested();
  EXPECT_TRUE(f.p.spawn_failed(pipeline_unit::emitter, 2, "late", f.now).empty());
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).last_error, "boom") << "the crash's, not 'late'";
}

TEST(SupervisionProtocol, SV10_AFailedSpawnIsRetriedLikeACrash) {
  fixture f;
  f.p.start(f.now);
  f.down(actor_kind::emitter);
  auto a = f.p.restart_timer(pipeline_unit::emitter, 1, f.now + 1s);
  ASSERT_NE(find(a, type::spawn), nullptr);
  auto b = f.p.spawn_failed(pipeline_unit::emitter, 2, "cannot read ca_file", f.now + 1s);
  EXPECT_EQ(types(b), (std::vector<type>{type::schedule_restart}));
  EXPECT_EQ(f.p.record(pipeline_unit::emitter).last_error, "cannot read ca_file");
  EXPECT_EQ(f.p.live_incarnation(actor_kind::emitter), 0u);
  EXPECT_TRUE(f.p.spawn_failed(pipeline_unit::emitter, 2, "again", f.now + 1s).empty())
      << "reported twice";
}

}  // namespace
}  // namespace kvrelay
