// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The deterministic fixture itself: time moves only when the test moves it, and a recorder sees
// what the actor under test sends. Driven through the debouncer, whose flush window is a timer.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "actors/debouncer/debouncer_actor.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using std::chrono::milliseconds;

shard_ops_ptr one_upsert(uint64_t fp) {
  auto ops = std::make_shared<shard_ops>();
  ops->epoch = 1;
  ops->had_store = true;
  ops->ops.push_back(prefix_op{prefix_op::kind::upsert, fp, 16, tier::t1});
  return ops;
}

TEST(DeterministicSystem, TimersFireOnlyWhenTheTestAdvancesTheClock) {
  testing::deterministic_system t;
  testing::recorder emitter(t);
  pipeline_context ctx;
  ctx.name = "det-0";
  ctx.wall_us = [] { return int64_t{1'000'000}; };
  debouncer_options opts;
  opts.protocol.window = milliseconds(100);
  opts.protocol.refresh_interval = milliseconds(0);
  auto aut = spawn_debouncer(t.sys(), ctx, opts, emitter.as<emitter_actor>());
  t.stop_at_end(caf::actor_cast<caf::actor>(aut));
  t.run();
  // The emitter names its targets (a recorder does not); units go to the first.
  caf::anon_send(aut, atom::targets_v, std::vector<std::string>{"policy:9090"});
  t.run();

  // The start's clear goes out at once, on its own.
  auto units = emitter.all_last<emit_unit_ptr>();
  ASSERT_EQ(units.size(), 1u);
  EXPECT_TRUE(units[0]->clear) << "a started data path clears first";
  EXPECT_EQ(units[0]->clear_ts_us, 1'000'000) << "the clear carries the context's clock";
  EXPECT_TRUE(units[0]->adds.empty());

  // An add waits for the window, which only the test's clock can end.
  caf::anon_send(aut, one_upsert(43));
  t.run();
  EXPECT_EQ(emitter.all_last<emit_unit_ptr>().size(), 1u) << "nothing before the window";
  t.advance(milliseconds(99));
  EXPECT_EQ(emitter.all_last<emit_unit_ptr>().size(), 1u) << "still inside the window";
  t.advance(milliseconds(1));
  units = emitter.all_last<emit_unit_ptr>();
  ASSERT_EQ(units.size(), 2u);
  EXPECT_FALSE(units[1]->clear);
  ASSERT_EQ(units[1]->adds.size(), 1u);
  EXPECT_EQ(units[1]->adds[0].fingerprint, 43u);
}

TEST(Recorder, AnswersRequestsWithTheChosenReply) {
  testing::deterministic_system t;
  testing::recorder peer(t);
  peer.reply_with([](const caf::message&) { return caf::make_message(true); });
  auto hdl = peer.as<emitter_actor>();
  bool answered = false;
  auto client = t.sys().spawn([&](caf::event_based_actor* self) {
    self->request(hdl, std::chrono::seconds(1), std::make_shared<const stats_sample>())
        .then([&](bool ok) { answered = ok; });
  });
  t.stop_at_end(client);
  t.run();
  EXPECT_TRUE(answered);
  EXPECT_EQ(peer.all<stats_sample_ptr>().size(), 1u);
}

}  // namespace
}  // namespace kvrelay
