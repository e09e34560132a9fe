// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// item 5, end to end on real sockets: the index says what it does not know. When the
// engine's history before kvrelay's first batch is gone (a replay ring shorter than it, no replay
// endpoint, or history lost mid-stream), blocks the engine cached then are unknown to the index:
// the pipeline shows "index incomplete" as a degraded reason (/readyz, /debug/engines), the gauge
// kvrelay_index_incomplete is 1, and the skipped batches are counted; all until the engine's state
// is known again (its cache is cleared, or a new engine process is replayed from its seq 0).
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "daemon/daemon.hpp"
#include "tests/support/harness.hpp"

namespace kvrelay::e2e {
namespace {

constexpr int64_t bs = 16;

// One block per batch, distinct per n.
std::vector<fake::fake_event> one_block(uint32_t n) {
  return {stored(u_hashes({5000 + n}), token_range(n * 16, 16), bs)};
}

struct IndexKnowledge : ::testing::Test {
  std::unique_ptr<harness> h;

  void make(harness_options o = {}) {
    o.tweak = [](config::daemon_config& c) { c.admin.listen = "127.0.0.1:0"; };
    h = std::make_unique<harness>(std::move(o));
  }
  void TearDown() override {
    if (h && HasFailure()) std::cerr << h->diagnose() << "\n";
    h.reset();
  }
  double incomplete() const {
    return h->metric("kvrelay_index_incomplete", {{"replica", h->replica()}});
  }
  double skipped() const {
    return h->metric("kvrelay_history_skipped_batches_total", {{"replica", h->replica()}});
  }
  std::vector<std::string> reasons() {
    std::vector<std::string> r;
    h->daemon().ready(&r);
    return r;
  }
  bool says(const std::string& what) {
    for (const auto& r : reasons())
      if (r.find(what) != std::string::npos) return true;
    return false;
  }
  nlohmann::json engine() {
    const auto doc = nlohmann::json::parse(h->daemon().engines_json(), nullptr, false);
    return doc.is_array() && !doc.empty() ? doc[0] : nlohmann::json::object();
  }
  std::string readyz() {
    httplib::Client c("127.0.0.1", h->daemon().admin_port());
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    auto r = c.Get("/readyz");
    return r ? std::to_string(r->status) + " " + r->body : std::string("no answer");
  }
};

TEST_F(IndexKnowledge, RingShorterThanTheHistoryIsIncompleteSinceStartUntilTheEngineClears) {
  harness_options o;
  o.ring_size = 5;
  make(o);
  // 20 batches of history before kvrelay starts: the ring still has 15..19 only.
  for (uint32_t i = 0; i < 20; ++i) h->publish(one_block(i));
  ASSERT_TRUE(h->start_daemon()) << h->error();

  EXPECT_TRUE(harness::wait_until([&] { return incomplete() == 1; })) << incomplete();
  // 15, or 16 when the first of sync's empty batches reached the ring before it was read.
  EXPECT_TRUE(harness::wait_until([&] { return skipped() >= 15; })) << skipped();
  EXPECT_TRUE(harness::wait_until([&] { return h->daemon().ready(); }))
      << "degraded, not unready: a sidecar's readiness gates its engine";
  EXPECT_TRUE(says("index incomplete since start"));
  const auto e = engine();
  EXPECT_NE(e.value("index_incomplete", std::string()).find("since start"), std::string::npos)
      << e.dump();
  EXPECT_TRUE(e.value("ready", false)) << e.dump();
  const std::string rz = readyz();
  EXPECT_EQ(rz.rfind("200 ready\n", 0), 0u) << rz;
  EXPECT_NE(rz.find(h->replica() + ": degraded (still ready): index incomplete since start"),
            std::string::npos)
      << rz;

  // The engine clears its cache: nothing it held before is left to be unknown.
  h->publish({cleared()});
  EXPECT_TRUE(harness::wait_until([&] { return incomplete() == 0; }));
  EXPECT_FALSE(says("index incomplete"));
  EXPECT_EQ(engine().value("index_incomplete", std::string("?")), "");
}

TEST_F(IndexKnowledge, LostHistoryIsIncompleteUntilANewEngineIsReplayedFromItsStart) {
  make();
  ASSERT_TRUE(h->start_daemon()) << h->error();
  h->publish(one_block(1));
  EXPECT_TRUE(harness::wait_until([&] { return incomplete() == 0; }))
      << "replayed from seq 0: the whole history";
  h->lose(3);  // nobody has these seqs: the pipeline clears
  h->publish(one_block(2));
  EXPECT_TRUE(harness::wait_until([&] { return incomplete() == 1; }));
  EXPECT_TRUE(says("index incomplete since engine history was lost"));

  h->restart_engine();  // a new process: empty cache, its ring from seq 0
  h->publish(one_block(3));
  EXPECT_TRUE(harness::wait_until([&] { return incomplete() == 0; }));
  EXPECT_FALSE(says("index incomplete"));
}

TEST_F(IndexKnowledge, WithoutReplayWhatWasPublishedBeforeTheSubscriptionIsUnknown) {
  harness_options o;
  o.replay = false;
  make(o);
  for (uint32_t i = 0; i < 3; ++i) h->publish(one_block(i));  // nobody subscribed yet
  ASSERT_TRUE(h->start_daemon()) << h->error();
  EXPECT_TRUE(harness::wait_until([&] { return incomplete() == 1; }));
  EXPECT_TRUE(harness::wait_until([&] { return skipped() >= 3; })) << skipped();
  EXPECT_TRUE(says("index incomplete since start"));
}

}  // namespace
}  // namespace kvrelay::e2e
