// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The discovery actor's shell under the deterministic scheduler: fetches go to a port the test
// answers, timers fire when the test moves the clock, and the listener is a recorder. No sockets.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/discovery/discovery_actor.hpp"
#include "tests/discovery/discovery_test_util.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;
using discovery::kUrl;

struct fetch_log {
  std::vector<std::pair<uint64_t, discovery::fetch_options>> asked;
};

class fake_port final : public discovery_fetch_port {
 public:
  explicit fake_port(std::shared_ptr<fetch_log> log) : log_(std::move(log)) {}
  void fetch(uint64_t engine, const std::string&, const discovery::fetch_options& o) override {
    log_->asked.emplace_back(engine, o);
  }

 private:
  std::shared_ptr<fetch_log> log_;
};

discovery_fetch_ptr answer(const std::string& endpoint) {
  auto a = discovery::vllm(R"({"0": {"publisher": "zmq", "endpoint": ")" + endpoint + R"("}})");
  a.models = discovery::answer("/v1/models", R"({"data": [{"id": "m"}]})");
  return std::make_shared<const discovery_fetch>(discovery_fetch{discovery::discover(kUrl, a)});
}

discovery_fetch_ptr refused() {
  return std::make_shared<const discovery_fetch>(discovery_fetch{
      failure{ec::discovery_failed, "engine http://10.0.0.5:8000: connection refused", {}}});
}

struct shell : ::testing::Test {
  testing::deterministic_system t;
  testing::recorder listener{t};
  std::shared_ptr<fetch_log> log = std::make_shared<fetch_log>();
  discovery_actor aut;

  void start(bool model_given = false) {
    pipeline_context ctx;
    ctx.name = "discovery";
    discovery_options o;
    o.retry_initial = 100ms;
    for (uint64_t i : {0u, 2u}) {  // engine 1 has no URL: not watched
      discovery_options::engine e;
      e.index = i;
      e.request.url = kUrl;
      e.request.replica_id = "vllm-" + std::to_string(i);
      if (model_given) e.request.model_id = discovery::given{"m", "--model-id"};
      e.retry_max = 400ms;
      o.engines.push_back(e);
    }
    auto l = log;
    o.make_fetcher = [l](discovery_actor) { return std::make_unique<fake_port>(l); };
    aut = spawn_discovery(t.sys(), ctx, o, listener.as<discovery_listener_actor>());
    t.stop_at_end(caf::actor_cast<caf::actor>(aut));
    t.run();
  }
  std::vector<discovery_update_ptr> updates() const { return listener.all<discovery_update_ptr>(); }
  void reply(uint64_t engine, discovery_fetch_ptr r) {
    caf::anon_send(aut, atom::fetched_v, engine, std::move(r));
    t.run();
  }
};

TEST_F(shell, StartFetchesEveryWatchedEngineAndSaysWhyItWaits) {
  start();
  ASSERT_EQ(log->asked.size(), 2u);
  EXPECT_EQ(log->asked[0].first, 0u);
  EXPECT_EQ(log->asked[1].first, 2u);
  EXPECT_TRUE(log->asked[0].second.want_model) << "no model configured: ask /v1/models";
  const auto u = updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_FALSE(u[0]->target);
  EXPECT_EQ(u[0]->waiting, "waiting for engine http://10.0.0.5:8000: not answered yet");
  EXPECT_EQ(u[1]->engine, 2u);
}

TEST_F(shell, AnAnswerBecomesATargetForThatEngineOnly) {
  start(true);
  EXPECT_FALSE(log->asked[0].second.want_model) << "the model is configured";
  listener.clear();
  reply(2, answer("tcp://10.0.0.5:41233"));
  const auto u = updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0]->engine, 2u);
  ASSERT_TRUE(u[0]->target);
  EXPECT_EQ(u[0]->waiting, "");
  ASSERT_EQ(u[0]->target->ranks.size(), 1u);
  EXPECT_EQ(u[0]->target->ranks[0].replica_id, "vllm-2");
  EXPECT_EQ(u[0]->target->ranks[0].endpoint.value, "tcp://10.0.0.5:41233");
  EXPECT_EQ(u[0]->target->model_id.origin, "flag/config (--model-id)");
}

TEST_F(shell, FailuresRetryOnTheTimerAndTheReasonCarriesTheError) {
  start();
  listener.clear();
  reply(0, refused());
  auto u = updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0]->waiting,
            "waiting for engine http://10.0.0.5:8000: connection refused");
  EXPECT_EQ(log->asked.size(), 2u) << "the retry waits for its backoff";
  ASSERT_TRUE(t.has_timer());
  t.advance(100ms);
  ASSERT_EQ(log->asked.size(), 3u);
  EXPECT_EQ(log->asked[2].first, 0u);
  reply(0, answer("tcp://10.0.0.5:41233"));
  u = updates();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_TRUE(u[1]->target);
}

TEST_F(shell, AStoppedStreamRereadsAndAMoveRetargets) {
  start();
  reply(0, answer("tcp://10.0.0.5:41233"));
  listener.clear();
  caf::anon_send(aut, atom::stream_v, uint64_t{0}, int64_t{0}, false, std::string("disconnected"));
  t.run();
  ASSERT_EQ(log->asked.size(), 3u) << "read again at once";
  reply(0, answer("tcp://10.0.0.5:41233"));
  EXPECT_TRUE(updates().empty()) << "the same endpoints: nothing to retarget";
  t.advance(400ms);  // the poll while the stream is stopped (DP6)
  ASSERT_EQ(log->asked.size(), 4u);
  reply(0, answer("tcp://10.0.0.5:50000"));
  const auto u = updates();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0]->target->ranks[0].endpoint.value, "tcp://10.0.0.5:50000");
  // Stream events of an engine nobody watches are dropped.
  caf::anon_send(aut, atom::stream_v, uint64_t{1}, int64_t{0}, false, std::string("x"));
  t.run();
  EXPECT_EQ(log->asked.size(), 4u);
}

TEST_F(shell, StatusShowsEachEngine) {
  start();
  reply(0, answer("tcp://10.0.0.5:41233"));
  actor_status st;
  auto client = t.sys().spawn([&](caf::event_based_actor* self) {
    self->request(aut, 1s, atom::status_v).then([&](actor_status s) { st = std::move(s); });
  });
  t.stop_at_end(client);
  t.run();
  EXPECT_EQ(st.kind, "discovery");
  ASSERT_EQ(st.children.size(), 2u);
  const auto* state = st.children[0].find("state");
  ASSERT_TRUE(state);
  EXPECT_EQ(std::get<std::string>(*state), "discovered");
  EXPECT_EQ(std::get<std::string>(*st.children[1].find("state")), "waiting");
}

}  // namespace
}  // namespace kvrelay
