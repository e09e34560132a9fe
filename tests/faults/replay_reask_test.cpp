// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// a restart must not invent a loss. The fake engine answers a replay like
// vLLM and SGLang do (one tight loop into a ROUTER queue of 1000 messages; what does not fit is
// dropped, END included), so a cold start against a ring that holds far more than that gets
// replies that stop short. End to end on real sockets (fake engine, daemon, policy server): the
// catch-up must end exact, with no history declared lost and the index complete, every time.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/support/fault_fixture.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

TEST(ReplayReask, ColdStartAgainstABusyEngineEndsExactWithNoLossDeclared) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    fault_env::options o;
    o.buffer_steps = 10000;  // vLLM's default ring
    o.model.seed = 100 + static_cast<uint64_t>(round);
    fault_env env(o);
    // ~5 000 batches already in the ring when kvrelay starts: five times the engine's queue.
    env.publish_steps(5000);
    std::string err;
    ASSERT_TRUE(env.start_daemon(&err, /*sync=*/false)) << err;
    // The engine keeps going at ~200 batches/s while kvrelay catches up, until kvrelay has both
    // received a live batch and asked the ring again after a reply that stopped short: the
    // states this test is about. Then the engine pauses, so how fast kvrelay reads the rest of
    // the ring (a loaded machine, a sanitizer) decides nothing; the catch-up must still end.
    std::atomic<bool> done{false};
    std::thread engine_loop([&] {
      while (!done.load()) {
        env.publish_steps(1);
        std::this_thread::sleep_for(5ms);
      }
    });
    const bool busy_catch_up = wait_until(
        [&] {
          return env.ingress_flag("live") && env.ingress_field("replays_continued") > 0;
        },
        60s);
    done = true;
    engine_loop.join();
    ASSERT_TRUE(busy_catch_up) << "no live batch, or no reply cut short, while the engine ran";
    ASSERT_TRUE(wait_until([&] { return !env.ingress_flag("catching_up"); }, 60s))
        << "the catch-up never ended";
    EXPECT_EQ(env.wait_consistent(15s), "");
    EXPECT_EQ(env.metric("kvrelay_history_lost_total"), 0);
    EXPECT_EQ(env.metric("kvrelay_batches_lost_total"), 0);
    EXPECT_EQ(env.metric("kvrelay_history_skipped_batches_total"), 0);
    EXPECT_EQ(env.metric("kvrelay_index_incomplete"), 0) << "the ring held everything from 0";
    EXPECT_GT(env.engine->stats().replay_dropped, 0u) << "the engine must have dropped replies";
  }
}

// A stop while the ring is still being read (a rolling update during a catch-up) must end the
// daemon: nothing of the catch-up may keep an actor or the source thread alive.
TEST(ReplayReask, StopDuringACatchUpEnds) {
  fault_env::options o;
  o.buffer_steps = 10000;
  fault_env env(o);
  env.publish_steps(5000);
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err, /*sync=*/false)) << err;
  ASSERT_TRUE(wait_until([&] { return env.ingress_field("replays_requested") > 0; }, 10s));
  EXPECT_TRUE(env.ingress_flag("catching_up")) << "precondition: stopped during the catch-up";
  const auto t0 = std::chrono::steady_clock::now();
  env.d->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

}  // namespace
}  // namespace kvrelay::faults
