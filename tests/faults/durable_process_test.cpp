// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Issue 22, the durable index against the real binary: SIGKILL at random moments, many times,
// while the engine publishes. A SIGKILL can land anywhere, a snapshot being written included: the
// file must then hold the previous snapshot or the new one, never a torn one, and the restarted
// daemon must be exact whenever the engine's ring covers the time since the last snapshot, and
// cleanly cold-started otherwise (nothing stale on the server).

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <random>
#include <thread>

#include "base/snapshot_format.hpp"
#include "tests/support/fault_fixture.hpp"
#include "tools/fake-engine/engine_http.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string binary = KVRELAY_BINARY_DIR "/kvrelay";

std::string config_for(fault_env& env, const std::string& state_dir,
                       const std::string& metrics_url, const std::string& interval) {
  return "[server]\naddress = \"" + env.server.target() +
         "\"\nrpc_timeout = \"500ms\"\n\n[admin]\nlisten = \"\"\n\n[state]\ndir = \"" + state_dir +
         "\"\ninterval = \"" + interval + "\"\n\n[log]\nformat = \"text\"\nlevel = \"info\"\n\n"
         "[[engine]]\nreplica_id = \"" + std::string(replica) + "\"\nmodel_id = \"" + model +
         "\"\ntenant_id = \"" + tenant + "\"\nendpoint = \"" + env.engine->live_endpoint() +
         "\"\nreplay_endpoint = \"" + env.engine->replay_endpoint() + "\"\ntopic = \"" + topic +
         "\"\nwindow = \"10ms\"\nreconnect_backoff = \"100ms\"\n\n[engine.metrics]\nurl = \"" +
         metrics_url + "\"\ninterval = \"1s\"\n";
}

// The engine publishes on its own thread until told to pause; pausing waits for it to stop.
struct engine_load {
  explicit engine_load(fault_env& e) : env(e) {}
  ~engine_load() { pause(); }
  void resume(std::chrono::microseconds gap) {
    pause();
    running = true;
    worker = std::thread([this, gap] {
      while (running.load()) {
        env.publish_steps(1);
        std::this_thread::sleep_for(gap);
      }
    });
  }
  void pause() {
    running = false;
    if (worker.joinable()) worker.join();
  }
  fault_env& env;
  std::atomic<bool> running{false};
  std::thread worker;
};

// The snapshot file, if any, must decode: a kill mid-write leaves the old one (SF2: a torn file
// would be truncated).
void expect_untorn(const std::string& state_dir, int round) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir, ec)) {
    if (e.path().extension() != ".kvsnap") continue;
    const auto d = snapshot::decode(read_file(e.path().string()));
    EXPECT_TRUE(d.snapshot) << "round " << round << ": " << e.path() << ": "
                            << snapshot::to_string(d.why) << " " << d.detail;
  }
}

// Every entry the server holds is one the engine holds (nothing stale after a clear).
bool server_within_truth(fault_env& env) {
  const auto want = env.model.expected();
  for (const auto& [k, v] : server_view(env.server))
    if (!want.count(k)) return false;
  return true;
}

TEST(DurableProcess, SigkillAtRandomMomentsIsExactWhileTheRingCoversIt) {
  temp_dir dir;
  fault_env::options o;
  o.buffer_steps = 3000;  // ~30 s at the load below: far longer than a snapshot interval
  fault_env env(o);
  fake::engine_http metrics{fake::engine_description{}, "127.0.0.1", 0, nullptr};
  const std::string state = dir.path() + "/state";
  dir.write("kvrelay.toml", config_for(env, state, metrics.url() + "/metrics", "50ms"));
  engine_load load(env);
  std::mt19937_64 rng(std::random_device{}());
  uint64_t restored = 0;
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    ASSERT_GT(p.pid(), 0);
    load.resume(10ms);
    // Somewhere between the restore and a few dozen snapshots later (writes every 50 ms, so a
    // kill often lands inside one).
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 1500));
    p.signal(SIGKILL);
    ASSERT_TRUE(p.wait(5s).has_value());
    restored += p.err().find("durable index restored") != std::string::npos;
    expect_untorn(state, round);
    load.pause();
    // The next daemon must bring the server to the engine's truth from the snapshot and the ring.
    child_process q({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    ASSERT_GT(q.pid(), 0);
    EXPECT_EQ(env.wait_consistent(20s), "") << q.err();
    EXPECT_EQ(q.err().find("history lost"), std::string::npos) << q.err();
    q.signal(SIGKILL);
    ASSERT_TRUE(q.wait(5s).has_value());
  }
  EXPECT_GE(restored, 6u) << "most rounds must have started from a snapshot";
}

TEST(DurableProcess, SigkillBeyondTheRingColdStartsCleanly) {
  temp_dir dir;
  fault_env::options o;
  o.buffer_steps = 20;  // ~0.2 s at the load below: shorter than most restarts
  fault_env env(o);
  fake::engine_http metrics{fake::engine_description{}, "127.0.0.1", 0, nullptr};
  const std::string state = dir.path() + "/state";
  dir.write("kvrelay.toml", config_for(env, state, metrics.url() + "/metrics", "50ms"));
  engine_load load(env);
  std::mt19937_64 rng(std::random_device{}());
  int moved_on = 0;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    load.resume(10ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
    p.signal(SIGKILL);
    ASSERT_TRUE(p.wait(5s).has_value());
    expect_untorn(state, round);
    std::this_thread::sleep_for(500ms);  // the engine publishes past the ring while it is down
    child_process q({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    std::this_thread::sleep_for(1s);
    load.pause();
    // Exact, or (the ring moved on) cleared and rebuilt from what it has: never a stale entry.
    const bool ok = wait_until(
        [&] {
          return env.wait_consistent(0ms).empty() ||
                 (q.err().find("ring_moved_on") != std::string::npos && server_within_truth(env));
        },
        20s);
    EXPECT_TRUE(ok) << env.wait_consistent(0ms) << q.err();
    moved_on += q.err().find("ring_moved_on") != std::string::npos;
    q.signal(SIGKILL);
    ASSERT_TRUE(q.wait(5s).has_value());
  }
  EXPECT_GE(moved_on, 1) << "the ring must have moved on in some rounds";
}

}  // namespace
}  // namespace kvrelay::faults
