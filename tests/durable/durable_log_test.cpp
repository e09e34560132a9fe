// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// in process, on real sockets: a fake engine with a short replay ring and its /metrics,
// an in-process policy server and daemon with a state dir. A daemon stopped without its drain
// leaves what a crash leaves (every record written is in the page cache, no last snapshot).
// Every test compares the server's index with the engine model's truth.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "durable/format/snapshot_log.hpp"
#include "durable/format/snapshot_log_io.hpp"
#include "tests/durable/durable_fixture.hpp"

namespace kvrelay::durable_e2e {
namespace {

namespace fs = std::filesystem;

struct durable_daemon {
  explicit durable_daemon(size_t ring)
      : env([&] {
          fault_env::options o;
          o.buffer_steps = ring;
          return o;
        }()) {
    env.cfg.state.dir = dir.path() + "/state";
    env.cfg.engines[0].metrics.url = metrics.url();
  }
  faults::temp_dir dir;
  engine_metrics metrics;
  fault_env env;

  bool start(std::string* err = nullptr) { return env.start_daemon(err); }
  // SIGTERM's path (daemon/main.cpp): the drain (final flush, last snapshot), then the stop.
  void sigterm() {
    env.d->drain(5s);
    env.d->stop();
    env.d.reset();
  }
  // What a crash leaves: no drain, no last snapshot; what was appended to the log stays.
  void crash() {
    env.d->stop();
    env.d.reset();
  }
  double metric(const char* name, label_set extra = {}) const {
    return env.metric(name, std::move(extra));
  }
  nlohmann::json durable_index() const {
    const auto e = nlohmann::json::parse(env.d->engines_json());
    return e.at(0).value("durable_index", nlohmann::json::object());
  }
  std::vector<snapshot::segment_file> segments() const {
    const auto snaps = files_with(env.cfg.state.dir, ".kvlog");
    if (snaps.empty()) return {};
    // One pipeline: every segment shares its stem.
    const std::string name = fs::path(snaps.front()).filename().string();
    return snapshot::list_segments(env.cfg.state.dir + "/" + name.substr(0, name.size() - 23));
  }
};

// The second "Done when": SIGTERM right after an engine restart. The new process'
// batches arrive live (its ring, 40, holds fewer than it published), the drain writes the last
// snapshot with the evidence it reads now, and the next start is exact.
TEST(DurableLog, SigtermRightAfterAnEngineRestartIsExactAfterTheRestart) {
  durable_daemon t(40);
  auto& env = t.env;
  std::string err;
  ASSERT_TRUE(t.start(&err)) << err;
  env.publish_steps(100);
  ASSERT_EQ(env.wait_consistent(), "");
  env.engine->restart_incarnation();
  env.model.forget();
  t.metrics.restarted();
  env.publish_steps(100);  // more than the new ring holds
  ASSERT_EQ(env.wait_consistent(), "") << "read live";
  t.sigterm();             // right after: the new process' evidence may not be read yet
  ASSERT_TRUE(t.start(&err)) << err;
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(t.metric("kvrelay_snapshot_restores_total", {{"outcome", "restored"}}), 1);
  EXPECT_EQ(t.metric("kvrelay_history_lost_total"), 0);
  EXPECT_EQ(t.metric("kvrelay_index_incomplete"), 0);
  // And it goes on exactly.
  env.publish_steps(30);
  EXPECT_EQ(env.wait_consistent(), "");
}

// A crash right after an engine restart: the log holds the reset and the new process' evidence
// (read when the ingress saw the reset), so the log alone restores the new generation.
TEST(DurableLog, ACrashAfterAnEngineRestartRestoresTheNewGenerationFromTheLog) {
  durable_daemon t(40);
  auto& env = t.env;
  std::string err;
  ASSERT_TRUE(t.start(&err)) << err;
  env.publish_steps(60);
  ASSERT_EQ(env.wait_consistent(), "");
  env.engine->restart_incarnation();
  env.model.forget();
  t.metrics.restarted();
  env.publish_steps(100);
  ASSERT_EQ(env.wait_consistent(), "");
  // The new process' evidence is in the log once the establish step reported it.
  ASSERT_TRUE(faults::wait_until(
      [&] {
        return t.metric("kvrelay_snapshot_writes_total", {{"outcome", "established"}}) >= 1;
      },
      10s));
  t.crash();
  env.publish_steps(10);  // within the ring while kvrelay is down
  ASSERT_TRUE(t.start(&err)) << err;
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(t.metric("kvrelay_snapshot_restores_total", {{"outcome", "restored"}}), 1);
  EXPECT_EQ(t.metric("kvrelay_history_lost_total"), 0);
}

// The third "Done when", the torn tail: a crash, then the log's last record cut short
// (what a crash in the middle of a write leaves). The valid prefix is replayed, the cut record
// asked of the ring, the cut said; exact.
TEST(DurableLog, ATornLogTailIsCutOffSaidAndTheValidPrefixReplayed) {
  durable_daemon t(200);
  auto& env = t.env;
  std::string err;
  ASSERT_TRUE(t.start(&err)) << err;
  env.publish_steps(120);
  ASSERT_EQ(env.wait_consistent(), "");
  t.crash();
  auto segs = t.segments();
  ASSERT_FALSE(segs.empty());
  fs::resize_file(segs.back().path, segs.back().bytes - 7);
  env.publish_steps(10);
  ASSERT_TRUE(t.start(&err)) << err;
  EXPECT_EQ(env.wait_consistent(), "");
  EXPECT_EQ(t.metric("kvrelay_history_lost_total"), 0);
  EXPECT_EQ(t.metric("kvrelay_index_incomplete"), 0);
  const auto d = t.durable_index();
  EXPECT_EQ(d.value("restore", ""), "restored") << d.dump();
  EXPECT_NE(d.value("log_restore_detail", "").find("torn"), std::string::npos) << d.dump();
  EXPECT_GT(d.value("log_replayed_batches", 0), 100) << d.dump();
}

// The third "Done when", corruption: a record early in the log no longer checks. Everything
// after it is dropped and said; the ring (40) no longer reaches back there, so the pipeline
// clears and continues from what the ring has: never a wrong entry on the server.
TEST(DurableLog, ACorruptLogRecordDropsTheRestAndNothingWrongIsIndexed) {
  durable_daemon t(40);
  auto& env = t.env;
  std::string err;
  ASSERT_TRUE(t.start(&err)) << err;
  env.publish_steps(150);
  ASSERT_EQ(env.wait_consistent(), "");
  t.crash();
  auto segs = t.segments();
  ASSERT_FALSE(segs.empty());
  {
    std::fstream f(segs.front().path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(snapshot::log_header_bytes + 300));
    f.put('\x5a');
  }
  env.publish_steps(5);
  ASSERT_TRUE(t.start(&err)) << err;
  // Cleared and rebuilt from what the ring has: every entry the server holds is true.
  EXPECT_TRUE(faults::wait_until(
      [&] { return t.metric("kvrelay_history_lost_total") >= 1 && server_within_truth(env); },
      20s))
      << env.wait_consistent(0ms);
  const auto d = t.durable_index();
  EXPECT_NE(d.value("log_restore_detail", "").find("corrupt"), std::string::npos) << d.dump();
  EXPECT_EQ(t.metric("kvrelay_index_incomplete"), 1) << "the lost history is said";
  // What the engine does from here is indexed exactly (evictions of blocks the index never
  // had are not sent; new blocks are).
  env.publish_steps(40);
  EXPECT_TRUE(faults::wait_until([&] { return server_within_truth(env); }, 20s));
}

// The ring's real span, learnt from the engine's replies: a cold start's catch-up reads a
// 40-batch ring that has dropped 60 entries, which is its whole capacity (RS1). Shown on
// /debug/engines and as a gauge; the snapshot interval would use it instead of ring_batches.
TEST(DurableLog, TheRingsSpanIsLearntFromTheEnginesRepliesAndShown) {
  durable_daemon t(40);
  auto& env = t.env;
  env.publish_steps(100);  // before kvrelay: only the ring has them, and only the last 40
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err, /*sync=*/false)) << err;
  nlohmann::json ring;
  EXPECT_TRUE(faults::wait_until(
      [&] {
        const auto e = nlohmann::json::parse(env.d->engines_json());
        ring = e.at(0).value("replay_ring", nlohmann::json::object());
        return ring.value("batches", 0) == 40 &&
               ring.value("learnt", "").rfind("exact", 0) == 0 &&
               t.metric("kvrelay_replay_ring_batches") == 40;
      },
      10s))
      << ring.dump();
  EXPECT_EQ(ring.value("first_seq", 0), 60) << ring.dump();
}

}  // namespace
}  // namespace kvrelay::durable_e2e
