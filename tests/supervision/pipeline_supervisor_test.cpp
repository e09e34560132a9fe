// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The supervisor's actor shell under the deterministic scheduler: fake children stand in for the
// real actors (through the pipeline_children seam), the test crashes them and moves the clock.
// The rules themselves are tested on the pure protocol (supervision_protocol_test.cpp); here:
// the shell executes them (spawns, stops, timers, teardown order, kill), routes crashes by kind,
// tells the debouncer about a new emitter, and reports its drain.

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/message_view.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <map>
#include <memory>

#include "base/memory_budget.hpp"
#include "base/metrics_registry.hpp"
#include "supervision/pipeline_supervisor.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;
using testing::deterministic_system;

// Everything the fake children saw, in order, across incarnations.
struct world {
  std::vector<std::string> spawned;        // "emitter", "ingress", ... per spawn
  std::vector<std::string> exits;          // "<kind>" when an exit message arrived
  std::map<std::string, caf::actor> live;  // the latest of each kind
  std::map<std::string, std::vector<caf::message>> got;
  std::string stubborn;                    // this kind ignores user_shutdown (not kill)
  std::string mute;                        // this kind never answers a drain
  int64_t resident = 7;                    // what fake shards report
};

// A child: records messages, answers drain (true) and status, and goes down on an exit unless
// it is the stubborn kind (kill always works: CAF does not let an actor trap it).
caf::actor spawn_child(caf::actor_system& sys, std::shared_ptr<world> w, const std::string& kind) {
  w->spawned.push_back(kind);
  auto hdl = sys.spawn([w, kind](caf::event_based_actor* self) -> caf::behavior {
    self->set_exit_handler([=](caf::exit_msg& m) {
      w->exits.push_back(kind);
      if (kind != w->stubborn || m.reason == caf::exit_reason::kill) self->quit(m.reason);
    });
    self->set_default_handler(
        [w, kind](caf::scheduled_actor* me, caf::message_view& x) -> caf::result<caf::message> {
          auto msg = x.move_content_to_message();
          w->got[kind].push_back(msg);
          if (msg.match_elements<atom::crash>()) {  // what the real actors do: die with an error
            me->quit(caf::make_error(caf::sec::runtime_error, "boom"));
            return caf::message{};
          }
          if (msg.match_element<atom::drain>(0))
            return kind == w->mute ? caf::result<caf::message>(caf::skip)
                                   : caf::result<caf::message>(caf::make_message(true));
          if (msg.match_elements<atom::crash, std::string>())  // the decoder, for a shard
            return caf::make_message(true);
          if (msg.match_element<atom::status>(0)) {
            actor_status s(kind, 0);
            // fields.emplace_back, not add(): g++ 12 warns (wrongly) about add<int64_t> inlined here
            if (kind == "debouncer") {
              s.fields.emplace_back("pending", int64_t{0});
              s.fields.emplace_back("units_in_flight", int64_t{0});
            }
            if (kind == "decoder") {
              actor_status shard("shard", 0);
              shard.name = "shard[]";
              shard.fields.emplace_back("resident_blocks", w->resident);
              s.children.push_back(shard);
            }
            return caf::make_message(std::move(s));
          }
          return caf::message{};
        });
    return {[](caf::atom_constant<caf::atom("never")>) {}};
  });
  w->live[kind] = hdl;
  return hdl;
}

pipeline_children fake_children(std::shared_ptr<world> w) {
  pipeline_children c;
  c.emitter = [w](caf::actor_system& sys, const pipeline_context&, const pipeline_options&,
                  std::string&) {
    return caf::actor_cast<emitter_actor>(spawn_child(sys, w, "emitter"));
  };
  c.datapath = [w](caf::actor_system& sys, const pipeline_context&, const pipeline_options&,
                   const emitter_actor&) {
    datapath_handles h;
    h.debouncer = caf::actor_cast<debouncer_actor>(spawn_child(sys, w, "debouncer"));
    h.decoder = caf::actor_cast<decoder_actor>(spawn_child(sys, w, "decoder"));
    h.ingress = caf::actor_cast<ingress_actor>(spawn_child(sys, w, "ingress"));
    return h;
  };
  c.scraper = [w](caf::actor_system& sys, const pipeline_context&, const pipeline_options&,
                  const emitter_actor&) {
    return caf::actor_cast<scraper_actor>(spawn_child(sys, w, "scraper"));
  };
  return c;
}

size_t count(const std::vector<std::string>& v, const std::string& x) {
  return static_cast<size_t>(std::count(v.begin(), v.end(), x));
}

struct PipelineSupervisorShell : ::testing::Test {
  deterministic_system t;
  std::shared_ptr<world> w = std::make_shared<world>();
  pipeline_context ctx;
  pipeline_options opts;
  pipeline_actor aut;

  PipelineSupervisorShell() {
    ctx.name = "sup-0";
    opts.restart_window = 60'000ms;
    opts.teardown_deadline = 3'000ms;
  }
  void start() {
    aut = spawn_pipeline(t.sys(), ctx, opts, fake_children(w));
    t.stop_at_end(caf::actor_cast<caf::actor>(aut));
    t.run();
  }
  void crash(const std::string& kind) {
    caf::anon_send(w->live.at(kind), atom::crash_v);
    t.run();
  }
  double restarts(const std::string& unit) const {
    return ctx.metrics->value("kvrelay_actor_restarts_total",
                              {{"replica", "sup-0"}, {"unit", unit}});
  }
  // A blocking request would deadlock the test coordinator: issue it, run, then receive.
  template <class... Ts, class F>
  void ask(F&& on_reply, Ts&&... xs) {
    caf::scoped_actor self{t.sys()};
    auto rh = self->request(aut, caf::infinite, std::forward<Ts>(xs)...);
    t.run();
    rh.receive(std::forward<F>(on_reply), [](caf::error& e) { FAIL() << caf::to_string(e); });
  }
};

TEST_F(PipelineSupervisorShell, StartsTheEmitterThenTheDataPath) {
  start();
  EXPECT_EQ(w->spawned,
            (std::vector<std::string>{"emitter", "debouncer", "decoder", "ingress"}));
  opts.scraper = scraper_options{};
  deterministic_system t2;
  auto w2 = std::make_shared<world>();
  auto aut2 = spawn_pipeline(t2.sys(), ctx, opts, fake_children(w2));
  t2.stop_at_end(caf::actor_cast<caf::actor>(aut2));
  t2.run();
  EXPECT_EQ(w2->spawned.back(), "scraper");
}

TEST_F(PipelineSupervisorShell, ACrashedEmitterRestartsAloneAfterItsBackoffAndTheDebouncerHearsOfIt) {
  start();
  crash("emitter");
  EXPECT_EQ(count(w->spawned, "emitter"), 1u) << "not before the backoff";
  EXPECT_EQ(restarts("emitter"), 1);
  t.advance(100ms);  // backoff_min = 100 ms, jittered down to 50
  EXPECT_EQ(count(w->spawned, "emitter"), 2u);
  EXPECT_EQ(count(w->spawned, "ingress"), 1u) << "the data path is untouched";
  EXPECT_TRUE(w->exits.empty());
  size_t updates = 0;
  for (const auto& m : w->got["debouncer"])
    updates += m.match_element<atom::update>(0) ? 1 : 0;
  EXPECT_EQ(updates, 1u) << "the debouncer must learn the new emitter";
}

TEST_F(PipelineSupervisorShell, ADataPathMemberTakesItsSiblingsDownAndTheUnitRestarts) {
  start();
  crash("decoder");
  EXPECT_EQ(count(w->exits, "ingress"), 1u);
  EXPECT_EQ(count(w->exits, "debouncer"), 1u);
  EXPECT_EQ(count(w->exits, "emitter"), 0u);
  t.advance(100ms);
  EXPECT_EQ(count(w->spawned, "decoder"), 2u);
  EXPECT_EQ(count(w->spawned, "ingress"), 2u);
  EXPECT_EQ(count(w->spawned, "debouncer"), 2u);
  EXPECT_EQ(count(w->spawned, "emitter"), 1u);
  EXPECT_EQ(restarts("datapath"), 1);
  EXPECT_LE(restarts("emitter"), 0);
}

TEST_F(PipelineSupervisorShell, OverTheIntensityLimitThePipelineIsNotReadyAndRetriesSlowly) {
  opts.max_restarts = 2;
  start();
  for (int i = 0; i < 2; ++i) {
    crash("emitter");
    t.advance(1000ms);
  }
  EXPECT_LE(ctx.metrics->value("kvrelay_pipeline_unhealthy", {{"replica", "sup-0"}}), 0);
  crash("emitter");  // the third within the window
  EXPECT_EQ(ctx.metrics->value("kvrelay_pipeline_unhealthy", {{"replica", "sup-0"}}), 1);
  ask(
      [](bool ok, std::vector<std::string>& why) {
        EXPECT_FALSE(ok);
        EXPECT_NE(std::find(why.begin(), why.end(),
                            "restarts over the intensity limit; retrying slowly"),
                  why.end());
      },
      atom::ready_v);
  t.advance(29'000ms);
  EXPECT_EQ(count(w->spawned, "emitter"), 3u) << "the slow retry waits 30 s";
  t.advance(1'000ms);
  EXPECT_EQ(count(w->spawned, "emitter"), 4u);
  t.advance(60'000ms);  // up for a whole window: healthy again
  EXPECT_EQ(ctx.metrics->value("kvrelay_pipeline_unhealthy", {{"replica", "sup-0"}}), 0);
}

// while the memory budget pauses an ingress, /readyz says so (not ready); once the
// pause ends the reason goes away. (/readyz/self asks nothing of the pipelines: it stays 200.)
TEST_F(PipelineSupervisorShell, AnOverloadedBudgetIsANotReadyReasonWhileItLasts) {
  ctx.budget = memory_budget::make(uint64_t{8} << 20, budget_source::config);
  start();
  const std::string reason =
      "overloaded: the memory budget is spent and the ingress paused; batches sent meanwhile are "
      "repaired by replay or declared lost (kvrelay_overloads_total, kvrelay_queue_bytes)";
  const auto has = [&](const std::vector<std::string>& why) {
    return std::find(why.begin(), why.end(), reason) != why.end();
  };
  ask([&](bool, std::vector<std::string>& why) { EXPECT_FALSE(has(why)); }, atom::ready_v);
  ctx.budget->note_pause();
  ask(
      [&](bool ok, std::vector<std::string>& why) {
        EXPECT_FALSE(ok);
        EXPECT_TRUE(has(why)) << ::testing::PrintToString(why);
      },
      atom::ready_v);
  ctx.budget->note_resume(1'000'000);
  ask([&](bool, std::vector<std::string>& why) { EXPECT_FALSE(has(why)); }, atom::ready_v);
}

TEST_F(PipelineSupervisorShell, CrashesAreRoutedByKind) {
  start();
  bool ok = false;
  ask([&](bool r) { ok = r; }, atom::crash_v, actor_kind::debouncer);
  EXPECT_TRUE(ok);
  ASSERT_FALSE(w->got["debouncer"].empty());
  EXPECT_TRUE(w->got["debouncer"].back().match_element<atom::crash>(0));
  t.advance(100ms);  // it died: the data path restarts
  // A shard is the decoder's child: the decoder is asked to crash one.
  ask([&](bool r) { ok = r; }, atom::crash_v, actor_kind::shard);
  ASSERT_FALSE(w->got["decoder"].empty());
  const auto& m = w->got["decoder"].back();
  ASSERT_TRUE((m.match_elements<atom::crash, std::string>()));
  EXPECT_EQ(m.get_as<std::string>(1), "shard");
  // No scraper configured: nothing to crash.
  ask([&](bool r) { ok = r; }, atom::crash_v, actor_kind::scraper);
  EXPECT_FALSE(ok);
}

TEST_F(PipelineSupervisorShell, TeardownStopsChildrenOneByOneUpstreamFirst) {
  start();
  caf::anon_send_exit(aut, caf::exit_reason::user_shutdown);
  t.run();
  EXPECT_EQ(w->exits,
            (std::vector<std::string>{"ingress", "decoder", "debouncer", "emitter"}));
}

TEST_F(PipelineSupervisorShell, ARestartTimerAfterTeardownBeganSpawnsNothing) {
  w->stubborn = "ingress";  // keeps the teardown going while the emitter's timer fires
  start();
  crash("emitter");
  caf::anon_send_exit(aut, caf::exit_reason::user_shutdown);
  t.run();
  t.advance(200ms);  // the emitter's backoff elapses during the teardown
  EXPECT_EQ(count(w->spawned, "emitter"), 1u);
  t.advance(3'000ms);
}

TEST_F(PipelineSupervisorShell, AChildThatNeverGoesDownIsKilledAtTheDeadline) {
  w->stubborn = "decoder";
  start();
  // Who went down, and why (kill bypasses exit handlers, so only DOWNs show it).
  std::map<caf::actor_addr, caf::error> downs;
  auto watcher = t.sys().spawn([&](caf::event_based_actor* self) -> caf::behavior {
    self->monitor(aut);
    for (const auto& [kind, hdl] : w->live) self->monitor(hdl);
    self->set_down_handler([&](caf::down_msg& m) { downs[m.source] = m.reason; });
    return {[](caf::atom_constant<caf::atom("never")>) {}};
  });
  t.stop_at_end(watcher);
  t.run();
  const auto down = [&](const caf::actor_addr& a) { return downs.count(a) > 0; };
  caf::anon_send_exit(aut, caf::exit_reason::user_shutdown);
  t.run();
  EXPECT_EQ(w->exits, (std::vector<std::string>{"ingress", "decoder"}))
      << "waiting for the decoder's DOWN";
  EXPECT_FALSE(down(aut.address()));
  t.advance(2'999ms);
  EXPECT_FALSE(down(aut.address()));
  t.advance(1ms);
  EXPECT_TRUE(down(aut.address())) << "the deadline kills what is left and quits";
  for (const char* kind : {"decoder", "debouncer", "emitter"}) {
    const auto addr = w->live.at(kind).address();
    ASSERT_TRUE(down(addr)) << kind;
    EXPECT_EQ(downs[addr], caf::exit_reason::kill) << kind;
  }
  EXPECT_EQ(downs[w->live.at("ingress").address()], caf::exit_reason::user_shutdown);
}

TEST_F(PipelineSupervisorShell, TheDrainReportsWhatTheServerIsLeftWith) {
  start();
  caf::anon_send(aut, health_fact::server_ok);  // the server acknowledged what was sent
  t.run();
  drain_report r;
  const caf::timespan budget = 5s;
  ask([&](drain_report& x) { r = x; }, atom::drain_v, budget);
  EXPECT_TRUE(r.complete);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.pipeline, "sup-0");
  EXPECT_EQ(r.pending, 0);
  EXPECT_EQ(r.resident, 7);
  EXPECT_EQ(r.left_on_server(), 7) << "keep: the server holds what the shards hold";
  // Drained: nothing restarts any more.
  crash("emitter");
  t.advance(1'000ms);
  EXPECT_EQ(count(w->spawned, "emitter"), 1u);
}

TEST_F(PipelineSupervisorShell, ADrainThatRunsOutOfTimeSaysWhereAndWhatIsLeft) {
  w->mute = "debouncer";  // its final flush never gets acknowledged
  start();
  drain_report r;
  bool answered = false;
  caf::scoped_actor self{t.sys()};
  const caf::timespan budget = 2s;
  auto rh = self->request(aut, caf::infinite, atom::drain_v, budget);
  t.run();
  t.advance(2'000ms);  // the debouncer's share of the budget runs out
  rh.receive(
      [&](drain_report& x) {
        r = x;
        answered = true;
      },
      [](caf::error& e) { FAIL() << caf::to_string(e); });
  ASSERT_TRUE(answered);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.failed_step, "debouncer");
  EXPECT_EQ(r.resident, 7) << "the decoder still answered for its shards";
  EXPECT_FALSE(r.server_acknowledged);
  EXPECT_EQ(r.left_on_server(), 0) << "a server that never acknowledged holds nothing of ours";
}

TEST_F(PipelineSupervisorShell, WhatTheServerIsLeftWithCountsOnceItAcknowledgedEvenIfItLeft) {
  w->mute = "debouncer";
  start();
  caf::anon_send(aut, health_fact::server_ok);
  caf::anon_send(aut, health_fact::server_failed);  // reached once, then gone
  t.run();
  drain_report r;
  caf::scoped_actor self{t.sys()};
  auto rh = self->request(aut, caf::infinite, atom::drain_v, caf::timespan{2s});
  t.run();
  t.advance(2'000ms);
  rh.receive([&](drain_report& x) { r = x; }, [](caf::error& e) { FAIL() << caf::to_string(e); });
  EXPECT_TRUE(r.server_acknowledged);
  EXPECT_EQ(r.left_on_server(), 7) << "what it acknowledged before it went away stays there";
}

TEST_F(PipelineSupervisorShell, AFinalClearLeavesNothingOnTheServer) {
  opts.final_clear = true;
  start();
  drain_report r;
  const caf::timespan budget = 5s;
  ask([&](drain_report& x) { r = x; }, atom::drain_v, budget);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.left_on_server(), 0);
}

}  // namespace
}  // namespace kvrelay
