// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// end to end: kvrelay with a small memory budget (8 MiB: the queues pause the ingress at
// 2 MiB, ZMQ's receive queue holds 64 batches), a real fake engine (ZMQ PUB + replay ROUTER)
// and the demo policy server. A burst many times the budget, and a publish rate beyond what
// kvrelay decodes, both end with kvrelay alive, the overload counted, the queues within the
// budget, and the index exact, through the replay of whatever the engine's socket dropped.
//
// Every batch is different and leaves its own mark on the index (it stores 256 new blocks and
// evicts all but the first 8 of the previous batch's), so a batch lost, or applied twice out of
// order, shows in the final index; nothing but kvrelay's own repair can make it exact. Which
// repair ran is asserted: a gap and a replay after the burst, no declared loss in either test.
//
// Nothing here waits on a race between two speeds. The burst is published while the test holds
// the ingress paused (a charge of the budget's whole queue share), so the engine's socket must
// drop; the rate test publishes until kvrelay was overloaded, whatever the speeds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "base/fingerprint.hpp"
#include "base/memory_budget.hpp"
#include "base/metrics_registry.hpp"
#include "daemon/daemon.hpp"
#include "tests/support/fault_fixture.hpp"
#include "tests/support/harness.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::e2e {
namespace {

using namespace std::chrono_literals;

constexpr int64_t bs = 16;
constexpr uint32_t blocks_per_batch = 256;
constexpr uint32_t residue = 8;  // blocks of a batch the next one leaves resident
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

uint64_t block_hash(uint32_t batch, uint32_t i) {
  return 0x5100000000ull + uint64_t{batch} * blocks_per_batch + i + 1;
}

// Batch k's tokens: its first block names k, so every block of it is a prefix no other batch has.
std::vector<uint32_t> batch_tokens(uint32_t k) {
  std::vector<uint32_t> t = token_range(1000, blocks_per_batch * bs);
  t[0] = k % 30000;
  t[1] = 30000 + k / 30000;
  return t;
}

// Batch k: 256 new root-anchored blocks, and the eviction of the previous batch's blocks past
// its first `residue` (its leaves, as an LRU evicts them). About 14 KB on the wire.
std::string batch_payload(uint32_t k) {
  std::vector<fake::fake_hash> stores;
  for (uint32_t i = 0; i < blocks_per_batch; ++i) stores.push_back(fake::fake_hash::u(block_hash(k, i)));
  std::vector<fake::fake_event> ev;
  ev.push_back(stored(std::move(stores), batch_tokens(k), bs));
  if (k > 0) {
    std::vector<fake::fake_hash> gone;
    for (uint32_t i = residue; i < blocks_per_batch; ++i)
      gone.push_back(fake::fake_hash::u(block_hash(k - 1, i)));
    ev.push_back(removed(std::move(gone)));
  }
  return fake::encode_batch(ev, fake::encode_options{});
}

struct Overload : ::testing::Test {
  std::unique_ptr<harness> h;
  uint32_t published = 0;  // batches 0 .. published-1
  uint64_t last_seq = 0;   // the engine's seq of the last one
  // Sampled by a watcher thread: only ever an upper bound's witness, never required to catch.
  std::atomic<bool> watching{false};
  std::atomic<double> peak_queue_bytes{0};
  std::thread watcher;

  // The engine's live PUB holds `sndhwm` batches for kvrelay; past that it drops (a gap).
  void start(int sndhwm) {
    harness_options o;
    o.ring_size = 10000;
    o.live_sndhwm = sndhwm;
    o.tweak = [](config::daemon_config& c) {
      c.memory.budget = static_cast<int64_t>(budget);
      c.admin.listen = "127.0.0.1:0";
    };
    h = std::make_unique<harness>(std::move(o));
    ASSERT_TRUE(h->start_daemon()) << h->error();
    start_watching();
  }
  void TearDown() override {
    stop_watching();
    if (h && HasFailure()) std::cerr << h->diagnose() << "\n";
    h.reset();
  }
  // Encoded first, then sent back to back: the engine's full speed.
  void publish(uint32_t n) {
    std::vector<std::string> payloads;
    for (uint32_t i = 0; i < n; ++i) payloads.push_back(batch_payload(published + i));
    for (const auto& p : payloads) last_seq = h->publish_raw(p);
    published += n;
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
        const double q = queued_bytes(metrics());
        if (q > peak_queue_bytes) peak_queue_bytes = q;
        std::this_thread::sleep_for(2ms);
      }
    });
  }
  void stop_watching() {
    watching = false;
    if (watcher.joinable()) watcher.join();
  }

  // A field of a child's /debug/tree entry (the ingress reads its source now; -1 when absent).
  int64_t child(const std::string& name, const std::string& field) {
    const auto doc = nlohmann::json::parse(h->daemon().tree_json(), nullptr, false);
    if (doc.is_discarded()) return -1;
    for (const auto& p : doc.value("pipelines", nlohmann::json::array()))
      for (const auto& c : p.value("children", nlohmann::json::array()))
        if (c.value("name", "") == name && c.contains(field)) {
          if (c.at(field).is_boolean()) return c.at(field).get<bool>() ? 1 : 0;
          if (c.at(field).is_number()) return c.at(field).get<int64_t>();
        }
    return -1;
  }
  int64_t ingress(const std::string& field) { return child("ingress", field); }

  // A real engine never stops publishing for long, so a tail its socket dropped shows as a gap
  // at its next batch: one more now and then, until kvrelay has decoded the last one published.
  bool deliver_tail() {
    return harness::wait_until(
        [&] {
          if (child("decoder", "last_seq") >= static_cast<int64_t>(last_seq)) return true;
          publish(1);
          return false;
        },
        90s, 200ms);
  }

  // The server holds exactly the engine's blocks: every batch's first `residue` blocks, and all
  // of the last one's. "" when exact, else what differs.
  std::set<std::string> want_;
  uint32_t want_for_ = ~0u;
  std::string diff() {
    if (want_for_ != published) {
      want_.clear();
      for (uint32_t k = 0; k < published; ++k) {
        const auto fps = fingerprint::prefixes(batch_tokens(k), bs);
        const size_t keep = k + 1 == published ? fps.size() : residue;
        for (size_t i = 0; i < keep; ++i) want_.insert(faults::hex_be8(fps[i]));
      }
      want_for_ = published;
    }
    const auto& want = want_;
    std::set<std::string> got;
    for (const auto& e : h->server().index().entries_of(
             h->options().tenant_id, h->options().engine.model_id, h->replica()))
      got.insert(e.prefix_hash.size() == 8 ? faults::hex_be8(fingerprint::from_be8(e.prefix_hash))
                                           : "bad-length");
    std::vector<std::string> missing, extra;
    std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                        std::back_inserter(missing));
    std::set_difference(got.begin(), got.end(), want.begin(), want.end(),
                        std::back_inserter(extra));
    if (missing.empty() && extra.empty()) return "";
    std::ostringstream o;
    o << "want " << want.size() << " prefixes, got " << got.size() << ": " << missing.size()
      << " missing, " << extra.size() << " extra";
    return o.str();
  }

  // Ingress reading live again with nothing queued, and the server exact.
  void expect_settled_exact() {
    std::string d = "not settled";
    const bool ok = harness::wait_until(
        [&] {
          const auto m = metrics();
          if (scrape(m, "kvrelay_overloaded") != 0 || queued_bytes(m) != 0) return false;
          if (ingress("catching_up") != 0) return false;
          d = diff();
          return d.empty();
        },
        90s, 50ms);
    EXPECT_TRUE(ok) << d;
  }

  // Every gap kvrelay saw was replayed, and nothing was declared lost: the ring held everything.
  void expect_nothing_lost() {
    if (ingress("gaps") >= 1) {
      EXPECT_GE(ingress("replays_succeeded"), 1);
      EXPECT_GE(ingress("batches_recovered"), 1);
    }
    EXPECT_EQ(ingress("history_lost"), 0) << "the ring held everything: nothing may be lost";
    EXPECT_LE(h->metric_sum("kvrelay_batches_lost_total"), 0);
    EXPECT_LE(h->metric_sum("kvrelay_index_incomplete"), 0);
  }

  void expect_overload_counted_and_bounded() {
    const auto m = metrics();
    EXPECT_GE(scrape(m, "kvrelay_overloads_total"), 1) << m;
    EXPECT_GT(scrape(m, "kvrelay_ingress_paused_seconds_total"), 0) << m;
    EXPECT_EQ(scrape(m, "kvrelay_memory_budget_bytes{source=\"config\"}"),
              static_cast<double>(budget));
    const auto tree = h->daemon().tree_json();
    EXPECT_NE(tree.find("\"budget_bytes\":8388608"), std::string::npos) << tree;
    EXPECT_NE(tree.find("\"budget_source\":\"config\""), std::string::npos) << tree;
    EXPECT_NE(tree.find("\"debouncer\":{\"bytes\""), std::string::npos) << tree;
    // The gate pauses at a quarter of the budget; what was read before a pause, and its decoded
    // form, overshoot that, never the whole budget.
    EXPECT_LT(peak_queue_bytes.load(), static_cast<double>(budget)) << peak_queue_bytes.load();
    std::vector<std::string> why;
    EXPECT_TRUE(harness::wait_until([&] { return h->daemon().ready(&why); }))
        << ::testing::PrintToString(why);
  }
};

constexpr const char* overloaded_reason = "overloaded: the memory budget is spent";

TEST_F(Overload, BurstManyTimesTheBudgetEndsExact) {
  ASSERT_NO_FATAL_FAILURE(start(200));
  const uint16_t admin = h->daemon().admin_port();
  ASSERT_GT(admin, 0);
  // The queues hold their whole share: the ingress pauses at its next read (batch 0), and stays
  // paused for as long as the test holds the charge.
  auto b = h->daemon().budget();
  ASSERT_TRUE(b);
  budget_ticket hold = b->charge(budget_queue::ingress, b->limit_bytes());
  publish(1);
  ASSERT_TRUE(harness::wait_until([&] { return ingress("overloaded") == 1; }))
      << "the ingress did not pause with the budget spent";
  // /readyz says so while it lasts, a state held here, not a moment to catch; the pod's probe
  // (/readyz/self) stays ready: kvrelay fails open.
  const auto readyz = faults::http_get(admin, "/readyz");
  EXPECT_EQ(readyz.status, 503) << readyz.body;
  EXPECT_NE(readyz.body.find(overloaded_reason), std::string::npos) << readyz.body;
  EXPECT_EQ(faults::http_get(admin, "/readyz/self").status, 200);
  // ~42 MB of batches (5x the whole budget, 20x the queues' share) at the engine's full speed
  // into a paused reader: past its socket's 200 batches, ZMQ's 64 and the kernel's buffers the
  // engine drops them. The ring keeps all 3000.
  publish(2999);
  EXPECT_EQ(ingress("overloaded"), 1);
  hold.release();
  ASSERT_TRUE(deliver_tail()) << "kvrelay never decoded the engine's last batch";
  expect_settled_exact();
  // The engine dropped (its socket, ZMQ's and the kernel's buffers hold far less than 42 MB),
  // kvrelay saw the gap and replayed it.
  EXPECT_GE(ingress("gaps"), 1) << "the engine's socket never dropped a batch";
  expect_nothing_lost();
  expect_overload_counted_and_bounded();
  std::vector<std::string> why;
  h->daemon().ready(&why);
  for (const auto& w : why) EXPECT_EQ(w.find(overloaded_reason), std::string::npos) << w;
}

TEST_F(Overload, RateBeyondWhatKvrelayDecodesEndsExact) {
  ASSERT_NO_FATAL_FAILURE(start(200));
  // The engine's full speed, 500 batches (~7 MB) at a time, until kvrelay has paused for the
  // budget: the engine outran its decoder. A decoder as fast as the engine would make this test
  // pointless, so it fails then; the ring (10 000) holds everything published. Whether the
  // engine's socket also dropped depends on how long each pause lasts (the machine's load), so
  // either way must end exact with nothing lost: no drop, or a drop repaired by replay.
  while (ingress("overloads") < 1 && published < 9000) publish(500);
  ASSERT_GE(ingress("overloads"), 1) << "kvrelay kept up with " << published << " batches";
  ASSERT_TRUE(deliver_tail()) << "kvrelay never decoded the engine's last batch";
  expect_settled_exact();
  expect_nothing_lost();
  expect_overload_counted_and_bounded();
  RecordProperty("batches_published", std::to_string(published));
}

}  // namespace
}  // namespace kvrelay::e2e
