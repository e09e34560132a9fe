// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Zero-config end to end over real loopback sockets: fake engines whose HTTP server
// says where their publishers are → an in-process daemon given only `engine.url` → the policy
// server. vLLM-style DP=2 at port 0, SGLang-style, an engine restarted on new ports while the
// daemon runs, HTTP up before the publishers, a malformed or events-disabled answer next to a
// healthy engine, explicit settings overriding discovered ones.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/fingerprint.hpp"
#include "base/log.hpp"
#include "daemon/daemon.hpp"
#include "tests/support/harness.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/publisher.hpp"

namespace kvrelay::e2e {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
constexpr int64_t bs = 16;

// Every log line written while the test runs (conflicts must be logged exactly once).
class log_lines {
 public:
  log_lines() {
    log::set_sink([this](log::level, const std::string& line) {
      std::lock_guard<std::mutex> lk(mu_);
      lines_.push_back(line);
    });
  }
  ~log_lines() { log::set_sink({}); }
  size_t count(const std::string& part) const {
    std::lock_guard<std::mutex> lk(mu_);
    size_t n = 0;
    for (const auto& l : lines_) n += l.find(part) != std::string::npos;
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// A harness whose engine the daemon knows only by URL: the harness' publishers (bound wherever
// the OS put them) described by a fake engine HTTP server.
struct Discovery : ::testing::Test {
  std::unique_ptr<harness> h;
  std::unique_ptr<fake::engine_http> http;
  std::string url;  // read by the harness' tweak when it builds the configuration
  log_lines logs;

  harness_options options(int dp = 1, fake::http_dialect dialect = fake::http_dialect::vllm) {
    harness_options o;
    o.engine.dp_size = dp;  // how many ranks the harness binds; the daemon learns it
    o.any_ports = true;
    if (dialect == fake::http_dialect::sglang) o.engine.hash_scheme = "sglang";  // for lookups
    o.tweak = [this](config::daemon_config& c) {
      auto& e = c.engines.front();
      e.url = url;
      e.discovery_retry_max = 300ms;
      e.metrics.url.clear();
      e.given.metrics_url = true;  // no scraping: the fake's /metrics is not what is tested
    };
    return o;
  }

  // The HTTP server for `h`'s ranks as they are bound now.
  void serve(fake::http_dialect dialect = fake::http_dialect::vllm) {
    fake::engine_description d;
    d.dialect = dialect;
    d.model = h->options().engine.model_id;
    d.topic = h->options().engine.topic;
    d.bind = "tcp://127.0.0.1:0";
    d.block_size = bs;
    http = std::make_unique<fake::engine_http>(d, "127.0.0.1", 0, nullptr);
    url = http->url();
    describe();
  }
  void describe() {
    std::vector<fake::rank_endpoints> ranks;
    for (int r = 0; r < h->ranks(); ++r)
      ranks.push_back({h->live(r).live_endpoint(),
                       h->options().replay ? h->ring(r).replay_endpoint() : std::string()});
    http->update([&](fake::engine_description& d) { d.ranks = ranks; });
  }

  void start(harness_options o, fake::http_dialect dialect = fake::http_dialect::vllm) {
    h = std::make_unique<harness>(std::move(o));
    serve(dialect);
    ASSERT_TRUE(h->start_daemon(false)) << h->error();
    ASSERT_TRUE(wait_pipelines(h->ranks())) << h->diagnose();
    ASSERT_TRUE(h->sync()) << h->diagnose();
  }
  void TearDown() override { h.reset(); }

  bool wait_pipelines(size_t n) {
    return harness::wait_until([&] { return h->daemon().pipeline_names().size() == n; });
  }
  json engines() { return json::parse(h->daemon().engines_json()); }
  // /debug/tree's discovery entry for the engine at `url` (null when absent).
  json discovery_of(const std::string& engine_url) {
    const auto tree = json::parse(h->daemon().tree_json());
    if (!tree.contains("discovery")) return nullptr;
    for (const auto& e : tree["discovery"].value("children", json::array()))
      if (e.value("url", "") == engine_url) return e;
    return nullptr;
  }
  std::vector<std::string> not_ready() {
    std::vector<std::string> why;
    h->daemon().ready(&why);
    return why;
  }
  bool resident(const std::vector<uint32_t>& tokens, int rank = 0) const {
    const auto p = fingerprint::prefixes(tokens, bs);
    for (size_t i = 0; i < p.size(); ++i)
      if (!h->entry(p[i], "", rank)) return false;
    return !p.empty();
  }
  bool wait_resident(const std::vector<uint32_t>& tokens, int rank = 0) const {
    return harness::wait_until([&] { return resident(tokens, rank); });
  }
};

TEST_F(Discovery, VllmDp2AtPortZeroRunsOnePipelinePerRank) {
  start(options(2));
  const auto names = h->daemon().pipeline_names();
  EXPECT_EQ(names, (std::vector<std::string>{"vllm-0-dp0", "vllm-0-dp1"}));
  for (int r = 0; r < 2; ++r) {
    const auto t = token_range(100 + 1000 * r, 32);
    fake::encode_options eo;
    h->publish({stored(u_hashes({uint64_t(10 + r), uint64_t(20 + r)}), t, bs)}, eo, r);
    EXPECT_TRUE(wait_resident(t, r)) << h->diagnose();
  }
  // /debug/engines says where every value came from.
  const auto e = engines();
  ASSERT_EQ(e.size(), 2u) << e.dump();
  EXPECT_EQ(e[1]["endpoint"], h->live(1).live_endpoint());
  EXPECT_EQ(e[1]["origins"]["endpoint"], "discovered: GET /kv_event_sources [\"1\"]") << e.dump();
  EXPECT_EQ(e[0]["origins"]["model_id"], "discovered: GET /v1/models") << e.dump();
  EXPECT_EQ(e[0]["replay_endpoint"], h->ring(0).replay_endpoint());
}

TEST_F(Discovery, Ipv6EndpointsWork) {
  auto o = options(1);
  o.ipv6 = true;
  start(std::move(o));
  ASSERT_EQ(engines()[0]["endpoint"].get<std::string>().rfind("tcp://[::1]:", 0), 0u)
      << engines().dump();
  const auto t = token_range(200, 32);
  h->publish({stored(u_hashes({3, 4}), t, bs)});
  EXPECT_TRUE(wait_resident(t)) << h->diagnose();
  EXPECT_EQ(engines()[0]["replay_endpoint"].get<std::string>().rfind("tcp://[::1]:", 0), 0u);
}

TEST_F(Discovery, SglangStyle) {
  auto o = options(1, fake::http_dialect::sglang);
  o.any_ports = false;  // SGLang binds base + rank
  start(std::move(o), fake::http_dialect::sglang);
  const auto t = token_range(300, 32);
  fake::encode_options eo;
  eo.era = fake::wire_era::s2;
  h->publish({stored(u_hashes({31, 32}), t, bs)}, eo);
  EXPECT_TRUE(wait_resident(t)) << h->diagnose();
  const auto e = engines();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0]["origins"]["hash_scheme"].get<std::string>().find("SGLang"), std::string::npos)
      << e.dump();
}

TEST_F(Discovery, AnEngineRestartedOnNewPortsIsFollowedAndItsOldHintsGo) {
  start(options(1));
  const auto before = token_range(100, 32);
  h->publish({stored(u_hashes({1, 2}), before, bs)});
  ASSERT_TRUE(wait_resident(before)) << h->diagnose();
  const auto old_endpoint = h->live(0).live_endpoint();
  h->rebind_engine(0);  // the old sockets close: the daemon's SUB loses its peer
  describe();
  ASSERT_NE(h->live(0).live_endpoint(), old_endpoint);
  ASSERT_TRUE(harness::wait_until([&] {
    const auto e = engines();
    return e.size() == 1 && e[0]["endpoint"] == h->live(0).live_endpoint();
  })) << h->diagnose();
  ASSERT_TRUE(h->sync()) << h->diagnose();
  const auto after = token_range(500, 32);
  h->publish({stored(u_hashes({5, 6}), after, bs)});
  ASSERT_TRUE(wait_resident(after)) << h->diagnose();
  // The new engine holds nothing of the old one's cache: the retargeted pipeline cleared.
  EXPECT_TRUE(harness::wait_until([&] { return !h->entry(fingerprint::prefixes(before, bs)[0]); }))
      << h->diagnose();
}

TEST_F(Discovery, HttpUpBeforeThePublishersWaitsThenRuns) {
  h = std::make_unique<harness>(options(1));
  serve();
  http->update([](fake::engine_description& d) {
    d.discovery_answer = {503, R"({"detail": "engine starting"})"};
  });
  ASSERT_TRUE(h->start_daemon(false)) << h->error();
  ASSERT_TRUE(harness::wait_until([&] {
    for (const auto& w : not_ready())
      if (w.find("waiting for engine " + url) != std::string::npos &&
          w.find("503") != std::string::npos)
        return true;
    return false;
  })) << h->diagnose();
  EXPECT_TRUE(h->daemon().pipeline_names().empty());
  // /debug/tree shows discovery itself: what it asks, when it last heard, why not yet, retries.
  json w;
  ASSERT_TRUE(harness::wait_until([&] {
    w = discovery_of(url);
    return w.is_object() && w.value("retries", 0) >= 1;
  })) << h->daemon().tree_json();
  EXPECT_EQ(w["kind"], "engine_watch");
  EXPECT_EQ(w["state"], "waiting");
  EXPECT_NE(w["last_error"].get<std::string>().find("503"), std::string::npos) << w.dump();
  EXPECT_GT(w["last_fetch_unix_ms"].get<int64_t>(), 0) << w.dump();
  http->update([](fake::engine_description& d) { d.discovery_answer = {}; });
  ASSERT_TRUE(wait_pipelines(1)) << h->diagnose();
  ASSERT_TRUE(h->sync()) << h->diagnose();
  const auto t = token_range(700, 32);
  h->publish({stored(u_hashes({7, 8}), t, bs)});
  EXPECT_TRUE(wait_resident(t)) << h->diagnose();
  w = discovery_of(url);
  ASSERT_TRUE(w.is_object()) << h->daemon().tree_json();
  EXPECT_EQ(w["state"], "discovered") << w.dump();
  EXPECT_EQ(w["retries"], 0) << w.dump();
  EXPECT_NE(w["last_error"].get<std::string>().find("503"), std::string::npos)
      << "the last error stays (retries 0 says it is over)" << w.dump();
  EXPECT_EQ(w["dialect"], "vllm") << w.dump();
  EXPECT_EQ(w["endpoints"], json::array({"0 " + h->live(0).live_endpoint()})) << w.dump();
}

TEST_F(Discovery, ABadEngineWaitsWithAClearErrorAndTheOthersRun) {
  // The harness' engine is configured the old way; a second engine has only a URL, and its
  // server answers garbage, then says events are disabled.
  fake::engine_description bad;
  auto bad_http = std::make_unique<fake::engine_http>(bad, "127.0.0.1", 0, nullptr);
  bad_http->update([](fake::engine_description& d) {
    d.discovery_answer = {200, "<html>not json</html>"};
  });
  harness_options o;
  const std::string bad_url = bad_http->url();
  o.tweak = [bad_url](config::daemon_config& c) {
    config::engine_settings e;
    e.replica_id = "bad-0";
    e.url = bad_url;
    e.discovery_retry_max = 200ms;
    e.metrics.url.clear();
    e.given.metrics_url = true;
    c.engines.push_back(e);
  };
  h = std::make_unique<harness>(std::move(o));
  ASSERT_TRUE(h->start_daemon()) << h->error();  // engine 0 syncs: the bad one stalls nothing
  const auto reason_has = [&](const std::string& part) {
    return harness::wait_until([&] {
      for (const auto& w : not_ready())
        if (w.find("waiting for engine " + bad_url) != std::string::npos &&
            w.find(part) != std::string::npos)
          return true;
      return false;
    });
  };
  EXPECT_TRUE(reason_has("<html>not json</html>")) << "the reason quotes what arrived";
  const auto t = token_range(100, 32);
  h->publish({stored(u_hashes({1, 2}), t, bs)});
  EXPECT_TRUE(wait_resident(t)) << h->diagnose();
  bad_http->update([](fake::engine_description& d) {
    d.discovery_answer = {};
    d.events_disabled = true;
  });
  EXPECT_TRUE(reason_has("KV events are disabled on the engine")) << "the daemon keeps retrying";
  EXPECT_EQ(h->daemon().pipeline_names(), std::vector<std::string>{"vllm-0"});
}

TEST_F(Discovery, ExplicitSettingsWinAndTheConflictIsLoggedOnce) {
  auto o = options(1);
  o.engine.model_id = "e2e-model";
  o.engine.given.model_id = true;  // as --model-id would (then /v1/models is not asked)
  o.engine.given.topic = true;     // as --topic=kv-events would
  h = std::make_unique<harness>(std::move(o));
  serve();
  // The engine claims another topic than its publisher uses: the explicit one must win.
  http->update([](fake::engine_description& d) { d.topic = "engine-says-this"; });
  ASSERT_TRUE(h->start_daemon(false)) << h->error();
  ASSERT_TRUE(wait_pipelines(1)) << h->diagnose();
  ASSERT_TRUE(h->sync()) << h->diagnose();
  const auto t = token_range(900, 32);
  h->publish({stored(u_hashes({9, 10}), t, bs)});
  EXPECT_TRUE(wait_resident(t)) << "the explicit topic and model id: " << h->diagnose();
  const auto e = engines();
  EXPECT_EQ(e[0]["origins"]["model_id"].get<std::string>().rfind("flag/config", 0), 0u)
      << e.dump();
  EXPECT_EQ(e[0]["origins"]["endpoint"], "discovered: GET /kv_event_sources [\"0\"]");
  EXPECT_EQ(e[0]["topic"], "kv-events");
  EXPECT_EQ(e[0]["origins"]["topic"].get<std::string>().rfind("flag/config", 0), 0u);
  // A stream stop re-reads the sources: the same conflict is not logged again.
  h->rebind_engine(0);
  describe();
  ASSERT_TRUE(harness::wait_until([&] {
    const auto now = engines();
    return now.size() == 1 && now[0]["endpoint"] == h->live(0).live_endpoint();
  })) << h->diagnose();
  EXPECT_EQ(logs.count("differs from the engine's"), 1u) << "one conflict (the topic), once";
}


// The Go sidecar's flags with the URL taken from the metrics URL (what the reference controller
// injects): an engine that says nothing (an older vLLM answers 404) runs on the flags at once,
// without a replay endpoint; when it does say, its pipeline moves to the replay endpoint it
// names and catches up from the ring what it published before.
TEST_F(Discovery, TheGoSidecarsFlagsRunAsGivenUntilTheEngineSaysMoreThenFollowIt) {
  auto o = options(1);
  o.tweak = [this](config::daemon_config& c) {
    auto& e = c.engines.front();
    e.replay_endpoint.clear();  // the injector passes none
    e.url = url;
    e.url_derived = true;
    e.discover_via_metrics = true;
    e.discovery_retry_max = 300ms;
    e.given.endpoint = e.given.model_id = e.given.hash_scheme = true;
    e.metrics.url.clear();
    e.given.metrics_url = true;
  };
  h = std::make_unique<harness>(std::move(o));
  serve();
  http->update([](fake::engine_description& d) { d.discovery_answer = {404, "Not Found"}; });
  ASSERT_TRUE(h->start_daemon(false)) << h->error();
  ASSERT_TRUE(wait_pipelines(1)) << "no waiting for an engine that cannot say\n" << h->diagnose();
  ASSERT_TRUE(h->sync()) << h->diagnose();
  auto e = engines();
  ASSERT_EQ(e.size(), 1u) << e.dump();
  EXPECT_EQ(e[0]["endpoint"], h->live(0).live_endpoint());
  EXPECT_EQ(e[0]["replay_endpoint"], "") << e.dump();
  EXPECT_EQ(e[0]["origins"]["endpoint"], "flag/config") << e.dump();
  EXPECT_EQ(e[0]["origins"]["replay_endpoint"], "default (configured; the engine has not said)")
      << e.dump();
  EXPECT_TRUE(not_ready().empty() || not_ready()[0].find("waiting for engine") == std::string::npos);
  EXPECT_EQ(discovery_of(url)["state"], "configured") << h->daemon().tree_json();
  const auto before = token_range(100, 32);
  h->publish({stored(u_hashes({1, 2}), before, bs)});
  ASSERT_TRUE(wait_resident(before)) << h->diagnose();
  EXPECT_EQ(h->metric_sum("kvrelay_replays_total", {{"outcome", "succeeded"}}), 0)
      << "no replay endpoint, no replay";

  // The engine says where its ring is: the pipeline moves there and catches up from it.
  http->update([](fake::engine_description& d) { d.discovery_answer = {}; });
  ASSERT_TRUE(harness::wait_until([&] {
    const auto now = engines();
    return now.size() == 1 && now[0]["replay_endpoint"] == h->ring(0).replay_endpoint();
  })) << h->diagnose();
  e = engines();
  EXPECT_EQ(e[0]["origins"]["replay_endpoint"], "discovered: GET /kv_event_sources [\"0\"]")
      << e.dump();
  EXPECT_EQ(e[0]["origins"]["endpoint"], "flag/config") << "the flag still wins";
  EXPECT_EQ(discovery_of(url)["state"], "discovered");
  ASSERT_TRUE(h->sync()) << h->diagnose();
  // The new data path cleared the replica and read the ring (the old one had no replay).
  EXPECT_TRUE(harness::wait_until(
      [&] { return h->metric_sum("kvrelay_replays_total", {{"outcome", "succeeded"}}) > 0; }))
      << h->diagnose();
  EXPECT_TRUE(wait_resident(before)) << "the new data path caught up from the ring\n"
                                     << h->diagnose();
  const auto after = token_range(500, 32);
  h->publish({stored(u_hashes({5, 6}), after, bs)});
  EXPECT_TRUE(wait_resident(after)) << h->diagnose();
}

}  // namespace
}  // namespace kvrelay::e2e
