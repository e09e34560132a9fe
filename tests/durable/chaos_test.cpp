// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The seeded chaos run: the engine model (prefix caching with shared chains, LoRA
// traffic with adapter names, LRU evictions of leaf blocks), a replay ring of 50 batches, the
// real kvrelay with a state dir, and twelve rounds of traffic, each with one fault the seed
// picks: kvrelay SIGKILLed or SIGTERMed (and started again), the policy server restarted empty,
// the engine restarted (a new process), the engine restarted and kvrelay SIGTERMed or SIGKILLed
// right after, a burst. After every round the server must hold exactly what the engine holds.
// Seeds 9, 12, 14 and 15 lost 470-900 blocks in 2-4 rounds each before the delta log (a 50-batch
// ring against a snapshot interval derived from a configured 10 000; a SIGTERM soon after an
// engine restart left no usable snapshot); 1, 10, 11 and 13 did not.
//
// The faults keep what no design could recover out of the schedule: the engine does not publish
// more than its ring while kvrelay is down (the traffic pauses right after a kill, and before a
// SIGTERM, whose drain may take a second; a started kvrelay is waited for until it is live), it
// restarts only while kvrelay runs, and kvrelay is not killed with more unread batches than the
// ring holds.

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "tests/durable/durable_fixture.hpp"

namespace kvrelay::durable_e2e {
namespace {

const std::string binary = KVRELAY_BINARY_DIR "/kvrelay";

enum class fault : int {
  relay_sigkill,
  relay_sigterm,
  server_restart,
  engine_restart,
  engine_restart_then_sigterm,
  engine_restart_then_sigkill,
  burst,
  count
};

const char* name(fault f) {
  switch (f) {
    case fault::relay_sigkill: return "relay SIGKILL";
    case fault::relay_sigterm: return "relay SIGTERM";
    case fault::server_restart: return "policy server restarted empty";
    case fault::engine_restart: return "engine restarted";
    case fault::engine_restart_then_sigterm: return "engine restarted, then relay SIGTERM";
    case fault::engine_restart_then_sigkill: return "engine restarted, then relay SIGKILL";
    case fault::burst: return "burst";
    case fault::count: break;
  }
  return "?";
}

class DurableChaos : public ::testing::TestWithParam<uint64_t> {};

TEST_P(DurableChaos, EveryRoundIsExact) {
  const uint64_t seed = GetParam();
  std::mt19937_64 rng(seed);
  faults::temp_dir dir;
  fault_env::options o;
  o.buffer_steps = 50;
  o.model.seed = seed;
  o.model.capacity = 400;
  o.model.lora_fraction = 0.3;
  fault_env env(o);
  engine_metrics metrics;
  const std::string state = dir.path() + "/state";
  dir.write("kvrelay.toml", config_for(env, state, metrics.url(), "0",
                                       std::getenv("DURABLE_TEST_LOG") ? "debug" : "info"));
  engine_load load(env);

  std::unique_ptr<faults::child_process> relay;
  std::string history;  // every relay's stderr, for a failure's message
  // Started and live: the engine goes on only once kvrelay is there to see it (what it publishes
  // while kvrelay is down beyond its ring no state could recover).
  const auto start_relay = [&] {
    relay = std::make_unique<faults::child_process>(
        std::vector<std::string>{binary, "--config", dir.file("kvrelay.toml")}, dir.path());
    ASSERT_GT(relay->pid(), 0);
    ASSERT_TRUE(wait_relay_live(env, *relay)) << relay->err();
  };
  const auto stop_relay = [&](int sig) {
    relay->signal(sig);
    ASSERT_TRUE(relay->wait(10s).has_value());
    history += relay->err();
    relay.reset();
  };
  // The new engine process' evidence is in the delta log once the relay said so.
  const auto wait_established = [&](size_t before) {
    return faults::wait_until(
        [&] { return occurrences(relay->err(), "new engine incarnation") > before; }, 10s);
  };
  const auto restart_engine = [&] {
    env.engine->restart_incarnation();
    env.model.forget();
    metrics.restarted();
  };

  start_relay();
  env.publish_steps(30);
  ASSERT_EQ(env.wait_consistent(20s), "") << relay->err();
  for (int round = 0; round < 12; ++round) {
    const auto f = static_cast<fault>(rng() % static_cast<uint64_t>(fault::count));
    SCOPED_TRACE("seed " + std::to_string(seed) + " round " + std::to_string(round) + ": " +
                 name(f));
    std::fprintf(stderr, "chaos seed %llu round %d: %s\n", static_cast<unsigned long long>(seed),
                 round, name(f));
    // 50-200 batches/s: a kill lands with fewer unread batches than the ring holds unless
    // kvrelay stalls for a quarter of a second (what it has not read at a SIGKILL, only the
    // ring can give back).
    const auto gap = std::chrono::milliseconds(5 + rng() % 16);
    load.resume(gap);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
    switch (f) {
      case fault::relay_sigkill:
        stop_relay(SIGKILL);
        load.pause();
        start_relay();
        break;
      case fault::relay_sigterm:
        load.pause();
        stop_relay(SIGTERM);
        start_relay();
        break;
      case fault::server_restart:
        env.server.stop();
        ASSERT_TRUE(env.server.restart(/*empty_index=*/true));
        load.pause();
        break;
      case fault::engine_restart:
        load.pause();
        restart_engine();
        env.publish_steps(20 + rng() % 100);
        break;
      case fault::engine_restart_then_sigterm:
        // SIGTERM at once: the new process' evidence may be unread, and its batches still on
        // their way (the drain reads until the socket is quiet for 20 ms); fewer than its ring
        // holds, as what the drain misses only the ring can give back.
        load.pause();
        restart_engine();
        env.publish_steps(20 + rng() % 30);
        stop_relay(SIGTERM);
        start_relay();
        break;
      case fault::engine_restart_then_sigkill: {
        // Killed once the new process' batches are applied (a backlog longer than the ring,
        // killed unread, is lost whatever kvrelay keeps) and its evidence is read: nothing but
        // the log describes the new process then (no snapshot of it yet).
        load.pause();
        const size_t before = occurrences(relay->err(), "new engine incarnation");
        restart_engine();
        env.publish_steps(60 + rng() % 100);
        ASSERT_TRUE(wait_established(before)) << relay->err();
        ASSERT_EQ(env.wait_consistent(30s), "") << relay->err();
        stop_relay(SIGKILL);
        start_relay();
        break;
      }
      case fault::burst:
        load.pause();
        env.publish_steps(300 + rng() % 300);
        break;
      case fault::count: break;
    }
    load.pause();
    const std::string diff = env.wait_consistent(30s);
    ASSERT_EQ(diff, "") << history << relay->err();
    EXPECT_EQ(relay->err().find("history lost"), std::string::npos) << relay->err();
  }
  stop_relay(SIGKILL);
}

// The seeds: those that failed before the delta log, then those that did not.
INSTANTIATE_TEST_SUITE_P(Seeds, DurableChaos, ::testing::Values(9, 12, 14, 15, 1, 10, 11, 13),
                         [](const ::testing::TestParamInfo<uint64_t>& i) {
                           return "seed" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace kvrelay::durable_e2e
