// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The discovery protocol of one engine over time (actors/discovery/discovery_protocol.hpp, rules
// DP1-DP8), driven directly: answers are parsed bodies, time is an argument.
#include "actors/discovery/discovery_protocol.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tests/discovery/discovery_test_util.hpp"

namespace kvrelay::discovery {
namespace {

using kind = watch_action::kind;
using std::chrono::milliseconds;

outcome<discovered_engine> answer_with(const std::string& live0, const std::string& live1 = "") {
  std::string body = R"({"0": {"publisher": "zmq", "endpoint": ")" + live0 + R"("})";
  if (!live1.empty()) body += R"(, "1": {"publisher": "zmq", "endpoint": ")" + live1 + R"("})";
  body += "}";
  auto a = vllm(body);
  a.models = answer("/v1/models", R"({"data": [{"id": "m"}]})");
  return discover(kUrl, a);
}

outcome<discovered_engine> refused() {
  return failure{ec::discovery_failed, "engine http://10.0.0.5:8000: GET /kv_event_sources: "
                                       "connection refused", {}};
}

struct watch_test : ::testing::Test {
  engine_watch w{[] {
                   engine_request r;
                   r.url = kUrl;
                   r.replica_id = "vllm-0";
                   r.topic = given{"kv-events", "--topic"};  // conflicts with the engine's ""
                   return r;
                 }(),
                 watch_options{milliseconds(100), milliseconds(1000), 7}};
  watch_actions out;
  int64_t now = 0;

  std::vector<watch_action> take(kind k) {
    std::vector<watch_action> r;
    for (const auto& a : out)
      if (a.what == k) r.push_back(a);
    return r;
  }
  size_t count(kind k) { return take(k).size(); }
  void feed(const outcome<discovered_engine>& r) {
    out.clear();
    now += 1000;
    w.on_fetched(r, now, out);
  }
  // The fetch the last actions asked for after a delay; fires its timer.
  void fire() {
    auto f = take(kind::fetch);
    ASSERT_EQ(f.size(), 1u);
    ASSERT_GT(f[0].delay.count(), 0);
    out.clear();
    w.on_timer(f[0].gen, out);
    ASSERT_EQ(count(kind::fetch), 1u) << "the timer starts the fetch";
    EXPECT_EQ(take(kind::fetch)[0].delay.count(), 0);
  }
};

TEST_F(watch_test, StartsWaitingAndFetchesAtOnce) {
  w.start(out);
  EXPECT_EQ(w.state(), watch_state::waiting);
  ASSERT_EQ(count(kind::fetch), 1u);
  EXPECT_EQ(take(kind::fetch)[0].delay.count(), 0);
  ASSERT_EQ(count(kind::readiness), 1u);
  EXPECT_EQ(take(kind::readiness)[0].text,
            "waiting for engine http://10.0.0.5:8000: not answered yet");
  EXPECT_TRUE(w.fetching());
}

TEST_F(watch_test, FirstAnswerRetargetsClearsTheReasonAndLogsConflictsOnce) {
  w.start(out);
  feed(answer_with("tcp://10.0.0.5:1", "tcp://10.0.0.5:2"));
  EXPECT_EQ(w.state(), watch_state::discovered);
  ASSERT_EQ(count(kind::retarget), 1u);
  const auto t = take(kind::retarget)[0].target;
  ASSERT_EQ(t->ranks.size(), 2u);
  EXPECT_EQ(t->ranks[1].endpoint.value, "tcp://10.0.0.5:2");
  ASSERT_EQ(count(kind::readiness), 1u);
  EXPECT_EQ(take(kind::readiness)[0].text, "");
  EXPECT_EQ(count(kind::fetch), 0u) << "nothing to poll for";
  size_t conflicts = 0;
  for (const auto& l : take(kind::log))
    if (has(l.text, "differs from the engine's")) ++conflicts;
  EXPECT_EQ(conflicts, 2u) << "one per rank's topic";

  // The same answer again (a stream stop re-read it): no retarget, no conflict line again.
  out.clear();
  w.on_stream_stopped(0, "disconnected", out);
  ASSERT_EQ(count(kind::fetch), 1u);
  feed(answer_with("tcp://10.0.0.5:1", "tcp://10.0.0.5:2"));
  EXPECT_EQ(count(kind::retarget), 0u);
  for (const auto& l : take(kind::log)) EXPECT_FALSE(has(l.text, "differs")) << l.text;
}

TEST_F(watch_test, FailuresRetryWithCappedBackoffAndLogOncePerDistinctError) {
  w.start(out);
  feed(refused());
  EXPECT_EQ(w.state(), watch_state::waiting);
  ASSERT_EQ(count(kind::readiness), 1u);
  EXPECT_EQ(take(kind::readiness)[0].text,
            "waiting for engine http://10.0.0.5:8000: GET /kv_event_sources: connection refused");
  ASSERT_EQ(count(kind::log), 1u);
  EXPECT_EQ(take(kind::log)[0].level, log::level::warn);
  int64_t longest = 0;
  for (int i = 0; i < 12; ++i) {
    const auto f = take(kind::fetch);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_LE(f[0].delay.count(), 1000) << "capped by retry_max";
    longest = std::max<int64_t>(longest, f[0].delay.count());
    fire();
    feed(refused());
    EXPECT_EQ(count(kind::log), 0u) << "a repeat is only counted";
    EXPECT_EQ(count(kind::readiness), 0u) << "the same reason";
  }
  EXPECT_GE(longest, 500) << "the backoff grew to the cap";
  EXPECT_EQ(w.counters().suppressed, 12u);

  // A different error is logged; the recovery is logged and ends the waiting.
  fire();
  feed(discover(kUrl, vllm("{}")));
  ASSERT_EQ(count(kind::log), 1u);
  EXPECT_TRUE(has(take(kind::log)[0].fields[1].value, "KV events are disabled on the engine"));
  EXPECT_EQ(take(kind::log)[0].fields[3].value, "12") << "suppressed repeats are reported";
  fire();
  feed(answer_with("tcp://10.0.0.5:1"));
  EXPECT_EQ(count(kind::retarget), 1u);
  bool recovered = false;
  for (const auto& l : take(kind::log))
    recovered |= l.text == "engine discovered" && l.fields[3].value == "14";
  EXPECT_TRUE(recovered);
  EXPECT_EQ(take(kind::readiness).at(0).text, "");
  // The backoff starts over after a success.
  out.clear();
  w.on_stream_stopped(0, "disconnected", out);
  feed(refused());
  EXPECT_EQ(w.state(), watch_state::retrying) << "a target is known: the pipelines keep it";
  EXPECT_EQ(count(kind::readiness), 0u) << "readiness is the pipelines' now";
  EXPECT_LE(take(kind::fetch).at(0).delay.count(), 100);
}

TEST_F(watch_test, TooManyDistinctErrorsAreRateLimited) {
  w.start(out);
  size_t lines = 0;
  for (int i = 0; i < 20; ++i) {
    out.clear();
    now += 10;  // all within a minute
    w.on_fetched(failure{ec::discovery_failed, "body " + std::to_string(i), {}}, now, out);
    lines += count(kind::log);
    fire();
  }
  EXPECT_EQ(lines, 5u);
}

TEST_F(watch_test, StreamStopsRereadAndRetargetWhenEndpointsMoved) {
  w.start(out);
  feed(answer_with("tcp://10.0.0.5:1", "tcp://10.0.0.5:2"));
  out.clear();
  w.on_stream_stopped(0, "disconnected", out);
  w.on_stream_stopped(1, "disconnected", out);
  EXPECT_EQ(count(kind::fetch), 1u) << "one outstanding at a time";
  // The engine still answers the old ports (it has not moved yet): again at once (rank 1
  // stopped while the fetch was out), then poll after the backoff.
  feed(answer_with("tcp://10.0.0.5:1", "tcp://10.0.0.5:2"));
  EXPECT_EQ(count(kind::retarget), 0u);
  ASSERT_EQ(count(kind::fetch), 1u);
  EXPECT_EQ(take(kind::fetch)[0].delay.count(), 0);
  feed(answer_with("tcp://10.0.0.5:1", "tcp://10.0.0.5:2"));
  EXPECT_EQ(count(kind::retarget), 0u);
  fire();
  feed(answer_with("tcp://10.0.0.5:3", "tcp://10.0.0.5:4"));
  ASSERT_EQ(count(kind::retarget), 1u);
  EXPECT_EQ(take(kind::retarget)[0].target->ranks[0].endpoint.value, "tcp://10.0.0.5:3");
  EXPECT_EQ(count(kind::fetch), 0u) << "new pipelines: nothing stopped any more";
  EXPECT_TRUE(w.stopped_ranks().empty());
  EXPECT_EQ(w.counters().retargets, 2u);
}

TEST_F(watch_test, ARankSetChangeRetargets) {
  w.start(out);
  feed(answer_with("tcp://10.0.0.5:1", "tcp://10.0.0.5:2"));
  out.clear();
  w.on_stream_stopped(1, "incarnation reset", out);
  feed(answer_with("tcp://10.0.0.5:1"));
  ASSERT_EQ(count(kind::retarget), 1u);
  EXPECT_EQ(take(kind::retarget)[0].target->ranks.size(), 1u);
}

TEST_F(watch_test, AStopDuringAFetchAsksOnceMoreAfterIt) {
  w.start(out);
  feed(answer_with("tcp://10.0.0.5:1"));
  out.clear();
  w.on_stream_stopped(0, "disconnected", out);
  ASSERT_EQ(count(kind::fetch), 1u);
  out.clear();
  w.on_stream_stopped(0, "disconnected", out);
  EXPECT_EQ(count(kind::fetch), 0u) << "one outstanding at a time";
  feed(answer_with("tcp://10.0.0.5:1"));
  ASSERT_EQ(count(kind::fetch), 1u);
  EXPECT_EQ(take(kind::fetch)[0].delay.count(), 0) << "the stop came during the fetch: again now";
}

TEST_F(watch_test, AFlowingStreamEndsThePolling) {
  w.start(out);
  feed(answer_with("tcp://10.0.0.5:1"));
  out.clear();
  w.on_stream_stopped(0, "disconnected", out);
  feed(answer_with("tcp://10.0.0.5:1"));
  const auto poll = take(kind::fetch).at(0);
  w.on_stream_flowing(0);
  out.clear();
  w.on_timer(poll.gen, out);
  EXPECT_EQ(count(kind::fetch), 0u) << "the stream came back on the same endpoint";
  EXPECT_FALSE(w.fetching());
}

TEST_F(watch_test, StaleResultsTimersAndUnknownRanksAreIgnored) {
  w.start(out);
  out.clear();
  w.on_stream_stopped(0, "disconnected", out);
  EXPECT_TRUE(out.empty()) << "no target yet (DP7)";
  feed(answer_with("tcp://10.0.0.5:1"));
  out.clear();
  w.on_fetched(answer_with("tcp://10.0.0.5:9"), now, out);
  EXPECT_TRUE(out.empty()) << "no fetch outstanding (DP2)";
  w.on_timer(12345, out);
  EXPECT_TRUE(out.empty());
  w.on_stream_stopped(7, "disconnected", out);
  EXPECT_TRUE(out.empty()) << "rank 7 is not in the target";
}


// DP8: an engine whose URL was derived from its metrics URL (the Go sidecar's flags) runs on the
// configured settings while the engine says nothing usable, and follows the engine once it does.
struct configured_watch_test : watch_test {
  std::shared_ptr<const discovered_target> configured = [] {
    auto t = std::make_shared<discovered_target>();
    t->url = kUrl;
    t->dialect = "configured";
    t->model_id = {"m", "flag/config (--model-id)"};
    t->hash_scheme = {"vllm", "flag/config (--hash-scheme)"};
    t->metrics_url = {std::string(kUrl) + "/metrics", "flag/config (--engine-metrics-url)"};
    t->dp_size = {"1", "default (configured; the engine has not said)"};
    discovered_rank r;
    r.replica_id = "vllm-0";
    r.endpoint = {"tcp://10.0.0.5:1", "flag/config (--engine-endpoint)"};
    r.replay_endpoint = {"", "default (configured; the engine has not said)"};
    r.topic = {"", "default (configured; the engine has not said)"};
    t->ranks.push_back(r);
    return t;
  }();
  engine_watch cw{[this] {
                    engine_request r;
                    r.url = kUrl;
                    r.replica_id = "vllm-0";
                    r.endpoint = given{"tcp://10.0.0.5:1", "--engine-endpoint"};
                    r.model_id = given{"m", "--model-id"};
                    r.fallback = configured;
                    return r;
                  }(),
                  watch_options{milliseconds(100), milliseconds(1000), 7}};
  void feed_cw(const outcome<discovered_engine>& r) {
    out.clear();
    now += 1000;
    cw.on_fetched(r, now, out);
  }
};

TEST_F(configured_watch_test, DP8AFailureBeforeAnyAnswerRunsTheConfiguredSettingsAtOnce) {
  cw.start(out);
  ASSERT_EQ(count(kind::readiness), 1u) << "waiting until the first answer";
  feed_cw(refused());
  EXPECT_EQ(cw.state(), watch_state::configured);
  EXPECT_STREQ(to_string(cw.state()), "configured");
  ASSERT_EQ(count(kind::retarget), 1u);
  EXPECT_EQ(take(kind::retarget)[0].target, configured) << "the configured settings as they are";
  ASSERT_EQ(count(kind::readiness), 1u);
  EXPECT_EQ(take(kind::readiness)[0].text, "") << "the pipelines' readiness from now on";
  ASSERT_EQ(count(kind::fetch), 1u);
  EXPECT_GT(take(kind::fetch)[0].delay.count(), 0) << "the engine is asked again, later";
  ASSERT_EQ(count(kind::log), 1u);
  EXPECT_EQ(take(kind::log)[0].level, log::level::info) << "the Go sidecar's way: not a warning";
  EXPECT_TRUE(has(take(kind::log)[0].text, "configured settings")) << take(kind::log)[0].text;

  // More failures: still configured, no second retarget, a retry each time.
  const auto retry = take(kind::fetch)[0];
  out.clear();
  cw.on_timer(retry.gen, out);
  feed_cw(refused());
  EXPECT_EQ(cw.state(), watch_state::configured);
  EXPECT_EQ(count(kind::retarget), 0u);
  EXPECT_EQ(count(kind::fetch), 1u);
}

TEST_F(configured_watch_test, DP8AnAnswerAfterwardsIsFollowedEvenWithTheSamePipelines) {
  cw.start(out);
  feed_cw(refused());
  const auto retry = take(kind::fetch)[0];
  out.clear();
  cw.on_timer(retry.gen, out);
  // The engine answers with what is configured, and no more (no replay, the same endpoint): the
  // pipelines need not move, but the daemon must learn the origins.
  std::string body = R"({"0": {"publisher": "zmq", "endpoint": "tcp://10.0.0.5:1"}})";
  feed_cw(discover(kUrl, vllm(body)));
  EXPECT_EQ(cw.state(), watch_state::discovered);
  ASSERT_EQ(count(kind::retarget), 1u);
  const auto t = take(kind::retarget)[0].target;
  EXPECT_NE(t, configured);
  EXPECT_TRUE(t->same_pipelines(*configured));
  EXPECT_EQ(t->ranks[0].endpoint.origin, "flag/config (--engine-endpoint)");

  // A failure now keeps the discovered target (DP4), never the configured one again.
  out.clear();
  cw.on_stream_stopped(0, "disconnected", out);
  feed_cw(refused());
  EXPECT_EQ(cw.state(), watch_state::retrying);
  EXPECT_EQ(count(kind::retarget), 0u);
  EXPECT_EQ(cw.target(), t);
}

TEST_F(configured_watch_test, DP8AnAnswerWithAReplayEndpointMovesThePipelines) {
  cw.start(out);
  feed_cw(refused());
  const auto retry = take(kind::fetch)[0];
  out.clear();
  cw.on_timer(retry.gen, out);
  std::string body = R"({"0": {"publisher": "zmq", "endpoint": "tcp://10.0.0.5:1",
                               "replay_endpoint": "tcp://10.0.0.5:2"}})";
  feed_cw(discover(kUrl, vllm(body)));
  ASSERT_EQ(count(kind::retarget), 1u);
  const auto t = take(kind::retarget)[0].target;
  EXPECT_FALSE(t->same_pipelines(*configured));
  EXPECT_EQ(t->ranks[0].replay_endpoint.value, "tcp://10.0.0.5:2");
  EXPECT_TRUE(has(t->ranks[0].replay_endpoint.origin, "discovered: GET /kv_event_sources"));
}

TEST_F(watch_test, DP8WithoutAFallbackAFailureStillWaits) {
  w.start(out);
  feed(refused());
  EXPECT_EQ(w.state(), watch_state::waiting);
  EXPECT_EQ(count(kind::retarget), 0u);
}

}  // namespace
}  // namespace kvrelay::discovery
