// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The discovery actor for real: its fetch threads ask the fake engine's HTTP server (publishers
// bound at port 0) and the listener hears targets with the endpoints the engine bound, the
// waiting reason while the engine is not ready, and a retarget after the engine moved.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/discovery/discovery_actor.hpp"
#include "messages/system_setup.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/publisher.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;

// DP ranks bound at port 0 (live and replay), described by an HTTP server in vLLM's dialect.
struct engine {
  std::vector<std::unique_ptr<fake::publisher>> pubs;
  std::unique_ptr<fake::engine_http> http;

  explicit engine(int dp) {
    fake::engine_description d;
    d.topic = "kv-events";
    http = std::make_unique<fake::engine_http>(d, "127.0.0.1", 0, nullptr);
    bind(dp);
  }
  // (Re)binds every rank on fresh ports and says so over HTTP: a restarted engine.
  void bind(int dp) {
    for (auto& p : pubs) p->stop();
    pubs.clear();
    std::vector<fake::rank_endpoints> ranks;
    for (int r = 0; r < dp; ++r) {
      fake::publisher_options o;
      o.bind = "tcp://127.0.0.1:0";
      o.replay_bind = "tcp://127.0.0.1:0";
      o.topic = "kv-events";
      o.dp_rank = r;
      o.linger_ms = 0;
      pubs.push_back(std::make_unique<fake::publisher>(o));
      ranks.push_back({pubs.back()->live_endpoint(), pubs.back()->replay_endpoint()});
    }
    http->update([&](fake::engine_description& d) {
      d.ranks = ranks;
      d.discovery_answer = {};
    });
  }
};

struct DiscoveryActor : ::testing::Test {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> self;
  discovery_actor aut;

  DiscoveryActor() {
    setup_actor_system(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    self = std::make_unique<caf::scoped_actor>(*sys);
  }
  ~DiscoveryActor() override {
    if (aut) caf::anon_send_exit(aut, caf::exit_reason::user_shutdown);
    self.reset();
    sys->await_all_actors_done();
  }

  void start(const std::string& url) {
    discovery_options o;
    o.retry_initial = 20ms;
    discovery_options::engine e;
    e.index = 0;
    e.request.url = url;
    e.request.replica_id = "vllm-0";
    e.retry_max = 100ms;
    o.engines.push_back(e);
    pipeline_context ctx;
    ctx.name = "discovery";
    aut = spawn_discovery(*sys, ctx, o, caf::actor_cast<discovery_listener_actor>(*self));
  }

  // The next update that satisfies `want`, skipping others; nullopt after 10 s.
  template <class Pred>
  discovery_update_ptr next(Pred want) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      discovery_update_ptr got;
      (*self)->receive([&](const discovery_update_ptr& u) { got = u; },
                       caf::after(std::chrono::milliseconds(200)) >> [] {});
      if (got && want(*got)) return got;
    }
    return nullptr;
  }
  discovery_update_ptr next_target() {
    return next([](const discovery_update& u) { return u.target != nullptr; });
  }
};

TEST_F(DiscoveryActor, Dp2AtPortZeroArrivesWithTheBoundEndpoints) {
  engine e(2);
  start(e.http->url());
  const auto u = next_target();
  ASSERT_TRUE(u);
  ASSERT_EQ(u->target->ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const auto& rank = u->target->ranks[r];
    EXPECT_EQ(rank.endpoint.value, e.pubs[r]->live_endpoint());
    EXPECT_EQ(rank.replay_endpoint.value, e.pubs[r]->replay_endpoint());
    EXPECT_EQ(rank.replica_id, "vllm-0-dp" + std::to_string(r));
    EXPECT_EQ(rank.endpoint.origin,
              "discovered: GET /kv_event_sources [\"" + std::to_string(r) + "\"]");
  }
  EXPECT_EQ(u->target->model_id.value, "fake-model");
  EXPECT_EQ(u->target->metrics_url.value, e.http->url() + "/metrics");
}

TEST_F(DiscoveryActor, WaitsWhileTheEngineIsNotReadyThenFindsIt) {
  engine e(1);
  e.http->update([](fake::engine_description& d) {
    d.discovery_answer = {503, R"({"detail": "engine starting"})"};
  });
  start(e.http->url());
  const auto waiting = next([](const discovery_update& u) {
    return u.waiting.find("HTTP 503") != std::string::npos;
  });
  ASSERT_TRUE(waiting) << "the reason quotes what the engine answered";
  EXPECT_FALSE(waiting->target);
  EXPECT_NE(waiting->waiting.find("waiting for engine " + e.http->url()), std::string::npos);
  e.http->update([](fake::engine_description& d) { d.discovery_answer = {}; });
  const auto u = next_target();
  ASSERT_TRUE(u) << "the retries find the engine once it answers";
  EXPECT_EQ(u->target->ranks.at(0).endpoint.value, e.pubs[0]->live_endpoint());
}

TEST_F(DiscoveryActor, AnEngineRestartedOnNewPortsIsRetargeted) {
  engine e(2);
  start(e.http->url());
  const auto first = next_target();
  ASSERT_TRUE(first);
  e.bind(2);  // new ports (the old sockets are gone)
  caf::anon_send(aut, atom::stream_v, uint64_t{0}, int64_t{0}, false,
                 std::string("disconnected"));
  const auto u = next_target();
  ASSERT_TRUE(u);
  ASSERT_EQ(u->target->ranks.size(), 2u);
  EXPECT_EQ(u->target->ranks[0].endpoint.value, e.pubs[0]->live_endpoint());
  EXPECT_EQ(u->target->ranks[1].replay_endpoint.value, e.pubs[1]->replay_endpoint());
  EXPECT_NE(u->target->ranks[0].endpoint.value, first->target->ranks[0].endpoint.value);
}

}  // namespace
}  // namespace kvrelay
