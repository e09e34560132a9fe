// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The root actor's side of discovery under the deterministic scheduler: an engine with a URL is
// "waiting" until a target arrives, a target spawns its pipelines (through the spawn seam), the
// same pipelines again only refresh the origins, changed ones replace the old pipelines. The
// discovery actor it owns fetches through a port that never answers (the test speaks for it).

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <memory>
#include <string>
#include <vector>

#include "supervision/daemon_actor.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;

struct silent_port final : discovery_fetch_port {
  void fetch(uint64_t, const std::string&, const discovery::fetch_options&) override {}
};

struct spawned_log {
  std::vector<std::string> endpoints;  // rank 0's endpoint of every spawn
  std::vector<caf::actor> pipelines;   // every pipeline spawned, in order
  std::vector<bool> exited;
  bool linger = false;  // pipelines record their exit but keep running (a slow teardown)
};

struct root_test : ::testing::Test {
  testing::deterministic_system t;
  std::shared_ptr<spawned_log> log = std::make_shared<spawned_log>();
  daemon_actor root;

  void SetUp() override {
    daemon_discovery d;
    discovery_options::engine e;
    e.index = 0;
    e.request.url = "http://10.0.0.5:8000";
    e.request.replica_id = "vllm-0";
    d.options.engines.push_back(e);
    d.options.make_fetcher = [](discovery_actor) { return std::make_unique<silent_port>(); };
    d.replica_ids[0] = "vllm-0";
    auto l = log;
    auto* sys = &t.sys();
    d.spawn = [l, sys](size_t engine, const discovered_target& target,
                       const discovery_actor&) -> outcome<engine_pipelines> {
      engine_pipelines out;
      for (const auto& r : target.ranks) {
        const size_t i = l->pipelines.size();
        l->exited.push_back(false);
        auto hdl = sys->spawn([l, i](caf::event_based_actor* self) -> caf::behavior {
          self->set_exit_handler([=](caf::exit_msg& m) {
            l->exited[i] = true;
            if (!l->linger) self->quit(m.reason);
          });
          return {
              [](atom::ready) { return caf::make_message(true, std::vector<std::string>{}); },
              [](atom::status) { return actor_status("pipeline", 0); },
          };
        });
        l->pipelines.push_back(hdl);
        daemon_pipeline p;
        p.engine = engine;
        p.facts.name = r.replica_id;
        p.facts.replica_id = r.replica_id;
        p.facts.endpoint = r.endpoint.value;
        p.hdl = caf::actor_cast<pipeline_actor>(hdl);
        out.pipelines.push_back(std::move(p));
      }
      l->endpoints.push_back(target.ranks.at(0).endpoint.value);
      return out;
    };
    root = spawn_daemon_actor(t.sys(), {}, std::move(d));
    t.stop_at_end(caf::actor_cast<caf::actor>(root));
    t.run();
  }

  void tell(const std::string& endpoint, const std::string& origin = "discovered: x") {
    auto target = std::make_shared<discovered_target>();
    target->url = "http://10.0.0.5:8000";
    discovered_rank r;
    r.replica_id = "vllm-0";
    r.endpoint = {endpoint, origin};
    target->ranks.push_back(r);
    auto u = std::make_shared<discovery_update>();
    u->engine = 0;
    u->url = target->url;
    u->target = target;
    caf::anon_send(root, discovery_update_ptr{u});
    t.run();
  }

  template <class Reply, class... Ts>
  Reply ask(Ts... xs) {
    Reply out{};
    auto client = t.sys().spawn([&](caf::event_based_actor* self) {
      self->request(root, 1s, xs...).then([&](Reply r) { out = std::move(r); });
    });
    t.stop_at_end(client);
    t.run();
    return out;
  }

  daemon_view status() {
    daemon_view out;
    auto client = t.sys().spawn([&](caf::event_based_actor* self) {
      self->request(root, 1s, atom::status_v)
          .then([&](std::vector<pipeline_view> v, actor_status d) {
            out = {std::move(v), std::move(d)};
          });
    });
    t.stop_at_end(client);
    t.run();
    return out;
  }

  std::vector<std::string> reasons() {
    std::vector<std::string> out;
    auto client = t.sys().spawn([&](caf::event_based_actor* self) {
      self->request(root, 1s, atom::ready_v).then([&](bool, std::vector<std::string> why) {
        out = std::move(why);
      });
    });
    t.stop_at_end(client);
    t.run();
    return out;
  }
};

TEST_F(root_test, WaitsUntilATargetThenRunsItsPipelines) {
  const auto why = reasons();
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(why[0], "vllm-0: waiting for engine http://10.0.0.5:8000: not answered yet");
  EXPECT_TRUE(ask<std::vector<std::string>>(atom::pipelines_v).empty());
  tell("tcp://10.0.0.5:1");
  EXPECT_EQ(log->endpoints, std::vector<std::string>{"tcp://10.0.0.5:1"});
  EXPECT_EQ(ask<std::vector<std::string>>(atom::pipelines_v), std::vector<std::string>{"vllm-0"});
  EXPECT_TRUE(reasons().empty()) << reasons().front();
}

// /debug/tree shows the discovery actor beside the pipelines: what it asks, what it is doing.
TEST_F(root_test, ItsStatusCarriesTheDiscoveryActorsBesideThePipelines) {
  auto s = status();
  EXPECT_EQ(s.discovery.name, "discovery");
  EXPECT_EQ(s.discovery.kind, "discovery");
  EXPECT_EQ(s.discovery.state, "running");
  ASSERT_EQ(s.discovery.children.size(), 1u);
  const auto& e = s.discovery.children[0];
  const auto text = [&](const char* key) {
    const auto* v = e.find(key);
    return v && std::holds_alternative<std::string>(*v) ? std::get<std::string>(*v) : "?";
  };
  EXPECT_EQ(text("url"), "http://10.0.0.5:8000");
  EXPECT_EQ(text("state"), "waiting");
  EXPECT_TRUE(e.flag("fetching")) << "its first fetch is out (the port never answers)";
  EXPECT_EQ(e.integer("fetches"), 1);
  EXPECT_EQ(e.integer("retries"), 0);
  EXPECT_EQ(e.integer("last_fetch_unix_ms"), 0) << "no answer yet";
  ASSERT_EQ(s.pipelines.size(), 1u) << "the waiting engine";
  EXPECT_EQ(s.pipelines[0].status.state, "waiting");
  tell("tcp://10.0.0.5:1");
  s = status();
  ASSERT_EQ(s.pipelines.size(), 1u);
  EXPECT_EQ(s.pipelines[0].status.kind, "pipeline");
  EXPECT_EQ(s.discovery.kind, "discovery");
}

TEST_F(root_test, TheSamePipelinesKeepRunningAndChangedOnesAreReplaced) {
  tell("tcp://10.0.0.5:1");
  tell("tcp://10.0.0.5:1", "discovered: y");  // a re-read after a stream stop: unchanged
  EXPECT_EQ(log->endpoints.size(), 1u) << "nothing respawned";
  EXPECT_FALSE(log->exited[0]);
  const auto views = status().pipelines;
  ASSERT_EQ(views.size(), 1u);
  ASSERT_FALSE(views[0].origins.empty());
  EXPECT_EQ(views[0].origins[0].second, "discovered: y") << "the origins are refreshed";
  tell("tcp://10.0.0.5:2");  // the engine moved
  ASSERT_EQ(log->endpoints.size(), 2u);
  EXPECT_EQ(log->endpoints[1], "tcp://10.0.0.5:2");
  EXPECT_TRUE(log->exited[0]) << "the old pipeline was stopped";
  EXPECT_FALSE(log->exited[1]);
  EXPECT_EQ(ask<std::vector<std::string>>(atom::pipelines_v), std::vector<std::string>{"vllm-0"});
}

// A moved engine's new pipelines start only once the old ones are down: an old emitter still
// sending what it had queued after the new pipeline's ALL_CLEARED would leave stale hints.
TEST_F(root_test, ANewTargetWaitsUntilTheOldPipelinesAreDown) {
  tell("tcp://10.0.0.5:1");
  log->linger = true;
  tell("tcp://10.0.0.5:2");
  EXPECT_TRUE(log->exited[0]) << "the old pipeline was told to stop";
  EXPECT_EQ(log->endpoints.size(), 1u) << "nothing new while the old one is still up";
  const auto why = reasons();
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("old pipelines are stopping"), std::string::npos) << why[0];
  tell("tcp://10.0.0.5:3");  // moved again meanwhile: the newest target is the one started
  EXPECT_EQ(log->endpoints.size(), 1u);
  log->linger = false;  // the pipelines spawned next stop when told
  caf::anon_send_exit(log->pipelines[0], caf::exit_reason::kill);
  t.run();
  ASSERT_EQ(log->endpoints.size(), 2u);
  EXPECT_EQ(log->endpoints[1], "tcp://10.0.0.5:3");
  EXPECT_TRUE(reasons().empty());
}

}  // namespace
}  // namespace kvrelay
