// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The discovery protocol of one engine over time (actors/discovery/discovery_protocol.hpp, rules
// DP1-DP7), driven directly: answers are parsed bodies, time is an argument.
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

}  // namespace
}  // namespace kvrelay::discovery
