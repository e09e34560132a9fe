// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Discovery for real: the fake engine's HTTP server (both dialects, every vLLM shape, DP > 1,
// publishers at port 0) → kvrelay's fetch and parser → a ZMQ SUB on the endpoints it found
// receives a batch, and a DEALER on the replay endpoint gets the batch back. In process (the
// library) and as a process (the executable's flags).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/discovery/engine_fetch.hpp"
#include "actors/scraper/metric_profile.hpp"
#include "net/http_fetch.hpp"
#include "tests/support/skip.hpp"
#include "tests/tools/zmq_peer.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/publisher.hpp"

namespace kvrelay::fake {
namespace {

using discovery::discovered_engine;
using namespace std::chrono_literals;

// A fake engine in this process: DP ranks published by the library, served by engine_http.
struct engine {
  std::vector<std::unique_ptr<publisher>> pubs;
  std::unique_ptr<engine_http> http;

  engine(int dp, const std::string& bind, const std::string& replay_bind, engine_description d,
         const std::string& http_host = "127.0.0.1") {
    for (int r = 0; r < dp && !d.events_disabled; ++r) {
      publisher_options o;
      o.bind = bind;
      o.replay_bind = replay_bind;
      o.topic = d.topic;
      o.dp_rank = r;
      pubs.push_back(std::make_unique<publisher>(o));
      d.ranks.push_back({pubs.back()->live_endpoint(), pubs.back()->replay_endpoint()});
    }
    d.bind = bind;
    http = std::make_unique<engine_http>(d, http_host, 0, [this] {
      metrics_sample s;
      for (const auto& p : pubs) s.batches += p->stats().published;
      return s;
    });
  }
};

engine_description vllm_engine(vllm_shape shape = vllm_shape::keyed) {
  engine_description d;
  d.shape = shape;
  d.topic = "kv-events";
  return d;
}

engine_description sglang_engine() {
  engine_description d;
  d.dialect = http_dialect::sglang;
  d.topic = "kv";
  d.block_size = 64;
  return d;
}

discovered_engine discover_ok(const std::string& url) {
  auto r = discovery::fetch_and_discover(url);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().render());
  return r.ok() ? r.value() : discovered_engine{};
}

int port_of(const std::string& ep) { return std::stoi(ep.substr(ep.rfind(':') + 1)); }

struct DiscoveryRoundtrip : zmq_fixture {
  // The endpoints discovery found are the ones the engine bound, reachable: every rank's SUB
  // receives a batch (a payload naming the rank), and its replay endpoint (if any) replays it.
  void expect_reachable(engine& e, const discovered_engine& d) {
    ASSERT_EQ(d.publishers.size(), e.pubs.size());
    for (size_t r = 0; r < e.pubs.size(); ++r) {
      const auto& p = d.publishers[r];
      EXPECT_EQ(p.dp_rank, static_cast<int64_t>(r));
      EXPECT_EQ(port_of(p.endpoint), port_of(e.pubs[r]->live_endpoint()));
      auto s = sub(p.endpoint, p.topic);
      const std::string payload = "rank" + std::to_string(r);
      const auto frames = join(*e.pubs[r], s, payload);
      ASSERT_EQ(frames.size(), 3u) << p.endpoint;
      EXPECT_EQ(frames[0], p.topic);
      EXPECT_EQ(frames[2], payload);
      if (p.replay_endpoint.empty()) continue;
      EXPECT_EQ(port_of(p.replay_endpoint), port_of(e.pubs[r]->replay_endpoint()));
      auto dl = dealer(p.replay_endpoint);
      const auto replies = replay(dl, 0);
      ASSERT_GE(replies.size(), 2u) << p.replay_endpoint;
      EXPECT_EQ(replies.front().back(), payload);
    }
  }
};

TEST_F(DiscoveryRoundtrip, VllmDp2AtPortZeroInEveryShape) {
  for (auto shape : {vllm_shape::keyed, vllm_shape::sources, vllm_shape::list}) {
    engine e(2, "tcp://127.0.0.1:0", "tcp://127.0.0.1:0", vllm_engine(shape));
    const auto d = discover_ok(e.http->url());
    EXPECT_EQ(d.dialect, discovery::dialect::vllm);
    EXPECT_EQ(d.hash_scheme, "vllm");
    EXPECT_EQ(d.model_id, "fake-model");
    EXPECT_EQ(d.metrics_url, e.http->url() + "/metrics");
    ASSERT_EQ(d.publishers.size(), 2u);
    EXPECT_EQ(d.publishers[0].endpoint, e.pubs[0]->live_endpoint());
    EXPECT_EQ(d.publishers[1].replay_endpoint, e.pubs[1]->replay_endpoint());
    EXPECT_EQ(d.publishers[1].topic, "kv-events");
    expect_reachable(e, d);
  }
}

TEST_F(DiscoveryRoundtrip, WildcardBindIsDialledAtTheUrlsHost) {
  engine e(2, "tcp://*:0", "tcp://*:0", vllm_engine());  // reports tcp://0.0.0.0:<port>
  const auto d = discover_ok(e.http->url());
  ASSERT_EQ(d.publishers.size(), 2u);
  EXPECT_EQ(d.publishers[0].endpoint,
            "tcp://127.0.0.1:" + std::to_string(port_of(e.pubs[0]->live_endpoint())));
  expect_reachable(e, d);
}

TEST_F(DiscoveryRoundtrip, SglangDp2AtPortZero) {
  engine e(2, "tcp://*:0", "tcp://*:0", sglang_engine());
  const auto d = discover_ok(e.http->url());
  EXPECT_EQ(d.dialect, discovery::dialect::sglang);
  EXPECT_EQ(d.hash_scheme, "sglang");
  ASSERT_EQ(d.publishers.size(), 2u);
  EXPECT_EQ(d.publishers[0].block_size, 64);
  EXPECT_EQ(d.publishers[0].topic, "kv");
  // SGLang's shape has one replay base: per-rank ports the OS chose are only reported when they
  // happen to follow it; either way what is reported is right (expect_reachable checks).
  expect_reachable(e, d);
}

TEST_F(DiscoveryRoundtrip, SglangDp2AtBasePlusRankWithReplay) {
  // Ports base and base + 1 for both sockets, like SGLang binds them. Another process may hold
  // a port next to an ephemeral one for a moment: a fresh pair of bases then, not a skip.
  std::string live, replay, taken;
  std::unique_ptr<engine> e;
  for (int attempt = 0; attempt < 20 && !e; ++attempt) {
    publisher_options probe;
    probe.bind = "tcp://127.0.0.1:*";
    probe.replay_bind = "tcp://127.0.0.1:*";
    {
      publisher p(probe);
      live = "tcp://127.0.0.1:" + std::to_string(port_of(p.live_endpoint()));
      replay = "tcp://127.0.0.1:" + std::to_string(port_of(p.replay_endpoint()));
    }
    try {
      e = std::make_unique<engine>(2, live, replay, sglang_engine());
    } catch (const std::exception& ex) {
      taken = ex.what();
    }
  }
  if (!e) KVRELAY_SKIP("20 pairs of ports next to ephemeral ones were taken here: " << taken);
  const auto d = discover_ok(e->http->url());
  ASSERT_EQ(d.publishers.size(), 2u);
  EXPECT_EQ(d.publishers[1].endpoint, e->pubs[1]->live_endpoint());
  EXPECT_EQ(d.publishers[1].replay_endpoint, e->pubs[1]->replay_endpoint());
  EXPECT_EQ(d.publishers[1].origin,
            "GET /server_info kv_events (port " + std::to_string(port_of(live)) + " + rank 1)");
  expect_reachable(*e, d);
}

TEST_F(DiscoveryRoundtrip, EventsDisabledInBothDialects) {
  for (auto desc : {vllm_engine(), sglang_engine()}) {
    desc.events_disabled = true;
    engine e(2, "tcp://127.0.0.1:0", "", desc);
    auto r = discovery::fetch_and_discover(e.http->url());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ec::discovery_failed);
    EXPECT_EQ(r.error().context.rfind("KV events are disabled on the engine " + e.http->url(), 0),
              0u)
        << r.error().context;
  }
}

TEST_F(DiscoveryRoundtrip, Ipv6Loopback) {
  std::unique_ptr<engine> e;
  try {
    e = std::make_unique<engine>(2, "tcp://[::1]:0", "", vllm_engine(), "::1");
  } catch (const std::exception& ex) {
    KVRELAY_SKIP("no IPv6 loopback here: " << ex.what());
  }
  EXPECT_EQ(e->http->url().rfind("http://[::1]:", 0), 0u);
  const auto d = discover_ok(e->http->url());
  ASSERT_EQ(d.publishers.size(), 2u);
  EXPECT_EQ(d.publishers[0].endpoint.rfind("tcp://[::1]:", 0), 0u) << d.publishers[0].endpoint;
  expect_reachable(*e, d);
}

TEST_F(DiscoveryRoundtrip, TheDiscoveredMetricsUrlScrapes) {
  for (auto desc : {vllm_engine(), sglang_engine()}) {
    engine e(1, "tcp://127.0.0.1:0", "", desc);
    const auto d = discover_ok(e.http->url());
    http_fetcher f(d.metrics_url);
    const auto r = f.get();
    ASSERT_TRUE(r.ok) << r.error;
    scraper_config cfg;
    cfg.hash_scheme = d.hash_scheme;
    scraper_logic s(cfg);
    const auto sr = s.scrape_response(r.status, r.body);
    EXPECT_TRUE(sr.ok) << d.hash_scheme << ": " << sr.error;
  }
}

// -- the executable ------------------------------------------------------------------------------

// The fake engine as a process, stderr to a file; killed on destruction.
struct engine_process {
  std::string err_path;
  pid_t pid = -1;

  explicit engine_process(const std::string& args) {
    static int n = 0;
    err_path = std::string(KVRELAY_BINARY_DIR) + "/discovery_roundtrip_" +
               std::to_string(::getpid()) + "_" + std::to_string(++n) + ".err";
    const std::string cmd = "exec " + std::string(KVRELAY_FAKE_ENGINE_BIN) + " " + args + " 2>" +
                            err_path + " >/dev/null & echo $!";
    if (FILE* p = popen(cmd.c_str(), "r")) {
      if (std::fscanf(p, "%d", &pid) != 1) pid = -1;
      pclose(p);
    }
  }
  ~engine_process() {
    if (pid > 0) ::kill(pid, SIGKILL);
    std::remove(err_path.c_str());
  }
  std::string log() const {
    std::ifstream in(err_path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // The URL from "fake engine http listening url=...", polled with a bound.
  std::string url() const {
    for (int i = 0; i < 500; ++i) {
      const std::string text = log();
      const auto at = text.find("http listening url=");
      if (at != std::string::npos) {
        const auto from = at + std::string("http listening url=").size();
        return text.substr(from, text.find_first_of(" \n", from) - from);
      }
      std::this_thread::sleep_for(10ms);
    }
    return {};
  }
};

// Publishing at a rate, not on demand: a SUB on each discovered endpoint sees a batch (bounded).
void expect_batches(zmq_peer& z, const discovered_engine& d) {
  for (const auto& p : d.publishers) {
    auto s = z.sub(p.endpoint, p.topic);
    std::vector<std::string> frames;
    for (int i = 0; i < 200 && frames.empty(); ++i) frames = recv_all(s);
    ASSERT_EQ(frames.size(), 3u) << p.endpoint;
    EXPECT_EQ(frames[0], p.topic);
    EXPECT_EQ(frames[1].size(), 8u);  // seq BE8
  }
}

TEST_F(DiscoveryRoundtrip, ExecutableServesBothDialects) {
  struct run {
    std::string args;
    std::string scheme;
    size_t ranks;
  };
  for (const auto& c : std::vector<run>{
           {"--dialect vllm --vllm-shape sources", "vllm", 2},
           {"--dialect sglang", "sglang", 2},
           {"--era S1", "sglang", 2},  // the dialect follows an SGLang era by default
       }) {
    engine_process proc(
        "--http-port 0 --bind 'tcp://*:0' --replay-bind 'tcp://*:0' --dp-size 2 "
        "--workload random --rate 200 --model m1 " +
        c.args);
    const std::string url = proc.url();
    ASSERT_FALSE(url.empty()) << c.args << ": " << proc.log();
    const auto d = discover_ok(url);
    EXPECT_EQ(d.hash_scheme, c.scheme) << c.args;
    EXPECT_EQ(d.model_id, "m1");
    ASSERT_EQ(d.publishers.size(), c.ranks) << c.args;
    if (c.scheme == "sglang") {
      EXPECT_EQ(d.publishers[0].block_size, 16);  // the random workload's block size
    }
    expect_batches(*this, d);
  }
}

TEST_F(DiscoveryRoundtrip, ExecutableServesAMetricsFile) {
  const std::string fixture = std::string(KVRELAY_FIXTURES_DIR) + "/metrics/sglang_metrics.txt";
  engine_process proc("--http-port 0 --bind 'tcp://127.0.0.1:0' --dialect sglang --metrics-file " +
                      fixture);
  const std::string url = proc.url();
  ASSERT_FALSE(url.empty()) << proc.log();
  const auto d = discover_ok(url);
  http_fetcher f(d.metrics_url);
  const auto r = f.get();
  ASSERT_TRUE(r.ok) << r.error;
  std::ifstream in(fixture);
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(r.body, want.str());
}

TEST_F(DiscoveryRoundtrip, ExecutableWithEventsDisabled) {
  engine_process proc("--http-port 0 --events-disabled --dialect sglang");
  const std::string url = proc.url();
  ASSERT_FALSE(url.empty()) << proc.log();
  auto r = discovery::fetch_and_discover(url);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().context.find("KV events are disabled"), std::string::npos)
      << r.error().context;
}

}  // namespace
}  // namespace kvrelay::fake
