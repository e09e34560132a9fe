// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The debouncer's side of a policy-server outage, on real sockets: while the
// server is away nothing but the resync's probe is sent and nothing piles up; on its return the
// clear goes first, then the re-report, and no eviction of a prefix it never held.

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/fault_fixture.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

// a server restarted empty while the engine is quiet. No engine event and no
// failed call tells kvrelay; only the transport coming back does, and the resync alone must
// rebuild the server's index.
TEST(PolicyServerOutage, RestartedDuringSilenceIsRebuiltWithoutAnEngineEvent) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  ASSERT_EQ(env.wait_consistent(), "");
  const auto batches = env.metric("kvrelay_batches_total");
  const auto resyncs = env.metric("kvrelay_resyncs_total");

  env.server.stop();
  ASSERT_TRUE(env.server.restart(/*empty_index=*/true));
  ASSERT_EQ(env.server.index().entries(), 0u);
  EXPECT_EQ(env.wait_consistent(), "") << "the reconnect resync re-reported every resident block";
  EXPECT_EQ(env.metric("kvrelay_batches_total"), batches) << "the engine stayed quiet";
  EXPECT_GE(env.metric("kvrelay_resyncs_total"), resyncs + 1);
  EXPECT_GE(env.metric("kvrelay_reconnects_total"), 1);
}

TEST(PolicyServerOutage, OnlyTheProbeWhileAwayThenTheClearAndTheTruth) {
  fault_env env;
  env.cfg.server.rpc_timeout = 300ms;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  ASSERT_EQ(env.wait_consistent(), "");

  env.server.set_black_hole(true);
  env.publish_steps(20);  // stores and evictions the server will never see
  ASSERT_TRUE(wait_until([&] { return env.metric("kvrelay_units_failed_total") > 0; }, 10s));
  ASSERT_TRUE(
      wait_until([&] { return env.metric("kvrelay_resync_probes_failed_total") >= 1; }, 10s))
      << "the probe is retried with backoff";
  // The engine keeps going; the debouncer keeps nothing of it (the re-report will carry it).
  const auto decoded = env.metric("kvrelay_batches_total");
  env.publish_steps(40);
  ASSERT_TRUE(wait_until([&] { return env.metric("kvrelay_batches_total") >= decoded + 40; }, 10s));
  EXPECT_EQ(env.metric("kvrelay_pending_entries"), 0) << "memory stays flat during an outage";
  EXPECT_GT(env.metric("kvrelay_updates_dropped_total", {{"reason", "superseded"}}), 0);
  // Every call the server held since the first failure is a probe: one ALL_CLEARED per unit.
  const auto units_at = env.metric("kvrelay_units_sent_total");
  const auto probes_at = env.metric("kvrelay_resync_probes_failed_total");
  ASSERT_TRUE(
      wait_until([&] { return env.metric("kvrelay_resync_probes_failed_total") >= probes_at + 1; },
                 10s));
  EXPECT_LE(env.metric("kvrelay_units_sent_total") - units_at,
            env.metric("kvrelay_resync_probes_failed_total") - probes_at + 1)
      << "a unit other than the probe went out while the server was away";

  const auto before = env.server.index().counters();
  env.server.set_black_hole(false);
  EXPECT_EQ(env.wait_consistent(20s), "");
  const auto after = env.server.index().counters();
  EXPECT_GT(after.cleared_events, before.cleared_events) << "the clear first";
  EXPECT_EQ(after.evicted_events, before.evicted_events)
      << "after the clear nothing needs evicting: the re-report is the truth";
  EXPECT_GE(env.metric("kvrelay_resyncs_total"), 1);
}

// A server that takes longer per message than the deadline applies what it gets but answers
// late, so every unit, and every resync's clear and
// re-report, would fail and start the resync again, forever: the index wiped and rebuilt over
// and over. The emitter's deadline back-off (unit_sequencer S11) lengthens the deadline until
// the calls complete; then units stop failing.
TEST(SlowPolicyServer, SlowerThanTheDeadlineStopsFailingOnceTheDeadlineIsLengthened) {
  // A message costs the server 1.2 s against a 1 s deadline; doubled, the deadline leaves 0.8 s
  // of margin, so a loaded machine (TSan in CI) does not time the calls out again.
  fault_env env;
  env.cfg.server.rpc_timeout = 1000ms;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(20);
  ASSERT_EQ(env.wait_consistent(), "");
  ASSERT_EQ(env.child_field("emitter", "deadline_ms"), 1000);

  env.server.set_ingest_delay(1200ms);
  env.publish_steps(20);
  ASSERT_TRUE(wait_until([&] { return env.metric("kvrelay_units_failed_total") > 0; }, 20s))
      << "the first unit times out";
  ASSERT_EQ(env.wait_consistent(60s), "");
  EXPECT_GE(env.child_field("emitter", "deadline_ms"), 2000);
  EXPECT_GE(env.child_field("emitter", "deadline_raised"), 1);
  // Settled (the resync the first failure called for is done): what the engine does next goes
  // out and is acknowledged within the deadline.
  ASSERT_TRUE(wait_until(
      [&] {
        return env.child_flag("debouncer", "server_healthy") &&
               !env.child_flag("debouncer", "resync_in_progress") &&
               !env.child_flag("debouncer", "re_reporting") &&
               env.metric("kvrelay_resyncs_total") >= 1 &&
               env.metric("kvrelay_pending_entries") == 0;
      },
      60s));
  const auto failed = env.metric("kvrelay_units_failed_total");
  const auto resyncs = env.metric("kvrelay_resyncs_total");
  const auto ok = env.metric("kvrelay_units_sent_total");
  env.publish_steps(10);
  ASSERT_TRUE(wait_until(
      [&] {
        return env.metric("kvrelay_units_sent_total") > ok &&
               env.metric("kvrelay_pending_entries") == 0;
      },
      30s));
  EXPECT_EQ(env.wait_consistent(60s), "");
  EXPECT_EQ(env.metric("kvrelay_units_failed_total"), failed) << "no unit times out any more";
  EXPECT_EQ(env.metric("kvrelay_resyncs_total"), resyncs) << "no resync started again";

  env.server.set_ingest_delay(0ms);
  EXPECT_TRUE(wait_until(
      [&] {
        env.publish_steps(1);  // each fast completion halves the deadline again
        return env.child_field("emitter", "deadline_ms") == 1000;
      },
      20s))
      << "a fast server brings the configured deadline back";
  EXPECT_EQ(env.wait_consistent(), "");
}

}  // namespace
}  // namespace kvrelay::faults
