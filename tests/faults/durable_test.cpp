// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The durable index, end to end on real sockets: a fake engine whose replay ring is much
// shorter than its history (40 batches), its /metrics (the process start time that proves its
// incarnation), an in-process policy server, and the daemon with a state dir. Every test compares
// the server's index with the engine model's truth.

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "durable/format/snapshot_format.hpp"
#include "tests/support/fault_fixture.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/fake-engine/wire_encoder.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr size_t short_ring = 40;

// The engine's HTTP server, for its /metrics (process_start_time_seconds).
struct engine_metrics {
  fake::engine_http http{fake::engine_description{}, "127.0.0.1", 0, nullptr};
  std::string url() const { return http.url() + "/metrics"; }
  void restarted() {
    http.update([](fake::engine_description& d) { d.process_start_time += 17.5; });
  }
};

struct durable_env {
  explicit durable_env(size_t ring = short_ring, engine_model::options m = {})
      : env([&] {
          fault_env::options o;
          o.buffer_steps = ring;
          o.model = m;
          return o;
        }()) {
    env.cfg.state.dir = dir.path() + "/state";
    env.cfg.state.interval = 200ms;
    env.cfg.engines[0].metrics.url = metrics.url();
    if (std::getenv("DURABLE_TEST_LOG")) env.cfg.log.level = config::log_level::debug;
  }
  temp_dir dir;
  engine_metrics metrics;
  fault_env env;

  // The one snapshot file of the single pipeline (empty when none).
  std::string snapshot_path() const {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(env.cfg.state.dir, ec))
      if (e.path().extension() == ".kvsnap") return e.path().string();
    return {};
  }
  bool start(std::string* err = nullptr) { return env.start_daemon(err); }
  // SIGTERM's path (daemon/main.cpp): the drain (final flush, last snapshot), then the stop.
  void stop() {
    env.d->drain(5s);
    env.d->stop();
    env.d.reset();
  }
  double restores(const char* outcome) const {
    return env.metric("kvrelay_snapshot_restores_total", {{"outcome", outcome}});
  }
  double discards(const char* reason) const {
    return env.metric("kvrelay_snapshot_discards_total", {{"reason", reason}});
  }
  // Waits for a snapshot written at or after `next_seq` (bounded).
  bool wait_snapshot(uint64_t next_seq, std::chrono::milliseconds timeout = 10s) {
    return wait_until(
        [&] {
          const auto p = snapshot_path();
          if (p.empty()) return false;
          const auto bytes = read_file(p);
          const auto d = snapshot::decode(bytes);
          return d.snapshot && d.snapshot->next_seq >= next_seq;
        },
        timeout);
  }
};

// The first "Done when": a SIGTERM restart is exact, including a block stored before the
// ring's window and evicted after the restart, and a policy server that then restarts empty.
TEST(DurableIndex, SigtermRestartIsExactIncludingPreWindowEvictionsAndAnEmptyServer) {
  durable_env t;
  auto& env = t.env;
  std::string err;
  ASSERT_TRUE(t.start(&err)) << err;
  env.publish_steps(200);  // five rings' worth of history
  ASSERT_EQ(env.wait_consistent(), "");
  const auto before = env.model.expected();
  t.stop();  // SIGTERM's path: drain, final flush, last snapshot
  ASSERT_FALSE(t.snapshot_path().empty());
  env.publish_steps(20);  // while kvrelay is down; within the ring
  ASSERT_TRUE(t.start(&err)) << err;
  EXPECT_EQ(env.wait_consistent(), "") << "restored and replayed";
  EXPECT_EQ(t.restores("restored"), 1);
  EXPECT_EQ(env.metric("kvrelay_history_lost_total"), 0);
  EXPECT_EQ(env.metric("kvrelay_index_incomplete"), 0);
  // Churn until blocks stored before the ring's window are evicted, on the server too. 150
  // steps of churn take the TSan-built daemon more than the default 10 s to deliver with other
  // tests beside it (it was still sending when one run timed out): wait up to 30 s.
  env.publish_steps(150);
  ASSERT_EQ(env.wait_consistent(std::chrono::seconds(30)), "");
  size_t evicted_old = 0;
  const auto now = env.model.expected();
  for (const auto& [key, value] : before) evicted_old += now.count(key) == 0;
  EXPECT_GT(evicted_old, 100u) << "the test must evict blocks stored before the ring's window";
  // A server that restarts empty gets everything again (the pre-window blocks included).
  env.server.stop();
  ASSERT_TRUE(env.server.restart(/*empty_index=*/true));
  env.publish_steps(5);
  EXPECT_EQ(env.wait_consistent(20s), "");
}

// The control: without a state dir the same restart forgets what was stored before the ring's
// window (the measurement), and says so.
TEST(DurableIndex, WithoutAStateDirTheSameRestartLosesThePreWindowBlocks) {
  fault_env::options o;
  o.buffer_steps = short_ring;
  fault_env env(o);
  ASSERT_TRUE(env.start_daemon());
  env.publish_steps(200);
  ASSERT_EQ(env.wait_consistent(), "");
  env.d->stop();
  env.d.reset();
  env.publish_steps(5);
  ASSERT_TRUE(env.start_daemon());
  EXPECT_TRUE(wait_until([&] { return env.metric("kvrelay_index_incomplete") == 1; }, 10s));
  EXPECT_NE(describe_diff(env.model.expected(), server_view(env.server)), "");
}

// The engine restarted while kvrelay was down and published past kvrelay's last sequence: its
// ring answers the resume from the old seq with batches of another process. Only the proof can
// tell; nothing of the old engine may survive.
TEST(DurableIndex, EngineRestartedWhileDownIsNeverTakenForTheOldOne) {
  durable_env t(/*ring=*/100000);  // the new engine's whole history: its cold start is exact
  auto& env = t.env;
  ASSERT_TRUE(t.start());
  const uint64_t last = env.publish_steps(60);
  ASSERT_EQ(env.wait_consistent(), "");
  t.stop();
  env.engine->restart_incarnation();
  env.model.forget();
  t.metrics.restarted();
  const uint64_t new_last = env.publish_steps(80);
  ASSERT_GT(new_last, last + 1) << "the new engine must publish past the old last seq";
  ASSERT_TRUE(t.start());
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(t.restores("discarded"), 1);
  EXPECT_EQ(t.discards("engine_restarted"), 1);
}

TEST(DurableIndex, CorruptAndTruncatedFilesAreDiscardedWithTheirReason) {
  durable_env t(/*ring=*/100000);  // the cold start can rebuild: exact either way
  auto& env = t.env;
  ASSERT_TRUE(t.start());
  const uint64_t last = env.publish_steps(50);
  ASSERT_EQ(env.wait_consistent(), "");
  ASSERT_TRUE(t.wait_snapshot(last + 1));
  t.stop();
  const auto path = t.snapshot_path();
  auto bytes = read_file(path);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  t.dir.write("state/" + fs::path(path).filename().string(), bytes);
  ASSERT_TRUE(t.start());
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(t.discards("corrupt"), 1);
  // The delta log still holds this short history from its start: it restored alone.
  EXPECT_EQ(t.restores("restored"), 1);
  // Truncated (a torn copy of a file, as no kvrelay write leaves one).
  ASSERT_TRUE(t.wait_snapshot(last + 1));
  t.stop();
  bytes = read_file(path);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(bytes.size() / 3)), 0);
  ASSERT_TRUE(t.start());
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(t.discards("truncated"), 1);
  // A snapshot since covered the log's start (its segment went): the log alone cannot restore.
  EXPECT_EQ(t.restores("restored"), 0);
}

// A discard that leaves the index incomplete (the ring is short) says so on /readyz, with the
// reason, as a degraded line (the pipeline stays ready).
TEST(DurableIndex, ADiscardThatLeavesTheIndexIncompleteIsOnReadyz) {
  durable_env t;
  auto& env = t.env;
  env.cfg.admin.listen = "127.0.0.1:0";
  ASSERT_TRUE(t.start());
  const uint64_t last = env.publish_steps(100);
  ASSERT_EQ(env.wait_consistent(), "");
  ASSERT_TRUE(t.wait_snapshot(last + 1));
  t.stop();
  t.dir.write("state/" + fs::path(t.snapshot_path()).filename().string(), "not a snapshot");
  // Without the delta log (which would restore this short history alone): the snapshot only.
  for (const auto& e : fs::directory_iterator(t.dir.path() + "/state"))
    if (e.path().extension() == ".kvlog") fs::remove(e.path());
  ASSERT_TRUE(t.start());
  ASSERT_TRUE(wait_until([&] { return env.metric("kvrelay_index_incomplete") == 1; }, 10s));
  const auto r = http_get(env.d->admin_port(), "/readyz");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("durable index not restored: the file is not a kvrelay snapshot"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(t.discards("not_a_snapshot"), 1);
  const auto engines = http_get(env.d->admin_port(), "/debug/engines");
  EXPECT_NE(engines.body.find("\"restore_reason\":\"not_a_snapshot\""), std::string::npos)
      << engines.body;
}

// LoRA: several partitions, and an adapter name added at runtime, survive the restart.
TEST(DurableIndex, AdaptersAndRuntimeAddedNamesSurviveARestart) {
  engine_model::options m;
  m.lora_fraction = 0.5;
  m.lora_names = false;  // lora_id only: the name must come from the map
  durable_env t(short_ring, m);
  auto& env = t.env;
  env.cfg.admin.listen = "127.0.0.1:0";
  ASSERT_TRUE(t.start());
  const auto added = http_post(env.d->admin_port(),
                               "/debug/adapters?replica=" + std::string(replica) + "&id=1&name=" +
                                   lora);
  ASSERT_EQ(added.status, 200) << added.body;
  env.publish_steps(150);
  ASSERT_EQ(env.wait_consistent(), "");
  t.stop();
  env.publish_steps(10);
  ASSERT_TRUE(t.start());
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(t.restores("restored"), 1);
  env.publish_steps(60);  // new stores under lora_id 1 need the restored name
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(env.metric("kvrelay_unmapped_adapter_events_total"), 0);
}

// A restart the ring no longer covers (kvrelay down longer than the ring's span): the snapshot
// is discarded when the resume finds the ring moved on (RD6), and the pipeline clears.
TEST(DurableIndex, ARestartLongerThanTheRingDiscardsAndClears) {
  durable_env t;
  auto& env = t.env;
  ASSERT_TRUE(t.start());
  env.publish_steps(100);
  ASSERT_EQ(env.wait_consistent(), "");
  t.stop();
  env.publish_steps(3 * short_ring);  // the ring no longer reaches back
  ASSERT_TRUE(t.start());
  ASSERT_TRUE(wait_until([&] { return t.discards("ring_moved_on") == 1; }, 10s));
  EXPECT_EQ(env.metric("kvrelay_index_incomplete"), 1);
  // What the server holds is a subset of the truth: nothing stale survived the clear.
  env.publish_steps(5);
  ASSERT_TRUE(wait_until(
      [&] {
        const auto want = env.model.expected();
        for (const auto& [k, v] : server_view(env.server))
          if (!want.count(k)) return false;
        return true;
      },
      10s));
}

// -- several pipelines: DP ranks and node mode -------------------------------------------------

// One engine publisher (or DP rank of one) with its own truth.
struct source {
  source(const std::string& live, const std::string& replay, int64_t rank, uint64_t seed)
      : model([seed] {
          engine_model::options m;
          m.seed = seed;
          return m;
        }()),
        dp_rank(rank) {
    fake::publisher_options p;
    p.bind = live;
    p.replay_bind = replay;
    p.topic = topic;
    p.buffer_steps = 1000;  // the whole history: these tests are about one file per pipeline
    p.linger_ms = 0;
    p.dp_rank = rank;
    pub = std::make_unique<fake::publisher>(p);
  }
  void steps(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      fake::encode_options eo;
      eo.era = fake::wire_era::d;
      // Adds carry the batch time: a stale one would be invisible (the server's TTL).
      eo.ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
      eo.dp_rank = dp_rank;
      pub->publish(fake::encode_batch(model.step(), eo));
    }
  }
  engine_model model;
  int64_t dp_rank;
  std::unique_ptr<fake::publisher> pub;
};

std::string wait_exact(policy::policy_server& server, const std::string& replica_id,
                       const engine_model& model) {
  std::string diff;
  wait_until(
      [&] {
        diff = describe_diff(model.expected(), server_view(server, replica_id));
        return diff.empty();
      },
      10s);
  return diff;
}

void sigterm(std::unique_ptr<kvrelay::daemon>& d) {
  d->drain(5s);
  d->stop();
  d.reset();
}

// DP=2 (separate): each rank is its own pipeline with its own file, restored on its own.
TEST(DurableIndex, EachDpRankKeepsAndRestoresItsOwnSnapshot) {
  fault_env::options o;
  o.start_engine = false;
  fault_env env(o);
  temp_dir dir;
  engine_metrics metrics;
  // Ranks bind base + rank: find a free base for the live and the replay ports.
  std::vector<std::unique_ptr<source>> ranks;
  std::mt19937 rng(std::random_device{}());
  int base = 0;
  for (int attempt = 0; attempt < 50 && ranks.size() < 2; ++attempt) {
    ranks.clear();
    base = 20000 + static_cast<int>(rng() % 30000);
    try {
      for (int r = 0; r < 2; ++r)
        ranks.push_back(std::make_unique<source>(
            "tcp://127.0.0.1:" + std::to_string(base), "tcp://127.0.0.1:" + std::to_string(base + 2),
            r, 7 + static_cast<uint64_t>(r)));
    } catch (const std::exception&) {
      ranks.clear();
    }
  }
  ASSERT_EQ(ranks.size(), 2u) << "no free port pair";
  auto cfg = make_config(env.server.target(), "tcp://127.0.0.1:" + std::to_string(base),
                         "tcp://127.0.0.1:" + std::to_string(base + 2));
  cfg.engines[0].dp_size = 2;
  cfg.engines[0].metrics.url = metrics.url();
  cfg.state.dir = dir.path() + "/state";
  cfg.state.interval = 200ms;
  auto d = std::make_unique<kvrelay::daemon>(cfg);
  std::string err;
  ASSERT_TRUE(d->start(err)) << err;
  for (auto& r : ranks) r->steps(150);
  const std::string id0 = std::string(replica) + "-dp0", id1 = std::string(replica) + "-dp1";
  ASSERT_EQ(wait_exact(env.server, id0, ranks[0]->model), "");
  ASSERT_EQ(wait_exact(env.server, id1, ranks[1]->model), "");
  sigterm(d);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(cfg.state.dir)) files += e.path().extension() == ".kvsnap";
  EXPECT_EQ(files, 2u) << "one file per rank";
  for (auto& r : ranks) r->steps(10);
  d = std::make_unique<kvrelay::daemon>(cfg);
  ASSERT_TRUE(d->start(err)) << err;
  EXPECT_EQ(wait_exact(env.server, id0, ranks[0]->model), "");
  EXPECT_EQ(wait_exact(env.server, id1, ranks[1]->model), "");
  const auto restored = [&](const std::string& id) {
    return d->metrics().value("kvrelay_snapshot_restores_total",
                              {{"replica", id}, {"outcome", "restored"}});
  };
  EXPECT_EQ(restored(id0), 1);
  EXPECT_EQ(restored(id1), 1);
  sigterm(d);
}

// Node mode: several engines, one file each, restored (or discarded) independently.
TEST(DurableIndex, NodeModeEnginesAreRestoredIndependently) {
  fault_env::options o;
  o.start_engine = false;
  fault_env env(o);
  temp_dir dir;
  engine_metrics metrics_a, metrics_b;
  source a("tcp://127.0.0.1:*", "tcp://127.0.0.1:*", 0, 21);
  source b("tcp://127.0.0.1:*", "tcp://127.0.0.1:*", 0, 22);
  auto cfg = make_config(env.server.target(), a.pub->live_endpoint(), a.pub->replay_endpoint());
  cfg.engines[0].replica_id = "gpu0";
  cfg.engines[0].metrics.url = metrics_a.url();
  cfg.engines.push_back(cfg.engines[0]);
  cfg.engines[1].replica_id = "gpu1";
  cfg.engines[1].endpoint = b.pub->live_endpoint();
  cfg.engines[1].replay_endpoint = b.pub->replay_endpoint();
  cfg.engines[1].metrics.url = metrics_b.url();
  cfg.state.dir = dir.path() + "/state";
  cfg.state.interval = 200ms;
  auto d = std::make_unique<kvrelay::daemon>(cfg);
  std::string err;
  ASSERT_TRUE(d->start(err)) << err;
  a.steps(150);
  b.steps(150);
  ASSERT_EQ(wait_exact(env.server, "gpu0", a.model), "");
  ASSERT_EQ(wait_exact(env.server, "gpu1", b.model), "");
  sigterm(d);
  // While kvrelay is down, gpu1's engine restarts (a new process, its cache empty).
  b.pub->restart_incarnation();
  b.model.forget();
  metrics_b.restarted();
  a.steps(10);
  b.steps(30);
  d = std::make_unique<kvrelay::daemon>(cfg);
  ASSERT_TRUE(d->start(err)) << err;
  EXPECT_EQ(wait_exact(env.server, "gpu0", a.model), "");
  EXPECT_EQ(wait_exact(env.server, "gpu1", b.model), "") << "cold: its ring holds all of it";
  const auto value = [&](const std::string& id, const char* name, label_set l) {
    l.insert(l.begin(), {"replica", id});
    return d->metrics().value(name, l);
  };
  EXPECT_EQ(value("gpu0", "kvrelay_snapshot_restores_total", {{"outcome", "restored"}}), 1);
  EXPECT_EQ(value("gpu1", "kvrelay_snapshot_discards_total", {{"reason", "engine_restarted"}}), 1);
  sigterm(d);
}

TEST(DurableIndex, AnUnwritableStateDirFailsTheStartWithPathAndReason) {
  durable_env t;
  // Under a regular file: no one, root included, can make that directory.
  t.dir.write("plain-file", "x");
  const std::string bad = t.dir.file("plain-file") + "/state";
  t.env.cfg.state.dir = bad;
  std::string err;
  EXPECT_FALSE(t.start(&err));
  EXPECT_NE(err.find("state.dir " + bad), std::string::npos) << err;
  EXPECT_NE(err.find("Not a directory"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvrelay::faults
