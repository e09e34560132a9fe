// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Several policy servers, on real sockets: a fake engine publishing over ZMQ, three
// in-process policy servers and kvrelay with `server.targets` naming all three. One server is
// killed, restarted empty or stalled while the engine keeps going; at every check the other
// two hold exactly what the engine holds, the daemon keeps ingesting every batch, and the
// affected one converges to the truth once it is back. Plus per-target ordering across one
// target's outage: add → evict → add of one key, and an AllBlocksCleared.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>

#include "base/fingerprint.hpp"
#include "tests/support/fault_fixture.hpp"
#include "tests/support/dns_test_server.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

// The fault fixture (engine, model, daemon, servers[0]) plus two more servers, all three
// kvrelay's targets.
class ha_env {
 public:
  static constexpr size_t n = 3;

  ha_env() {
    for (auto& s : extra_) {
      s = std::make_unique<policy::policy_server>();
      if (!s->start()) throw std::runtime_error("policy server did not start");
    }
    servers_ = {&env.server, extra_[0].get(), extra_[1].get()};
    env.cfg.server.targets.clear();
    for (auto* s : servers_) env.cfg.server.targets.push_back(s->target());
  }

  policy::policy_server& server(size_t i) { return *servers_.at(i); }

  /// What server i lacks, holds extra or holds wrong against `want` ("" when exact).
  std::string diff(size_t i, const index_view& want) {
    return describe_diff(want, server_view(server(i)));
  }
  /// Waits until server i holds exactly `want`; the diff on timeout.
  std::string wait_exact(size_t i, const index_view& want, std::chrono::milliseconds timeout) {
    std::string d;
    wait_until(
        [&] {
          d = diff(i, want);
          return d.empty();
        },
        timeout);
    if (!d.empty() && env.d) d += "daemon tree: " + env.d->tree_json() + "\n";
    return d;
  }
  std::string wait_exact(size_t i, std::chrono::milliseconds timeout = 10s) {
    return wait_exact(i, env.model.expected(), timeout);
  }

  /// Publishes `steps` engine steps and waits until the daemon has decoded every batch: the
  /// engine's sequence advanced and ingestion kept up, whatever a server does.
  ::testing::AssertionResult publish_and_ingest(size_t steps) {
    const double before = env.metric("kvrelay_batches_total");
    const uint64_t seq_before = env.engine->next_seq();
    env.publish_steps(steps);
    if (env.engine->next_seq() != seq_before + steps)
      return ::testing::AssertionFailure() << "the engine's sequence did not advance by " << steps;
    if (!wait_until([&] { return env.metric("kvrelay_batches_total") >= before + steps; }, 10s))
      return ::testing::AssertionFailure()
             << "ingestion waited: " << env.metric("kvrelay_batches_total") - before << " of "
             << steps << " batches decoded in 10 s";
    return ::testing::AssertionSuccess();
  }

  /// No batch lost, dropped or skipped over the whole run. Summed over every label set: a
  /// dropped batch is counted under its `reason`, which an exact lookup by replica never finds.
  ::testing::AssertionResult no_gap() {
    for (const char* m : {"kvrelay_seq_gaps_total", "kvrelay_batches_lost_total",
                          "kvrelay_batches_dropped_total", "kvrelay_history_lost_total"}) {
      const double v = env.metric_sum(m);
      if (v > 0) return ::testing::AssertionFailure() << m << " = " << v;
    }
    return ::testing::AssertionSuccess();
  }

  /// A numeric field of target i's entry under the debouncer in /debug/tree (-1 when absent).
  int64_t target_field(size_t i, const std::string& field) {
    return env.grandchild_field("debouncer", "target[" + server(i).target() + "]", field);
  }
  /// Calls to target i that ended at kvrelay's own deadline (0 when none yet).
  double deadlines(size_t i) {
    return std::max(0.0, env.metric_sum("kvrelay_rpc_total", {{"target", server(i).target()},
                                                              {"code", "DEADLINE_EXCEEDED"}}));
  }

 private:
  // Before env: destroyed after it, so the daemon stops while every server still runs.
  std::array<std::unique_ptr<policy::policy_server>, n - 1> extra_;
  std::array<policy::policy_server*, n> servers_{};

 public:
  fault_env env;
};

// Traffic flows for `rounds` rounds while server `down` is affected; after each round the two
// others are exact and ingestion kept up.
void traffic_while_affected(ha_env& ha, size_t down, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    ASSERT_TRUE(ha.publish_and_ingest(10)) << "round " << r;
    for (size_t i = 0; i < ha_env::n; ++i) {
      if (i == down) continue;
      ASSERT_EQ(ha.wait_exact(i), "") << "server " << i << " in round " << r;
    }
  }
}

void start_all_exact(ha_env& ha) {
  std::string err;
  ASSERT_TRUE(ha.env.start_daemon(&err)) << err;
  ASSERT_TRUE(ha.publish_and_ingest(40));
  for (size_t i = 0; i < ha_env::n; ++i) ASSERT_EQ(ha.wait_exact(i), "") << "server " << i;
}

// Every case ends with no batch lost, dropped or skipped: ingestion never waited on a server.
class HaTargets : public ::testing::Test {
 protected:
  void TearDown() override {
    if (ha.env.d) {
      EXPECT_TRUE(ha.no_gap());
    }
  }
  /// Starts with every target exact, then stops target `down` (its index kept).
  void start_then_stop(size_t down) {
    ASSERT_NO_FATAL_FAILURE(start_all_exact(ha));
    ha.server(down).stop();
  }
  ha_env ha;
};

// Runs today: a list of one target is the address it always was.
TEST(HaTargetsConfig, ATargetsListOfOneReportsLikeTheAddress) {
  fault_env env;
  env.cfg.server.targets = {env.server.target()};
  env.cfg.server.address = config::server_settings{}.address;  // unused with targets
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  EXPECT_EQ(env.wait_consistent(), "");
}

// (a) One server killed for a while, then back with what it held.
TEST_F(HaTargets, KilledServerComesBackAndTheOthersNeverNotice) {
  const size_t down = 1;
  ASSERT_NO_FATAL_FAILURE(start_then_stop(down));
  const auto others_calls = ha.server(0).calls().report_messages;
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 5));
  ASSERT_TRUE(ha.server(down).start());
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 2));
  EXPECT_EQ(ha.wait_exact(down, 20s), "") << "the returned server converges to the engine";
  EXPECT_GT(ha.server(0).calls().report_messages, others_calls);
}

// One target of three down: the pipeline stays ready (server.readiness = any) and /readyz names
// the target that is down instead of saying only "ready"; back, the line goes.
TEST_F(HaTargets, ReadyzNamesATargetThatIsDownWhileThePipelineStaysReady) {
  const size_t down = 2;
  ASSERT_NO_FATAL_FAILURE(start_then_stop(down));
  const auto port = ha.env.d->admin_port();
  const std::string line = "degraded (still ready): " + std::string(replica) +
                           ": policy target " + ha.server(down).target() + " is down (2 of 3 up)";
  http_reply r;
  ASSERT_TRUE(wait_until(
      [&] {
        ha.env.publish_steps(1);  // a unit the stopped target fails
        r = http_get(port, "/readyz");
        return r.body.find(line) != std::string::npos;
      },
      20s))
      << r.status << " " << r.body;
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.rfind("ready\n", 0), 0u) << r.body;
  for (size_t i = 0; i < ha_env::n; ++i) {
    if (i != down) {
      EXPECT_EQ(r.body.find(ha.server(i).target() + " is down"), std::string::npos);
    }
  }
  ASSERT_TRUE(ha.server(down).start());
  EXPECT_TRUE(wait_until(
      [&] {
        ha.env.publish_steps(1);
        r = http_get(port, "/readyz");
        return r.status == 200 && r.body.find("is down") == std::string::npos;
      },
      20s))
      << r.body;
}

// (b) One server restarted empty on the same port: it gets the whole index, the others nothing
// extra (no clear reaches them).
TEST_F(HaTargets, RestartedEmptyGetsTheWholeIndexOthersSeeNothingExtra) {
  ASSERT_NO_FATAL_FAILURE(start_all_exact(ha));
  const size_t down = 2;
  const auto cleared0 = ha.server(0).index().counters().cleared_events;
  const auto cleared1 = ha.server(1).index().counters().cleared_events;
  ASSERT_TRUE(ha.server(down).restart(/*empty_index=*/true));
  ASSERT_EQ(ha.server(down).index().entries(), 0u);
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 5));
  EXPECT_EQ(ha.wait_exact(down, 20s), "") << "the empty server converges to the engine";
  EXPECT_EQ(ha.server(0).index().counters().cleared_events, cleared0)
      << "a healthy target saw a clear meant for the restarted one";
  EXPECT_EQ(ha.server(1).index().counters().cleared_events, cleared1);
  // Quiet engine: the resync alone rebuilds it once more.
  ASSERT_TRUE(ha.server(down).restart(/*empty_index=*/true));
  EXPECT_EQ(ha.wait_exact(down, 20s), "") << "rebuilt without an engine event";
  EXPECT_EQ(ha.diff(0, ha.env.model.expected()), "");
}

// Both eviction modes work per target: in `rpc` mode every target gets each PREFIX_EVICTED, and
// one restarted empty converges like in `expire` mode.
TEST_F(HaTargets, RpcModeEvictionsReachEveryTargetAndARestartedOneConverges) {
  ha.env.cfg.server.eviction_mode = config::eviction_mode::rpc;
  ASSERT_NO_FATAL_FAILURE(start_all_exact(ha));
  const size_t down = 1;
  ASSERT_TRUE(ha.server(down).restart(/*empty_index=*/true));
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 4));
  EXPECT_EQ(ha.wait_exact(down, 20s), "") << "the empty server converges to the engine";
  for (size_t i = 0; i < ha_env::n; ++i) {
    if (i == down) continue;  // its counters started over with its empty index
    EXPECT_GT(ha.server(i).index().counters().evicted_events, 0u)
        << "server " << i << " got no PREFIX_EVICTED";
    EXPECT_EQ(ha.server(i).index().counters().prefixes_expired, 0u)
        << "server " << i << " got expire-mode evictions";
  }
}

// (c) One server stalled (every call held unanswered) for longer than the RPC deadline: its
// units queue past max_target_lag (a bound ordinary traffic never reaches), the deadline ends the
// held calls, and it is re-reported in full once it answers again. Meanwhile the two others are
// exact after every round well within the deadline: had anything waited on the stalled target,
// they would have waited for the deadline, or for ever while its calls are held.
TEST_F(HaTargets, StalledServerNeitherStallsIngestionNorTheOthers) {
  constexpr auto deadline = 8s;
  ha.env.cfg.server.rpc_timeout = deadline;
  // A 10-step round carries ~100 ops (~5 KB of units), the start's 40 steps ~20 KB: ordinary
  // traffic never has 64 KiB waiting for one target; a dozen rounds that nothing acknowledges do.
  ha.env.cfg.server.max_target_lag = 64 << 10;
  ASSERT_NO_FATAL_FAILURE(start_all_exact(ha));
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, ha_env::n, 3));
  for (size_t i = 0; i < ha_env::n; ++i) {
    ASSERT_EQ(ha.target_field(i, "lag_overflows"), 0) << "ordinary traffic crossed the bound";
    ASSERT_EQ(ha.deadlines(i), 0.0) << "server " << i;
  }

  const size_t down = 0;  // the first target: the one a single-link emitter would use
  ha.server(down).set_black_hole(true);
  // Rounds of 20 steps while the calls are held: the others keep up, each round well inside the
  // deadline, and the stalled target's units pile up past the bound long before it.
  const auto others_keep_up = [&](int round) {
    ASSERT_TRUE(ha.publish_and_ingest(20)) << "round " << round;
    for (size_t i = 1; i < ha_env::n; ++i)
      ASSERT_EQ(ha.wait_exact(i, deadline / 2), "") << "server " << i << " in round " << round;
  };
  int round = 0;
  while (ha.target_field(down, "lag_overflows") < 1 && round < 40)
    ASSERT_NO_FATAL_FAILURE(others_keep_up(round++));
  ASSERT_GE(ha.target_field(down, "lag_overflows"), 1)
      << "the stalled target's units never passed max_target_lag in " << round << " rounds";
  EXPECT_EQ(ha.deadlines(down), 0.0) << "the bound was crossed before any deadline";
  // Held until kvrelay's own deadline has ended a call to it (the deadline path ran), then one
  // more round: the failure on the stalled target costs the others nothing either.
  ASSERT_TRUE(wait_until([&] { return ha.deadlines(down) >= 1; }, 3 * deadline))
      << "no call to the stalled server reached its deadline";
  ASSERT_NO_FATAL_FAILURE(others_keep_up(round++));
  EXPECT_GE(ha.server(down).calls().black_holed, 1u) << "the stall held kvrelay's calls";
  for (size_t i = 1; i < ha_env::n; ++i) {
    EXPECT_EQ(ha.target_field(i, "lag_overflows"), 0) << "server " << i;
    EXPECT_EQ(ha.deadlines(i), 0.0) << "server " << i;
  }

  ha.server(down).set_black_hole(false);
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 2));
  EXPECT_EQ(ha.wait_exact(down, 30s), "") << "the stalled server converges once it answers";
}

// Per target ordering: one key added, evicted and added again while target 1 is away; every
// target ends holding it, none loses it to a reordered eviction.
TEST_F(HaTargets, AddEvictAddOfOneKeyAcrossOneTargetsOutage) {
  const size_t down = 1;
  ASSERT_NO_FATAL_FAILURE(start_then_stop(down));

  fake::fake_event add;
  add.t = fake::fake_event::type::stored;
  add.block_size = 16;
  for (uint32_t t = 0; t < 16; ++t) add.token_ids.push_back(31000 + t);
  const uint64_t block_hash = 0x5eed5eed5eed5eedULL;  // never drawn by the model's counter
  add.block_hashes.push_back(fake::fake_hash::u(block_hash));
  fake::fake_event evict;
  evict.t = fake::fake_event::type::removed;
  evict.block_hashes.push_back(fake::fake_hash::u(block_hash));
  const uint64_t fp = fingerprint::prefixes(add.token_ids, 16, false, 0).at(0);
  const auto with_key = [&] {
    auto v = ha.env.model.expected();
    v[{"", hex_be8(fp)}] = {16, 1};
    return v;
  };

  ha.env.publish_events({add});
  ASSERT_EQ(ha.wait_exact(0, with_key(), 10s), "") << "added";
  ha.env.publish_events({evict});
  ASSERT_EQ(ha.wait_exact(0, ha.env.model.expected(), 10s), "") << "evicted";
  ha.env.publish_events({add});
  ASSERT_TRUE(ha.publish_and_ingest(5));
  for (size_t i : {size_t{0}, size_t{2}}) ASSERT_EQ(ha.wait_exact(i, with_key(), 10s), "") << i;

  ASSERT_TRUE(ha.server(down).start());
  for (size_t i = 0; i < ha_env::n; ++i)
    EXPECT_EQ(ha.wait_exact(i, with_key(), 20s), "") << "server " << i << " holds the key";
}

// An AllBlocksCleared while target 1 is down: the others clear at once; the returned one ends
// with exactly what the engine stored after the clear, nothing from before it.
TEST_F(HaTargets, AClearWhileOneTargetIsDownReachesItInOrder) {
  const size_t down = 1;
  ASSERT_NO_FATAL_FAILURE(start_then_stop(down));
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 2));
  ha.env.publish_events(ha.env.model.clear());
  for (size_t i : {size_t{0}, size_t{2}}) ASSERT_EQ(ha.wait_exact(i), "") << "cleared: " << i;
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 3));
  ASSERT_TRUE(ha.server(down).start());
  ASSERT_NO_FATAL_FAILURE(traffic_while_affected(ha, down, 1));
  EXPECT_EQ(ha.wait_exact(down, 20s), "") << "nothing from before the clear survives";
}

// DNS fan-out: one name, each of its A records a target, answered by the test's own DNS server on
// loopback. While traffic flows an address is added (it gets ALL_CLEARED and the whole index,
// then follows) and one is removed (kvrelay forgets it: its series go, nothing more is sent).
TEST(HaTargetsDns, AnAddressAddedAndOneRemovedWhileTrafficFlows) {
  kvrelay::testing::dns_test_server dns;
  std::unique_ptr<policy::policy_server> second, third;  // outlive the daemon (declared first)
  fault_env env;  // its server listens on 127.0.0.1:P; the others on 127.0.0.2:P, 127.0.0.3:P
  const std::string port = std::to_string(env.server.port());
  for (auto [slot, host] : {std::pair{&second, "127.0.0.2"}, std::pair{&third, "127.0.0.3"}}) {
    policy::server_options o;
    o.listen = std::string(host) + ":" + port;
    *slot = std::make_unique<policy::policy_server>(o);
    ASSERT_TRUE((*slot)->start()) << o.listen;
  }
  const auto exact = [&](policy::policy_server& s, std::chrono::milliseconds timeout) {
    std::string d;
    wait_until(
        [&] {
          d = describe_diff(env.model.expected(), server_view(s));
          return d.empty();
        },
        timeout);
    return d;
  };

  dns.set("policy.test", {"127.0.0.1", "127.0.0.2"});
  env.cfg.server.targets = {dns.target("policy.test:" + port)};
  env.cfg.server.address = config::server_settings{}.address;  // unused with targets
  env.cfg.server.resolve_interval = 1s;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  ASSERT_EQ(exact(env.server, 10s), "") << "127.0.0.1";
  ASSERT_EQ(exact(*second, 10s), "") << "127.0.0.2";
  EXPECT_EQ(third->calls().report_streams + third->calls().publish, 0u) << "not in the name yet";

  // 127.0.0.3 joins, 127.0.0.1 leaves: the next resolve (1 s) sees both changes.
  dns.set("policy.test", {"127.0.0.2", "127.0.0.3"});
  const std::string first_target = "127.0.0.1:" + port;
  ASSERT_TRUE(wait_until(
      [&] { return env.metric("kvrelay_target_up", {{"target", first_target}}) < 0; }, 10s))
      << "127.0.0.1 is still a target";
  const auto first_calls = env.server.calls().report_messages + env.server.calls().publish;
  for (int round = 0; round < 5; ++round) {
    env.publish_steps(10);
    ASSERT_EQ(exact(*second, 10s), "") << "127.0.0.2 in round " << round;
  }
  EXPECT_EQ(exact(*third, 20s), "") << "the joined address converges to the engine";
  EXPECT_EQ(env.server.calls().report_messages + env.server.calls().publish, first_calls)
      << "nothing is sent to an address that left the name";
  EXPECT_GE(dns.queries(), 2);
}

}  // namespace
}  // namespace kvrelay::faults
