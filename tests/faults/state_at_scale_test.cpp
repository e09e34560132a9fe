// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Work proportional to the resident set is streamed, never queued (debouncer rules WK1-WK6,
// DB11), end to end on real sockets: a fake engine whose cache holds ten times every bound in
// play (the walk's chunk, the pending set, a target's lag), an in-process policy server, and the
// daemon. Each incident -- a server restart, an outage under traffic, a slow server, the
// refresh, a target that joins late, a restart from a state dir -- must end exact with at most
// one ALL_CLEARED at each server, and a pending overflow with none.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "tests/support/fault_fixture.hpp"
#include "tools/fake-engine/engine_http.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

constexpr int64_t chunk = 64;         // server.walk_chunk
constexpr int64_t pending = 256;      // server.max_pending
constexpr int64_t lag = 64 << 10;     // server.max_target_lag
constexpr size_t resident = 4000;     // > 10x each of them (lag: ~40 bytes a block)

fault_env::options scale_options() {
  fault_env::options o;
  o.model.capacity = resident + 500;  // no evictions until the cache holds `resident`
  return o;
}

struct scale_env {
  fault_env env{scale_options()};

  scale_env() {
    env.cfg.server.walk_chunk = chunk;
    env.cfg.server.max_pending = pending;
    env.cfg.server.max_target_lag = lag;
    env.cfg.server.refresh_interval = 0ms;
  }
  // Engine steps until the cache holds `n` blocks.
  void grow_to(size_t n) {
    while (env.model.resident() < n) env.publish_steps(50);
  }
  uint64_t clears(policy::policy_server& s) { return s.index().counters().cleared_events; }
  uint64_t clears() { return clears(env.server); }
};

TEST(StateAtScale, AServerRestartedEmptyIsRebuiltByOneWalkAfterOneClear) {
  scale_env t;
  auto& env = t.env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  t.grow_to(resident);
  ASSERT_EQ(env.wait_consistent(30s), "");
  const auto cleared = t.clears();
  const auto messages = env.server.calls().report_messages;

  env.server.stop();
  ASSERT_TRUE(env.server.restart(/*empty_index=*/true));
  EXPECT_EQ(env.wait_consistent(30s), "") << "the walk re-reported every resident block";
  EXPECT_EQ(t.clears() - cleared, 1u) << "one ALL_CLEARED for the incident";
  EXPECT_GE(env.metric("kvrelay_walks_total", {{"kind", "resync"}}), 1);
  EXPECT_GE(env.metric("kvrelay_walk_blocks_total"), static_cast<double>(resident));
  // In chunks (each at least `chunk` blocks, at most that plus a cluster), not one message.
  EXPECT_GE(env.server.calls().report_messages - messages, resident / (2 * chunk));
}

TEST(StateAtScale, AnOutageUnderTrafficEndsExactWithOneClear) {
  scale_env t;
  auto& env = t.env;
  env.cfg.server.rpc_timeout = 300ms;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  t.grow_to(resident);
  ASSERT_EQ(env.wait_consistent(30s), "");
  const auto cleared = t.clears();

  env.server.set_black_hole(true);
  env.publish_steps(300);  // the engine goes on, evicting too
  ASSERT_TRUE(
      wait_until([&] { return env.metric("kvrelay_resync_probes_failed_total") >= 1; }, 10s));
  env.publish_steps(100);
  env.server.set_black_hole(false);
  EXPECT_EQ(env.wait_consistent(30s), "");
  EXPECT_EQ(t.clears() - cleared, 1u) << "the probe the server answered; held ones never applied";
}

// A server slower than the engine: pending passes its bound ten times over. Its adds are shed
// and walked again; no server is ever cleared for it.
TEST(StateAtScale, PendingTenTimesOverItsBoundIsWalkedNeverCleared) {
  scale_env t;
  auto& env = t.env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  t.grow_to(resident / 4);
  ASSERT_EQ(env.wait_consistent(30s), "");
  const auto cleared = t.clears();

  env.server.set_ingest_delay(30ms);
  const size_t before = env.model.ops();
  while (env.model.ops() - before < 10 * static_cast<size_t>(pending)) env.publish_steps(50);
  ASSERT_TRUE(wait_until([&] { return env.metric("kvrelay_pending_sheds_total") >= 1; }, 20s))
      << "the slow server must make pending pass its bound";
  env.server.set_ingest_delay(0ms);
  EXPECT_EQ(env.wait_consistent(30s), "");
  EXPECT_EQ(t.clears(), cleared) << "an overflow never clears a server";
  EXPECT_GE(env.metric("kvrelay_walks_total", {{"kind", "catchup"}}), 1);
}

// The refresh re-reports each block once per interval at a flat rate: never the whole index at
// once, never a clear. A pass starts an interval after the last full walk (the catch-ups while
// the cache grew count as one), so three intervals see at least two passes.
TEST(StateAtScale, TheRefreshIsPacedAcrossItsIntervalAndNeverClears) {
  scale_env t;
  auto& env = t.env;
  env.cfg.server.refresh_interval = 3s;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  t.grow_to(resident);
  ASSERT_EQ(env.wait_consistent(30s), "");
  const auto cleared = t.clears();
  // The engine is quiet now: every upsert the server takes comes from the refresh.
  std::vector<uint64_t> windows;  // upserts per half second
  uint64_t last = env.server.index().counters().prefixes_upserted;
  const auto started = std::chrono::steady_clock::now();
  for (int w = 1; w <= 24; ++w) {
    std::this_thread::sleep_until(started + w * 500ms);
    const uint64_t now = env.server.index().counters().prefixes_upserted;
    windows.push_back(now - last);
    last = now;
  }
  uint64_t total = 0, most = 0;
  for (auto n : windows) {
    total += n;
    most = std::max(most, n);
  }
  EXPECT_EQ(t.clears(), cleared);
  EXPECT_GE(total, resident * 3 / 2) << "at least two passes in three intervals";
  EXPECT_LE(total, resident * 4);
  EXPECT_LE(most, resident / 2) << "paced: never a burst of the whole index";
  EXPECT_EQ(env.wait_consistent(10s), "");
}

// A target that joins after the index is built gets all of it by its own walk; the other
// target sees nothing of it.
TEST(StateAtScale, ATargetThatJoinsLateGetsTheWholeIndexAlone) {
  scale_env t;
  auto& env = t.env;
  policy::policy_server late;
  ASSERT_TRUE(late.start());  // learn its port, then take it away until the index is built
  late.stop();
  env.cfg.server.targets = {env.server.target(), late.target()};
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  t.grow_to(resident);
  ASSERT_EQ(env.wait_consistent(30s), "");
  const auto a_clears = t.clears();
  const auto a_upserts = env.server.index().counters().prefixes_upserted;

  ASSERT_TRUE(late.start());
  std::string diff;
  EXPECT_TRUE(wait_until(
      [&] {
        diff = describe_diff(env.model.expected(), server_view(late));
        return diff.empty();
      },
      30s))
      << diff;
  EXPECT_EQ(t.clears(late), 1u) << "its probe, once";
  EXPECT_EQ(t.clears(), a_clears);
  EXPECT_LT(env.server.index().counters().prefixes_upserted - a_upserts, resident / 10)
      << "the walk went to the late target alone";
}

// A restart from a state dir: the restored index reaches the server by a walk after the start's
// clear, not through the pending set.
TEST(StateAtScale, ARestartFromAStateDirIsWalkedAfterTheStartClear) {
  scale_env t;
  auto& env = t.env;
  temp_dir dir;
  fake::engine_http http{fake::engine_description{}, "127.0.0.1", 0, nullptr};
  env.cfg.state.dir = dir.path() + "/state";
  env.cfg.state.interval = 200ms;
  env.cfg.engines[0].metrics.url = http.url() + "/metrics";
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  t.grow_to(resident);
  ASSERT_EQ(env.wait_consistent(30s), "");
  env.d->drain(5s);  // SIGTERM's path: the last snapshot
  env.d->stop();
  env.d.reset();
  const auto cleared = t.clears();

  ASSERT_TRUE(env.start_daemon(&err)) << err;
  EXPECT_EQ(env.wait_consistent(30s), "");
  EXPECT_EQ(env.metric("kvrelay_snapshot_restores_total", {{"outcome", "restored"}}), 1);
  EXPECT_EQ(env.metric("kvrelay_walks_total", {{"kind", "start"}}), 1);
  EXPECT_EQ(env.metric("kvrelay_pending_sheds_total"), 0) << "not through the pending set";
  EXPECT_EQ(t.clears() - cleared, 1u) << "the start's clear, once";
}

}  // namespace
}  // namespace kvrelay::faults
