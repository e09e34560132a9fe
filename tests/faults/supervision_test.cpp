// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Supervision and resync under faults, in process: after each fault the policy server's index must
// equal what the engine holds (nothing lost, nothing stale), not merely "some RPCs happened".

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics_registry.hpp"
#include "tests/support/fault_fixture.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

double restarts(fault_env& env, const std::string& unit) {
  return env.d->metrics().value("kvrelay_actor_restarts_total",
                                {{"replica", replica}, {"unit", unit}});
}

uint64_t server_clears(fault_env& env) { return env.server.index().counters().cleared_events; }

using steady = std::chrono::steady_clock;

// wait_consistent, and how long the index took to become true again since `since` (printed and
// recorded in the XML report as a property).
std::string recovered(fault_env& env, const char* what, steady::time_point since,
                      std::chrono::milliseconds timeout = 10s) {
  auto diff = env.wait_consistent(timeout);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - since).count();
  ::testing::Test::RecordProperty(what, static_cast<int>(ms));
  std::printf("[ measure  ] %s: %lld ms%s\n", what, static_cast<long long>(ms),
              diff.empty() ? "" : " (not consistent)");
  return diff;
}

TEST(EmitterCrash, RestartsAloneAndTheIndexStaysTrue) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(60);
  ASSERT_EQ(env.wait_consistent(), "");

  const auto t0 = steady::now();
  ASSERT_TRUE(env.d->crash(replica, "emitter"));
  env.publish_steps(60);  // flows while the emitter is down and restarting
  EXPECT_TRUE(wait_until([&] { return restarts(env, "emitter") >= 1; }, 5s));
  EXPECT_EQ(recovered(env, "emitter_crash_to_consistent_ms", t0), "");
  EXPECT_EQ(restarts(env, "emitter"), 1);
  EXPECT_LE(restarts(env, "datapath"), 0) << "an emitter crash must not restart the data path";
  EXPECT_NE(env.d->tree_json().find("\"restarts\":1"), std::string::npos) << env.d->tree_json();

  // And it keeps working afterwards.
  env.publish_steps(30);
  EXPECT_EQ(env.wait_consistent(), "");
}

// A second engine on the same daemon: one pipeline's crash must not touch the other.
TEST(EmitterCrash, OtherPipelinesAreUntouched) {
  fault_env env;
  fake::publisher_options po;
  po.replay_bind = "tcp://127.0.0.1:*";
  po.topic = topic;
  po.buffer_steps = 100000;
  po.linger_ms = 0;
  fake::publisher other(po);
  engine_model::options mo;
  mo.seed = 99;
  engine_model other_model(mo);
  auto e2 = env.cfg.engines[0];
  e2.replica_id = "fault-1";
  e2.endpoint = other.live_endpoint();
  e2.replay_endpoint = other.replay_endpoint();
  env.cfg.engines.push_back(e2);
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto publish_other = [&](int steps) {
    for (int i = 0; i < steps; ++i) {
      fake::encode_options eo;
      eo.era = fake::wire_era::d;
      other.publish(fake::encode_batch(other_model.step(), eo));
    }
  };
  env.publish_steps(40);
  publish_other(40);
  ASSERT_EQ(env.wait_consistent(), "");
  std::string diff;
  ASSERT_TRUE(wait_until(
      [&] {
        return (diff = describe_diff(other_model.expected(), server_view(env.server, "fault-1")))
            .empty();
      },
      10s))
      << diff;

  ASSERT_TRUE(env.d->crash(replica, "emitter"));
  EXPECT_TRUE(wait_until([&] { return restarts(env, "emitter") >= 1; }, 5s));
  env.publish_steps(20);
  publish_other(20);
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_TRUE(wait_until(
      [&] {
        return (diff = describe_diff(other_model.expected(), server_view(env.server, "fault-1")))
            .empty();
      },
      10s))
      << diff;
  EXPECT_LE(env.d->metrics().value("kvrelay_actor_restarts_total",
                                   {{"replica", "fault-1"}, {"unit", "emitter"}}),
            0);
  EXPECT_LE(env.d->metrics().value("kvrelay_resyncs_total", {{"replica", "fault-1"}}), 0)
      << "the healthy pipeline must not have resynced";
  other.stop();
}

// Serves one Prometheus fixture on loopback, like an engine's /metrics.
class metrics_endpoint {
 public:
  explicit metrics_endpoint(std::string body) : body_(std::move(body)) {
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      ++hits;
      res.set_content(body_, "text/plain; version=0.0.4");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~metrics_endpoint() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/metrics"; }
  std::atomic<int> hits{0};

 private:
  std::string body_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(ScraperCrash, RestartsAloneAndStatsKeepFlowing) {
  metrics_endpoint engine_metrics(read_file(KVRELAY_FIXTURES_DIR "/metrics/vllm_metrics_gpu.txt"));
  fault_env env;
  env.cfg.engines[0].metrics.url = engine_metrics.url();
  env.cfg.engines[0].metrics.interval = 100ms;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  ASSERT_EQ(env.wait_consistent(), "");
  ASSERT_TRUE(wait_until([&] { return env.server.index().has_stats(tenant, model, replica); }, 5s));

  ASSERT_TRUE(env.d->crash(replica, "scraper"));
  ASSERT_TRUE(wait_until([&] { return restarts(env, "scraper") >= 1; }, 5s));
  const auto stats_before = env.server.index().counters().stats_updates;
  const int hits_before = engine_metrics.hits.load();
  EXPECT_TRUE(wait_until(
      [&] { return env.server.index().counters().stats_updates >= stats_before + 3; }, 5s))
      << "stats stopped after the scraper restarted";
  EXPECT_GT(engine_metrics.hits.load(), hits_before);
  EXPECT_EQ(restarts(env, "scraper"), 1);
  EXPECT_LE(restarts(env, "datapath"), 0);
  EXPECT_LE(restarts(env, "emitter"), 0);
  env.publish_steps(20);
  EXPECT_EQ(env.wait_consistent(), "");
}

TEST(ShardCrash, ClearsAndRebuildsFromReplay) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(80);
  ASSERT_EQ(env.wait_consistent(), "");
  const auto clears_before = server_clears(env);

  const auto t0 = steady::now();
  ASSERT_TRUE(env.d->crash(replica, "shard"));
  env.publish_steps(40);  // arrives while the data path restarts: replay must cover it
  EXPECT_TRUE(wait_until([&] { return server_clears(env) > clears_before; }, 5s))
      << "a shard crash must send ALL_CLEARED (no hint nothing can evict)";
  EXPECT_EQ(recovered(env, "shard_crash_to_consistent_ms", t0), "");
  EXPECT_EQ(restarts(env, "datapath"), 1);
  EXPECT_LE(restarts(env, "emitter"), 0);
  env.publish_steps(20);
  EXPECT_EQ(env.wait_consistent(), "");
}

TEST(PolicyServerOutage, RestartedEmptyIsRebuiltByResync) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(60);
  ASSERT_EQ(env.wait_consistent(), "");

  env.server.stop();
  // Events keep flowing for ~2 s while the server is gone.
  for (int i = 0; i < 40; ++i) {
    env.publish_steps(3);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(wait_until([&] { return env.metric("kvrelay_units_failed_total") > 0; }, 3s));
  ASSERT_TRUE(env.server.restart(/*empty_index=*/true));
  const auto t0 = steady::now();
  ASSERT_EQ(env.server.index().entries(), 0u);
  env.publish_steps(10);
  EXPECT_EQ(recovered(env, "server_back_empty_to_consistent_ms", t0, 20s), "");
  EXPECT_GE(env.metric("kvrelay_resyncs_total"), 1);
  EXPECT_TRUE(wait_until([&] { return env.d->ready(); }, 5s));
}

TEST(PolicyServerBlackHole, IngestionKeepsUpMemoryBoundedThenResyncs) {
  fault_env env;
  env.cfg.server.rpc_timeout = 300ms;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(40);
  ASSERT_EQ(env.wait_consistent(), "");

  env.server.set_black_hole(true);
  const auto ops_before = env.model.ops();
  const auto resident_before = env.model.resident();
  double max_pending = 0;
  const auto end = std::chrono::steady_clock::now() + 2500ms;
  while (std::chrono::steady_clock::now() < end) {
    env.publish_steps(5);
    max_pending = std::max(max_pending, env.metric("kvrelay_pending_entries"));
    std::this_thread::sleep_for(10ms);
  }
  const auto published = env.engine->next_seq();
  // Ingestion never waits on the server: every batch is decoded, in order, without a gap.
  EXPECT_TRUE(wait_until(
      [&] { return env.metric("kvrelay_batches_total") >= static_cast<double>(published); }, 5s))
      << "decoded " << env.metric("kvrelay_batches_total") << " of " << published;
  EXPECT_LE(env.metric("kvrelay_seq_gaps_total"), 0);
  EXPECT_LE(env.metric("kvrelay_history_lost_total"), 0);
  // A unit reaches the emitter one window after its batch was decoded (later on a slow run,
  // e.g. under TSan): wait for its failure rather than assume it happened already.
  EXPECT_TRUE(wait_until([&] { return env.metric("kvrelay_units_failed_total") > 0; }, 10s))
      << "calls must time out (rpc_timeout)";
  const auto deadline_exceeded = [&](const char* method) {
    return std::max(0.0, env.metric("kvrelay_rpc_total", {{"target", env.cfg.server.address},
                                                          {"method", method},
                                                          {"code", "DEADLINE_EXCEEDED"}}));
  };
  EXPECT_GT(deadline_exceeded("ReportCacheState") + deadline_exceeded("PublishEvent"), 0)
      << "a server that never answers must end each call at the 300 ms deadline";
  // Pending is final state per key: bounded by the keys that changed during the outage (plus
  // a re-report of what was resident), never by the number of events.
  EXPECT_GT(max_pending, 0);
  EXPECT_LE(max_pending, static_cast<double>(env.model.ops() - ops_before + resident_before));
  EXPECT_LE(env.server.held_calls(), 16u) << "held calls must be cancelled by the deadline";

  env.server.set_black_hole(false);
  EXPECT_EQ(recovered(env, "black_hole_released_to_consistent_ms", steady::now(), 20s), "");
}

TEST(EngineRestart, SequenceResetClearsAndReindexes) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(60);
  ASSERT_TRUE(env.wait_live());
  ASSERT_EQ(env.wait_consistent(), "");

  const auto t0 = steady::now();
  env.engine->restart_incarnation();
  env.model.forget();
  env.publish_steps(30);
  EXPECT_EQ(recovered(env, "engine_restart_to_consistent_ms", t0), "");
  EXPECT_EQ(env.ingress_field("incarnation_resets"), 1);
}

// The daemon caught up entirely from the replay ring (the engine published everything before
// the SUB joined, then went quiet), and then the engine restarted. The new incarnation's seqs
// 0, 1, ... are below what the replay delivered but no live seq was ever seen, so the tracker
// must still recognise a new engine instead of dropping its batches as duplicates.
TEST(EngineRestart, AfterCatchingUpOnlyFromReplay) {
  fault_env env;
  env.publish_steps(60);  // before the daemon exists: only the replay can deliver these
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err, /*sync=*/false)) << err;
  ASSERT_EQ(env.wait_consistent(), "");
  ASSERT_LE(env.ingress_field("messages"), 0) << "precondition: nothing arrived live";

  env.engine->restart_incarnation();
  env.model.forget();
  env.publish_steps(30);
  EXPECT_EQ(env.wait_consistent(5s), "");
  EXPECT_EQ(env.ingress_field("incarnation_resets"), 1);
}

TEST(EngineAbsentAtStart, IndexesOnceItAppears) {
  // Learn two free ports, then leave them empty while the daemon starts.
  std::string live, replay;
  {
    fake::publisher_options p;
    p.replay_bind = "tcp://127.0.0.1:*";
    fake::publisher probe(p);
    live = probe.live_endpoint();
    replay = probe.replay_endpoint();
  }
  fault_env::options o;
  o.start_engine = false;
  fault_env env(o);
  env.cfg.engines[0].endpoint = live;
  env.cfg.engines[0].replay_endpoint = replay;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  // The proof the daemon had every chance to call itself ready: the policy server acknowledged,
  // so the one reason left is the engine's. A daemon that wrongly became ready would not stay
  // in this state, and the wait would fail.
  std::vector<std::string> why;
  EXPECT_TRUE(wait_until(
      [&] {
        why.clear();
        return !env.d->ready(&why) && why.size() == 1 &&
               why[0].find("no batch decoded and no catch-up finished yet") != std::string::npos;
      },
      10s))
      << "reasons: " << ::testing::PrintToString(why);
  EXPECT_FALSE(env.d->ready());

  const auto t0 = steady::now();
  env.start_engine(live, replay);
  env.publish_steps(50);
  EXPECT_EQ(recovered(env, "engine_appeared_to_consistent_ms", t0, 20s), "");
  EXPECT_TRUE(wait_until([&] { return env.d->ready(); }, 5s));
}

// Drains and checks that the server holds exactly what the engine held when the drain began.
void drain_and_compare(fault_env& env) {
  const auto want = env.model.expected();
  const auto last_seq = env.engine->next_seq() - 1;
  const auto t0 = std::chrono::steady_clock::now();
  const auto reports = env.d->drain(5s);
  const auto took = std::chrono::steady_clock::now() - t0;
  const bool drained = daemon::all_complete(reports);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].timed_out);
  EXPECT_EQ(reports[0].pending, 0) << "nothing left undelivered";
  EXPECT_EQ(reports[0].left_on_server(), static_cast<int64_t>(want.size()))
      << "on_shutdown = keep: the server keeps what the engine holds";
  std::printf("[ measure  ] drain of %llu batches: %lld ms\n",
              static_cast<unsigned long long>(last_seq + 1),
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_TRUE(drained);
  EXPECT_EQ(describe_diff(want, server_view(env.server)), "")
      << "published seqs 0.." << last_seq << "; decoded " << env.metric("kvrelay_batches_total")
      << " batches; drain took "
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// Steady heavy load (~1500 engine steps/s, several times a real engine's event rate); the drain
// starts the moment the publisher stops.
TEST(Drain, UnderSteadyLoadEverythingPublishedBeforeItArrives) {
  fault_env env;
  env.cfg.engines[0].window = 2000ms;  // only the final flush can deliver the last adds
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(20);
  ASSERT_TRUE(env.wait_live());
  ASSERT_EQ(env.wait_consistent(), "");

  std::atomic<bool> stop{false};
  std::thread load([&] {
    while (!stop.load()) {
      env.publish_steps(3);
      std::this_thread::sleep_for(2ms);
    }
  });
  std::this_thread::sleep_for(700ms);
  stop = true;
  load.join();
  drain_and_compare(env);
}

// The default, server.on_shutdown = clear: the drain ends with ALL_CLEARED, so the server holds
// nothing of the replica afterwards and the report says so.
TEST(Drain, DefaultClearLeavesTheServerNothingOfTheReplica) {
  fault_env env;
  env.cfg.server.on_shutdown = config::shutdown_action::clear;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(30);
  ASSERT_TRUE(env.wait_live());
  ASSERT_EQ(env.wait_consistent(), "");
  ASSERT_FALSE(server_view(env.server).empty()) << "the server held the engine's blocks";
  const auto reports = env.d->drain(5s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].complete) << reports[0].failed_step;
  EXPECT_TRUE(reports[0].final_clear);
  EXPECT_EQ(reports[0].left_on_server(), 0);
  EXPECT_TRUE(server_view(env.server).empty()) << "ALL_CLEARED was the last unit";
}

// A burst the daemon has not read yet when the drain begins: batches already queued in the SUB
// socket were published before the drain, so they must reach the server too.
TEST(Drain, RightAfterABurstEverythingPublishedBeforeItArrives) {
  fault_env env;
  env.cfg.engines[0].window = 2000ms;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(20);
  ASSERT_TRUE(env.wait_live());
  ASSERT_EQ(env.wait_consistent(), "");
  env.publish_steps(400);
  drain_and_compare(env);
}

}  // namespace
}  // namespace kvrelay::faults
