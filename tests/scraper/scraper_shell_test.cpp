// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The scraper actor shell under CAF's deterministic scheduler, with its fetcher injected (no HTTP,
// no threads, no sleeps): the tick asks for a fetch, the test answers as the fetch thread would,
// and the recorders see what goes to the emitter and to the supervisor. The pure parts
// (metric_profile, stats_tracker) have their own tests.

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <memory>
#include <string>

#include "actors/scraper/scraper_actor.hpp"
#include "tests/scraper/scraper_test_util.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;

struct fake_fetcher final : fetch_port {
  explicit fake_fetcher(std::shared_ptr<int> n) : requests(std::move(n)) {}
  bool request() override {
    ++*requests;
    return true;
  }
  std::shared_ptr<int> requests;
};

struct shell {
  kvrelay::testing::deterministic_system t;
  kvrelay::testing::recorder emitter{t};
  kvrelay::testing::recorder health{t};
  std::shared_ptr<int> requests = std::make_shared<int>(0);
  pipeline_context ctx;
  scraper_actor aut;

  shell() {
    emitter.reply_with([](const caf::message&) { return caf::make_message(true); });
    ctx.name = "det-0";
    ctx.health = health.as<health_listener_actor>();
    scraper_options o;
    o.interval = 1000ms;
    auto n = requests;
    o.make_fetcher = [n](scraper_actor) { return std::make_unique<fake_fetcher>(n); };
    aut = spawn_scraper(t.sys(), ctx, o, emitter.as<emitter_actor>());
    t.stop_at_end(caf::actor_cast<caf::actor>(aut));
    t.run();
  }
  // One tick, answered with `body` as the fetch thread would.
  void scrape(const std::string& body) {
    t.advance(1000ms);
    caf::anon_send(aut, atom::fetched_v, true, int32_t{200}, body, std::string());
    t.run();
  }
  double metric(const std::string& name, label_set extra = {}) const {
    return ctx.metrics->value(name, ctx.labels(std::move(extra)));
  }
  std::vector<health_fact> facts() const { return health.all<health_fact>(); }
};

TEST(ScraperShell, ATickFetchesAndTheSampleGoesToTheEmitter) {
  shell s;
  EXPECT_EQ(*s.requests, 0) << "the first tick comes one interval after start (S13)";
  s.scrape(kvrelay::testing::read_metrics_fixture("vllm_metrics_cpu.txt"));
  EXPECT_EQ(*s.requests, 1);
  const auto samples = s.emitter.all<stats_sample_ptr>();
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_FLOAT_EQ(samples[0]->pressure, 8.0f / 256.0f);
  EXPECT_EQ(s.facts(), (std::vector<health_fact>{health_fact::server_ok}));
}

TEST(ScraperShell, AnEngineThatFallsAsleepIsClearedAndIndexedAgainWhenItWakes) {
  shell s;
  const std::string awake =
      kvrelay::testing::read_metrics_fixture("vllm_metrics_engine_state.txt");
  s.scrape(awake);
  s.health.clear();
  s.scrape(kvrelay::testing::read_metrics_fixture("vllm_metrics_asleep.txt"));
  EXPECT_EQ(s.metric("kvrelay_engine_asleep"), 1);
  std::vector<health_fact> f = s.facts();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0], health_fact::engine_asleep) << "the supervisor clears the pipeline on it";
  s.health.clear();
  s.scrape(kvrelay::testing::read_metrics_fixture("vllm_metrics_asleep.txt"));
  f = s.facts();
  EXPECT_EQ(std::count(f.begin(), f.end(), health_fact::engine_asleep), 0) << "only once";
  s.scrape(awake);
  f = s.facts();
  EXPECT_EQ(std::count(f.begin(), f.end(), health_fact::engine_awake), 1);
  EXPECT_EQ(s.metric("kvrelay_engine_asleep"), 0);
}

TEST(ScraperShell, ASilentStreamIsToldToTheSupervisorAndSoIsItsEnd) {
  shell s;
  const std::string fixture = kvrelay::testing::read_metrics_fixture("vllm_metrics_cpu.txt");
  const std::string line =
      "vllm:prefix_cache_queries_total{model_name=\"Qwen/Qwen2.5-0.5B-Instruct\"} ";
  const auto body = [&](int queries) {
    std::string b = fixture;
    const auto at = b.find(line) + line.size();
    return b.replace(at, b.find('\n', at) - at, std::to_string(queries));
  };
  const auto count = [&](health_fact f) {
    const auto all = s.facts();
    return std::count(all.begin(), all.end(), f);
  };
  // The engine's prefix-cache queries keep rising while no batch is decoded: the alarm (3 ticks,
  // the first sets the baseline), told once; discovery reads the sources again on it.
  for (int i = 1; i <= 5; ++i) s.scrape(body(100 * i));
  EXPECT_EQ(count(health_fact::events_silent), 1);
  EXPECT_EQ(count(health_fact::events_flowing), 0);
  // Batches arrive again (the decoder's counter moves).
  s.ctx.counter("kvrelay_batches_total", "").inc();
  s.scrape(body(700));
  EXPECT_EQ(count(health_fact::events_flowing), 1);
}

TEST(ScraperShell, CoverageComparesTheResidentBlocksWithTheEnginesOwnCounts) {
  shell s;
  // Resident blocks as the shards publish them, over two adapter partitions.
  s.ctx.gauge("kvrelay_resident_blocks", "", {{"adapter", ""}}).set(600);
  s.ctx.gauge("kvrelay_resident_blocks", "", {{"adapter", "sql-lora"}}).set(20);
  EXPECT_EQ(s.metric("kvrelay_engine_cache_blocks", {{"kind", "capacity"}}), -1)
      << "no gauge before the engine said anything";
  s.scrape(kvrelay::testing::read_metrics_fixture("vllm_metrics_engine_state.txt"));
  EXPECT_EQ(s.metric("kvrelay_engine_cache_blocks", {{"kind", "capacity"}}), 3002);
  EXPECT_EQ(s.metric("kvrelay_engine_cache_blocks", {{"kind", "in_use"}}), 1000);
  // "We know at most 62 % of what the engine is using", and 620 of its 3002 blocks.
  EXPECT_DOUBLE_EQ(s.metric("kvrelay_index_coverage_ratio", {{"of", "in_use"}}), 0.62);
  EXPECT_DOUBLE_EQ(s.metric("kvrelay_index_coverage_ratio", {{"of", "capacity"}}), 620.0 / 3002);
}

}  // namespace
}  // namespace kvrelay
