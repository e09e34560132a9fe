// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The durable index against the real binary: SIGKILL at random moments under traffic, many
// times, with an engine ring (50 batches, 1 s at this load) far shorter than the time since the
// last snapshot (tens of seconds here: with the delta log kvrelay snapshots once a few seconds
// after a start and then only to compact the log, and no kvrelay here lives that long). Every restart must be exact
// (the engine process is the same throughout): the snapshot, then the log's batches, then the
// ring only for what followed the log's last batch.

#include <gtest/gtest.h>

#include <csignal>
#include <random>
#include <regex>

#include "tests/durable/durable_fixture.hpp"

namespace kvrelay::durable_e2e {
namespace {

const std::string binary = KVRELAY_BINARY_DIR "/kvrelay";

// The log_batches=<n> of the "durable index restored" line (-1 when none).
long restored_log_batches(const std::string& err) {
  static const std::regex line("durable index restored[^\\n]* log_batches=([0-9]+)");
  std::smatch m;
  return std::regex_search(err, m, line) ? std::stol(m[1].str()) : -1;
}

TEST(DurableLogProcess, SigkillAtRandomMomentsIsExactWithARingFarShorterThanSinceTheSnapshot) {
  faults::temp_dir dir;
  fault_env::options o;
  o.buffer_steps = 50;  // ~1 s at the load below: what kvrelay has not read at a kill must fit
  fault_env env(o);
  engine_metrics metrics;
  const std::string state = dir.path() + "/state";
  dir.write("kvrelay.toml", config_for(env, state, metrics.url(), "0"));
  engine_load load(env);
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  int beyond_ring = 0;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    faults::child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    ASSERT_GT(p.pid(), 0);
    if (round % 3 == 2) {
      // A random moment of the restore itself (reading, replaying the log, proving the engine),
      // the engine quiet meanwhile.
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
    } else {
      // A random moment under traffic: appending, compacting, writing a snapshot. The traffic
      // starts once kvrelay is live: what an engine publishes while kvrelay is not there at all
      // only its ring can give back.
      ASSERT_TRUE(wait_relay_live(env, p)) << p.err();
      load.resume(std::chrono::milliseconds(20));
      std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 1700));
    }
    p.signal(SIGKILL);
    ASSERT_TRUE(p.wait(5s).has_value());
    load.pause();
    // The next start must bring the server to the engine's truth, exactly.
    faults::child_process q({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    ASSERT_GT(q.pid(), 0);
    EXPECT_EQ(env.wait_consistent(20s), "") << q.err();
    ASSERT_TRUE(wait_relay_live(env, q)) << q.err();
    EXPECT_EQ(q.err().find("history lost"), std::string::npos) << q.err();
    EXPECT_EQ(q.err().find("discarded"), std::string::npos) << q.err();
    const long replayed = restored_log_batches(q.err());
    EXPECT_GE(replayed, 0) << "restored from the durable state: " << q.err();
    beyond_ring += replayed > static_cast<long>(o.buffer_steps);
    q.signal(SIGKILL);
    ASSERT_TRUE(q.wait(5s).has_value());
  }
  // The point of the test: most restarts needed more than the ring could give.
  EXPECT_GE(beyond_ring, 5) << "restarts that replayed more logged batches than the ring holds";
}

}  // namespace
}  // namespace kvrelay::durable_e2e
