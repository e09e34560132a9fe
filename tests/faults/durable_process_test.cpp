// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The durable index against the real binary: SIGKILL at random moments, many times,
// while the engine publishes. A SIGKILL can land anywhere, a snapshot being written included: the
// file must then hold the previous snapshot or the new one, never a torn one, and the restarted
// daemon must be exact whenever the engine's ring covers the time since the last snapshot, and
// cleanly cold-started otherwise (nothing stale on the server).

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <random>
#include <thread>

#include "base/fingerprint.hpp"
#include "durable/format/snapshot_format.hpp"
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

// The position (next seq) of the newest snapshot in `state_dir` that decodes; nullopt if none.
std::optional<uint64_t> snapshot_position(const std::string& state_dir) {
  std::optional<uint64_t> seq;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir, ec)) {
    if (e.path().extension() != ".kvsnap") continue;
    const auto d = snapshot::decode(read_file(e.path().string()));
    if (d.snapshot) seq = std::max(seq.value_or(0), d.snapshot->next_seq);
  }
  return seq;
}

// A block the engine stores in its first batch and never evicts (the model's counter never draws
// its hash): once the ring has moved past that batch, only a snapshot can bring it back.
struct pinned_block {
  fake::fake_event store;
  std::pair<std::string, std::string> key;
  pinned_block() {
    store.t = fake::fake_event::type::stored;
    store.block_size = 16;
    for (uint32_t t = 0; t < 16; ++t) store.token_ids.push_back(27000 + t);
    store.block_hashes.push_back(fake::fake_hash::u(0x5eed5eed5eed5eedULL));
    key = {"", hex_be8(fingerprint::prefixes(store.token_ids, 16, false, 0).at(0))};
  }
  index_view with(index_view v) const {
    v[key] = {16, 1};
    return v;
  }
};

TEST(DurableProcess, SigkillAtRandomMomentsIsExactWhileTheRingCoversIt) {
  temp_dir dir;
  fault_env::options o;
  // ~10 s at the load below: far longer than a snapshot's age at any kill (one is written every
  // 50 ms), yet passed by the run's history before the first restart, so a cold start could
  // not be exact (the pinned block is older than the ring).
  o.buffer_steps = 1000;
  fault_env env(o);
  fake::engine_http metrics{fake::engine_description{}, "127.0.0.1", 0, nullptr};
  const std::string state = dir.path() + "/state";
  dir.write("kvrelay.toml", config_for(env, state, metrics.url() + "/metrics", "50ms"));
  const pinned_block pinned;
  env.publish_events({pinned.store});
  engine_load load(env);
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    ASSERT_GT(p.pid(), 0);
    const uint64_t started_at = env.engine->next_seq();
    load.resume(10ms);
    // The kill lands at a random moment after this daemon wrote a snapshot of its own (so after
    // its restore, when it had one to restore) and after the ring moved past the pinned block:
    // waited for as states, so a slow start never turns a round into a different test.
    ASSERT_TRUE(wait_until(
        [&] {
          const auto at = snapshot_position(state);
          return at && *at > started_at && env.engine->next_seq() > o.buffer_steps + 50;
        },
        60s))
        << "no snapshot of this daemon's, or the engine is slow\n" << p.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 1500));
    p.signal(SIGKILL);
    ASSERT_TRUE(p.wait(5s).has_value());
    expect_untorn(state, round);
    load.pause();
    // The next daemon must bring the server to the engine's truth from the snapshot and the ring:
    // its start clears the server (so nothing the killed one sent counts), then the pinned block
    // can only come from the snapshot.
    const auto clears = env.server.index().counters().cleared_events;
    child_process q({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    ASSERT_GT(q.pid(), 0);
    ASSERT_TRUE(wait_until(
        [&] { return env.server.index().counters().cleared_events > clears; }, 20s))
        << "the restarted daemon never cleared the server\n" << q.err();
    std::string diff;
    wait_until(
        [&] {
          diff = describe_diff(pinned.with(env.model.expected()), server_view(env.server));
          return diff.empty();
        },
        20s);
    EXPECT_EQ(diff, "") << q.err();
    EXPECT_NE(q.err().find("durable index restored"), std::string::npos) << q.err();
    EXPECT_EQ(q.err().find("history lost"), std::string::npos) << q.err();
    q.signal(SIGKILL);
    ASSERT_TRUE(q.wait(5s).has_value());
  }
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
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    const uint64_t started_at = env.engine->next_seq();
    load.resume(10ms);
    // The kill lands at a random moment after this daemon wrote a snapshot of its own (a state,
    // waited for): the next daemon always finds one, which the ring no longer reaches. A kill
    // before the first write (a slow start) left round 0 with none, so a cold start against a
    // ring that had moved on, incomplete and neither exact nor a discard.
    ASSERT_TRUE(wait_until(
        [&] {
          const auto at = snapshot_position(state);
          return at && *at > started_at;
        },
        30s))
        << "no snapshot of this daemon's\n" << p.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 700));
    p.signal(SIGKILL);
    ASSERT_TRUE(p.wait(5s).has_value());
    expect_untorn(state, round);
    // The engine publishes past the ring while it is down.
    const uint64_t killed_at = env.engine->next_seq();
    ASSERT_TRUE(wait_until([&] { return env.engine->next_seq() > killed_at + 2 * o.buffer_steps; },
                           20s));
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
    EXPECT_NE(q.err().find("ring_moved_on"), std::string::npos)
        << "the engine published two rings past the snapshot\n" << q.err();
    q.signal(SIGKILL);
    ASSERT_TRUE(q.wait(5s).has_value());
  }
}

}  // namespace
}  // namespace kvrelay::faults
