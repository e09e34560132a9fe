// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Issue 27 end to end: kvrelay with a small memory budget (8 MiB: the queues pause the ingress at
// 2 MiB, ZMQ's receive queue holds 128 batches), a real fake engine (ZMQ PUB + replay ROUTER)
// and the demo policy server. A burst many times the budget, and a publish rate beyond what
// kvrelay decodes, both end with kvrelay alive, the overload counted (kvrelay_overloads_total),
// /readyz saying so while it lasts, the queues within the budget, and the index exact again:
// through replay where the ring held what was dropped, else through the declared loss and the
// engine's next clear.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <chrono>
#include <sstream>
#include <thread>

#include "runtime/daemon.hpp"
#include "base/metrics_registry.hpp"
#include "tests/support/harness.hpp"

namespace kvrelay::e2e {
namespace {

constexpr int64_t bs = 16;
constexpr uint32_t blocks_per_batch = 256;
constexpr uint32_t chunks = 24;  // distinct prefixes: chunks x 256 blocks
constexpr uint64_t budget = uint64_t{8} << 20;

// The text of one series ("name" or "name{labels}") in a /metrics rendering; -1 when absent.
double scrape(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

std::vector<uint32_t> chunk_tokens(uint32_t c) {
  return token_range(1000 + c * blocks_per_batch * bs, blocks_per_batch * bs);
}

// Chunk c: one BlockStored of 256 root-anchored blocks (about 14 KB on the wire).
std::string chunk_payload(uint32_t c, bool clear_first = false) {
  std::vector<fake::fake_hash> hashes;
  for (uint32_t i = 0; i < blocks_per_batch; ++i) {
    fake::fake_hash h;
    h.value = 0x5100000000ull + uint64_t{c} * blocks_per_batch + i + 1;
    hashes.push_back(h);
  }
  std::vector<fake::fake_event> ev;
  if (clear_first) ev.push_back(cleared());
  ev.push_back(stored(std::move(hashes), chunk_tokens(c), bs));
  return fake::encode_batch(ev, fake::encode_options{});
}

struct Overload : ::testing::Test {
  std::unique_ptr<harness> h;
  std::vector<std::string> payloads;
  // Sampled by a watcher thread while the engine publishes.
  std::atomic<bool> watching{false};
  std::atomic<bool> saw_overloaded_readyz{false};
  std::atomic<double> peak_queue_bytes{0};
  std::thread watcher;

  // The engine's live PUB holds `sndhwm` batches for kvrelay; past that it drops (a gap).
  void start(int sndhwm) {
    harness_options o;
    o.ring_size = 10000;
    o.live_sndhwm = sndhwm;
    o.tweak = [](config::daemon_config& c) { c.memory.budget = static_cast<int64_t>(budget); };
    h = std::make_unique<harness>(std::move(o));
    ASSERT_TRUE(h->start_daemon()) << h->error();
    for (uint32_t c = 0; c < chunks; ++c) payloads.push_back(chunk_payload(c));
  }
  void TearDown() override {
    stop_watching();
    h.reset();
  }

  std::string metrics() { return h->daemon().metrics().render(); }
  double queued_bytes(const std::string& m) {
    double n = 0;
    for (const char* q : {"ingress", "shard", "debouncer"})
      n += scrape(m, std::string("kvrelay_queue_bytes{queue=\"") + q + "\"}");
    return n;
  }

  void start_watching() {
    watching = true;
    watcher = std::thread([this] {
      while (watching) {
        std::vector<std::string> why;
        h->daemon().ready(&why);
        for (const auto& w : why)
          if (w.find("overloaded: the memory budget is spent") != std::string::npos)
            saw_overloaded_readyz = true;
        const double q = queued_bytes(metrics());
        if (q > peak_queue_bytes) peak_queue_bytes = q;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  void stop_watching() {
    watching = false;
    if (watcher.joinable()) watcher.join();
  }

  // No replay outstanding and no tail probe due: the ingress reads live again.
  bool caught_up() {
    const auto tree = h->daemon().tree_json();
    return tree.find("catching_up") != std::string::npos &&
           tree.find("\"catching_up\": true") == std::string::npos &&
           tree.find("\"catching_up\":true") == std::string::npos;
  }

  // The queues drained, the ingress reading live again, and the server holding `want` prefixes,
  // or the loss declared (the pipeline cleared).
  bool settled(size_t want) {
    return harness::wait_until(
        [&] {
          const auto m = metrics();
          return scrape(m, "kvrelay_overloaded") == 0 && queued_bytes(m) == 0 && caught_up() &&
                 (h->total_prefixes() == want || h->metric_sum("kvrelay_history_lost_total") > 0);
        },
        std::chrono::seconds(60), std::chrono::milliseconds(50));
  }

  // Every chunk fully indexed for the replica and nothing else: the index is exact. Eventually:
  // a clear and its re-adds may still be on their way to the server.
  bool exact() {
    if (h->total_prefixes() != size_t{chunks} * blocks_per_batch) return false;
    for (uint32_t c = 0; c < chunks; ++c)
      if (h->lookup(chunk_tokens(c), bs).matched(h->replica()) != int64_t{blocks_per_batch} * bs)
        return false;
    return true;
  }
  void expect_exact() {
    EXPECT_TRUE(harness::wait_until([&] { return exact(); }, std::chrono::seconds(30),
                                    std::chrono::milliseconds(50)))
        << h->total_prefixes() << "\n"
        << h->diagnose();
  }

  // After the loss was declared the index is incomplete until the engine clears its cache; the
  // engine's clear and a re-store of what it holds make it exact again (the usual way).
  void repair_if_lost() {
    if (h->metric_sum("kvrelay_history_lost_total") <= 0) return;
    h->publish_raw(chunk_payload(0, /*clear_first=*/true));
    for (uint32_t c = 1; c < chunks; ++c) h->publish_raw(payloads[c]);
  }

  void expect_overload_seen_and_bounded() {
    const auto m = metrics();
    EXPECT_GE(scrape(m, "kvrelay_overloads_total"), 1) << m;
    EXPECT_GT(scrape(m, "kvrelay_ingress_paused_seconds_total"), 0) << m;
    EXPECT_EQ(scrape(m, "kvrelay_memory_budget_bytes{source=\"config\"}"),
              static_cast<double>(budget));
    EXPECT_TRUE(saw_overloaded_readyz) << "no /readyz reason seen while overloaded";
    // /debug/tree shows the budget, where it came from, and each queue.
    const auto tree = h->daemon().tree_json();
    EXPECT_NE(tree.find("\"budget_bytes\":8388608"), std::string::npos) << tree;
    EXPECT_NE(tree.find("\"budget_source\":\"config\""), std::string::npos) << tree;
    EXPECT_NE(tree.find("\"debouncer\":{\"bytes\""), std::string::npos) << tree;
    // The queues stay within the budget: the gate pauses at a quarter of it; what was read
    // before the pause, and its decoded form, overshoot that, never the whole budget.
    EXPECT_GT(peak_queue_bytes.load(), 0.0);
    EXPECT_LT(peak_queue_bytes.load(), static_cast<double>(budget)) << peak_queue_bytes.load();
    // Alive, and back to ready once the overload is over.
    std::vector<std::string> why;
    EXPECT_TRUE(harness::wait_until([&] { return h->daemon().ready(&why); }))
        << ::testing::PrintToString(why);
    // What the run went through, for the log (which repair path depends on the machine's speed).
    std::cout << "[ overload ] overloads " << scrape(m, "kvrelay_overloads_total") << ", paused "
              << scrape(m, "kvrelay_ingress_paused_seconds_total") << " s, peak queued "
              << peak_queue_bytes.load() << " B, gaps " << h->metric_sum("kvrelay_seq_gaps_total")
              << ", replays " << h->metric_sum("kvrelay_replays_total") << ", history lost "
              << h->metric_sum("kvrelay_history_lost_total") << "\n";
  }
};

TEST_F(Overload, BurstManyTimesTheBudgetEndsExact) {
  // ~42 MB of batches (5x the whole budget, 20x the queues' share) as fast as the engine can,
  // into an engine socket that holds 200 of them: what kvrelay cannot take meanwhile is dropped
  // there and comes back through replay (the ring holds all 3000).
  start(200);
  constexpr size_t batches = 3000;
  start_watching();
  for (size_t i = 0; i < batches; ++i) h->publish_raw(payloads[i % chunks]);
  ASSERT_TRUE(settled(size_t{chunks} * blocks_per_batch)) << h->diagnose();
  stop_watching();
  repair_if_lost();
  expect_exact();
  expect_overload_seen_and_bounded();
}

TEST_F(Overload, RateBeyondWhatKvrelayDecodesEndsExact) {
  // Three seconds at the engine's full speed: more than kvrelay decodes meanwhile, so the
  // ingress pauses again and again; the engine drops past its socket's 200 batches, and the
  // replay catches up as far as the ring (10 000 batches) still reaches, else the loss is
  // declared and the engine's next clear makes the index exact.
  start(200);
  start_watching();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  size_t i = 0;
  while (std::chrono::steady_clock::now() < until) h->publish_raw(payloads[i++ % chunks]);
  ASSERT_TRUE(settled(size_t{chunks} * blocks_per_batch)) << h->diagnose();
  stop_watching();
  repair_if_lost();
  expect_exact();
  expect_overload_seen_and_bounded();
  RecordProperty("batches_published", std::to_string(i));
}

}  // namespace
}  // namespace kvrelay::e2e
