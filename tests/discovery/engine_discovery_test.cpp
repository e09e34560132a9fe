// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The discovery parser against every response shape in docs/discovery.md and every failure its
// rules name (actors/discovery/engine_discovery.hpp). Pure: answers are built in the test.
#include "actors/discovery/engine_discovery.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/discovery/discovery_test_util.hpp"

namespace kvrelay::discovery {
namespace {

// -- the engine URL (ED1) ------------------------------------------------------------------

TEST(EngineUrl, BaseHostAndPrefix) {
  auto b = parse_engine_url("http://127.0.0.1:8000/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().url, "http://127.0.0.1:8000");
  EXPECT_EQ(b.value().host, "127.0.0.1");
  EXPECT_EQ(b.value().prefix, "");
  b = parse_engine_url("http://[fd00::1]:30000/engine0/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().host, "fd00::1");
  EXPECT_EQ(b.value().prefix, "/engine0");
  EXPECT_EQ(b.value().url, "http://[fd00::1]:30000/engine0");
}

TEST(EngineUrl, RejectsWhatIsNotABaseUrl) {
  for (const char* bad :
       {"https://h:8000", "h:8000", "http://h:8000/?x=1", "http://h:8000#f", "http://:8000", ""}) {
    auto b = parse_engine_url(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.error().code, ec::invalid_config) << bad;
    EXPECT_TRUE(has(b.error().context, "invalid engine URL")) << b.error().context;
    EXPECT_FALSE(discover(bad, vllm("{}")).ok());
  }
}

// -- vLLM /kv_event_sources (rules 2-4, 6, 8) -------------------------------------------------

// ED3: every vLLM body shape is accepted, keyed by DP rank.
TEST(VllmSources, RankKeyedObjectAsMerged) {
  // vllm #55844 as read by its consumers: keyed by rank string, values are publisher configs.
  const auto e = ok(kUrl + std::string("/"), vllm(R"({
    "1": {"publisher": "zmq", "endpoint": "tcp://10.0.0.5:41235", "replay_endpoint": null,
          "topic": "kv-events", "enable_kv_cache_events": true, "buffer_steps": 10000,
          "hwm": 100000, "max_queue_size": 100000},
    "0": {"publisher": "zmq", "endpoint": "tcp://10.0.0.5:41233",
          "replay_endpoint": "tcp://10.0.0.5:41234", "topic": "kv-events"}})"));
  EXPECT_EQ(e.dialect, dialect::vllm);
  EXPECT_EQ(e.hash_scheme, "vllm");
  EXPECT_EQ(e.url, kUrl);
  EXPECT_EQ(e.metrics_url, "http://10.0.0.5:8000/metrics");
  ASSERT_EQ(e.publishers.size(), 2u);
  EXPECT_EQ(e.publishers[0].dp_rank, 0);
  EXPECT_EQ(e.publishers[0].endpoint, "tcp://10.0.0.5:41233");
  EXPECT_EQ(e.publishers[0].replay_endpoint, "tcp://10.0.0.5:41234");
  EXPECT_EQ(e.publishers[0].topic, "kv-events");
  EXPECT_FALSE(e.publishers[0].block_size);
  EXPECT_EQ(e.publishers[0].origin, "GET /kv_event_sources [\"0\"]");
  EXPECT_EQ(e.publishers[1].dp_rank, 1);
  EXPECT_EQ(e.publishers[1].replay_endpoint, "");
  EXPECT_TRUE(e.notes.empty());
  EXPECT_TRUE(e.model_id.empty());  // /v1/models not asked
}

TEST(VllmSources, SourcesEnvelopeWithWildcardHosts) {
  const auto e = ok(kUrl, vllm(R"({"sources": [
    {"data_parallel_rank": 1, "endpoint": "tcp://0.0.0.0:41002", "replay_endpoint": null,
     "topic": "kv-events"},
    {"data_parallel_rank": 0, "endpoint": "tcp://0.0.0.0:41001",
     "replay_endpoint": "tcp://0.0.0.0:41003", "topic": "kv-events"}]})"));
  EXPECT_EQ(endpoints(e),
            (std::vector<std::string>{"tcp://10.0.0.5:41001", "tcp://10.0.0.5:41002"}));
  EXPECT_EQ(e.publishers[0].replay_endpoint, "tcp://10.0.0.5:41003");
  EXPECT_EQ(e.publishers[1].origin, "GET /kv_event_sources sources[0]");
}

TEST(VllmSources, BareListAndStarHost) {
  const auto e = ok(kUrl, vllm(R"([{"data_parallel_rank": 0, "endpoint": "tcp://*:5557",
                                    "replay_endpoint": null, "topic": ""}])"));
  ASSERT_EQ(e.publishers.size(), 1u);
  EXPECT_EQ(e.publishers[0].endpoint, "tcp://10.0.0.5:5557");
  EXPECT_EQ(e.publishers[0].topic, "");
  EXPECT_EQ(e.publishers[0].origin, "GET /kv_event_sources [0]");
}

TEST(VllmSources, ListWithoutRanksIsNumberedByPosition) {
  const auto e = ok(kUrl, vllm(R"([{"endpoint": "tcp://*:5557"}, {"endpoint": "tcp://*:5558"},
                                   {"dp_rank": 7, "endpoint": "tcp://*:5599"}])"));
  ASSERT_EQ(e.publishers.size(), 3u);
  EXPECT_EQ(e.publishers[0].dp_rank, 0);
  EXPECT_EQ(e.publishers[1].dp_rank, 1);
  EXPECT_EQ(e.publishers[2].dp_rank, 7);
  EXPECT_EQ(e.publishers[2].endpoint, "tcp://10.0.0.5:5599");
}

TEST(VllmSources, GrpcSourcesInJson) {
  // Control.GetKvEventSources (#50033) rendered as JSON: snake_case and lowerCamelCase names,
  // endpoint string or endpoint_addr, empty replay = none.
  const auto e = ok(kUrl, vllm(R"({"sources": [
    {"transport": "zmq", "endpoint": "", "endpoint_addr": {"host": "10.1.1.1", "port": 20081,
     "protocol": "tcp"}, "topic": "kv", "replay_endpoint": "", "data_parallel_rank": 0,
     "encoding": "msgpack", "schema_version": 1, "buffer_steps": 0, "hwm": 0,
     "max_queue_size": 0},
    {"transport": "zmq", "endpointAddr": {"host": "fd00::7", "port": 20082},
     "replayEndpoint": "tcp://[fd00::7]:20182", "dataParallelRank": 1, "topic": "kv"},
    {"transport": "zmq", "endpoint": "tcp://10.1.1.1:20083", "data_parallel_rank": 2}]})"));
  EXPECT_EQ(endpoints(e), (std::vector<std::string>{"tcp://10.1.1.1:20081", "tcp://[fd00::7]:20082",
                                                    "tcp://10.1.1.1:20083"}));
  EXPECT_EQ(e.publishers[0].replay_endpoint, "");
  EXPECT_EQ(e.publishers[1].replay_endpoint, "tcp://[fd00::7]:20182");
  EXPECT_EQ(e.publishers[1].topic, "kv");
}

TEST(VllmSources, Ipv6EndpointsComeOutBracketed) {
  const std::string url = "http://[::1]:8000";
  const auto e = ok(url, vllm(R"({"0": {"endpoint": "tcp://*:5557"},
                                  "1": {"endpoint": "tcp://[::]:5558"},
                                  "2": {"endpoint": "tcp://[fd00::2]:41001"},
                                  "3": {"endpoint": "tcp://0.0.0.0:5560",
                                        "replay_endpoint": "tcp://*:5660"}})"));
  EXPECT_EQ(endpoints(e), (std::vector<std::string>{"tcp://[::1]:5557", "tcp://[::1]:5558",
                                                    "tcp://[fd00::2]:41001", "tcp://[::1]:5560"}));
  EXPECT_EQ(e.publishers[3].replay_endpoint, "tcp://[::1]:5660");
}

TEST(VllmSources, PrefixedUrlAsksUnderThePrefix) {
  const auto e = ok("http://gw:80/engine0/", vllm(R"({"0": {"endpoint": "tcp://*:5557"}})"));
  EXPECT_EQ(e.metrics_url, "http://gw:80/engine0/metrics");
  EXPECT_EQ(e.publishers[0].endpoint, "tcp://gw:5557");
  EXPECT_EQ(e.publishers[0].origin, "GET /engine0/kv_event_sources [\"0\"]");
}

TEST(VllmSources, LoopbackBehindARemoteUrlIsKeptWithANote) {
  const auto e = ok(kUrl, vllm(R"({"0": {"endpoint": "tcp://127.0.0.1:5557"}})"));
  EXPECT_EQ(e.publishers[0].endpoint, "tcp://127.0.0.1:5557");
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_TRUE(has(e.notes[0], "loopback")) << e.notes[0];
  EXPECT_TRUE(ok("http://127.0.0.1:8000", vllm(R"({"0": {"endpoint": "tcp://127.0.0.1:1"}})"))
                  .notes.empty());
}

// ED4: a source with publisher "null" or events disabled is off and skipped.
TEST(VllmSources, SourcesThatAreOffAreSkippedWithANote) {
  const auto e = ok(kUrl, vllm(R"({"0": {"publisher": "zmq", "endpoint": "tcp://*:5557"},
                                   "1": {"publisher": "null", "endpoint": "tcp://*:5558"},
                                   "2": {"enable_kv_cache_events": false,
                                         "endpoint": "tcp://*:5559"}})"));
  ASSERT_EQ(e.publishers.size(), 1u);
  ASSERT_EQ(e.notes.size(), 2u);
  EXPECT_TRUE(has(e.notes[0], "[\"1\"] is off")) << e.notes[0];
}

TEST(VllmSources, EventsDisabledIsItsOwnError) {
  for (const char* body : {"{}", "[]", R"({"sources": []})",
                           R"({"0": {"publisher": "null", "endpoint": "tcp://*:5557"}})",
                           R"([{"enable_kv_cache_events": false, "endpoint": "tcp://*:1"}])"}) {
    const auto why = fails(kUrl, vllm(body));
    EXPECT_EQ(why.rfind("KV events are disabled on the engine http://10.0.0.5:8000", 0), 0u)
        << body << ": " << why;
    EXPECT_TRUE(has(why, "GET /kv_event_sources")) << why;
  }
}

// ED6: tcp:// only; a wildcard host becomes the engine URL's host.
TEST(VllmSources, EndpointsThatCannotBeDialled) {
  const std::vector<bad_case> cases = {
      {R"({"0": {"endpoint": "tcp://*:0"}})", "bind request"},
      {R"({"0": {"endpoint": "tcp://10.0.0.5:*"}})", "bind request"},
      {R"({"0": {"endpoint_addr": {"host": "*", "port": 0}}})", "bind request"},
      {R"({"0": {"endpoint": "ipc:///tmp/kv"}})", "not a tcp:// endpoint"},
      {R"({"0": {"endpoint": "inproc://kv"}})", "not a tcp:// endpoint"},
      {R"({"0": {"endpoint": "tcp://host"}})", "no port"},
      {R"({"0": {"endpoint": "tcp://host:99999"}})", "outside 1..65535"},
      {R"({"0": {"endpoint": "tcp://host:55x"}})", "not a number"},
      {R"({"0": {"endpoint": "tcp://[::1:5557"}})", "malformed"},
      {R"({"0": {"endpoint": "tcp://a b:5557"}})", "not a name or an address"},
      {R"({"0": {"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:0"}})", "replay endpoint"},
      {R"({"0": {"endpoint_addr": {"host": "h", "port": 1, "protocol": "ipc"}}})", "not tcp"},
      {R"({"0": {"endpoint_addr": {"host": "h"}}})", "endpoint_addr"},
      {R"({"0": {"topic": "kv"}})", "no endpoint"},
  };
  expect_failures(kUrl, cases, [](const char* body) { return vllm(body); });
  const auto why = fails(kUrl, vllm(cases[0].body));
  EXPECT_EQ(why.rfind("engine http://10.0.0.5:8000: GET /kv_event_sources: ", 0), 0u) << why;
}

TEST(VllmSources, ShapesAndFieldsNotUnderstood) {
  expect_failures(
      kUrl,
      {
          {"<html>Not here</html>", "not JSON"},
          {"", "not JSON"},
          {"42", "neither a JSON object nor a list"},
          {R"({"engines": []})", "neither keyed by DP rank"},
          {R"({"-1": {"endpoint": "tcp://*:1"}})", "neither keyed by DP rank"},
          {R"({"sources": {"0": {}}})", "\"sources\" is not a list"},
          {R"([1, 2])", "is not an object"},
          {R"([{"data_parallel_rank": -1, "endpoint": "tcp://*:1"}])", "DP rank -1"},
          {R"([{"data_parallel_rank": "one", "endpoint": "tcp://*:1"}])", "DP rank"},
          {R"([{"data_parallel_rank": 1.5, "endpoint": "tcp://*:1"}])", "DP rank"},
          {R"({"0": {"publisher": "redis", "endpoint": "tcp://*:1"}})", "only zmq"},
          {R"({"0": {"publisher": 1, "endpoint": "tcp://*:1"}})", "publisher 1"},
          {R"({"sources": [{"transport": "grpc", "endpoint": "tcp://*:1"}]})", "transport"},
          {R"({"0": {"enable_kv_cache_events": "yes", "endpoint": "tcp://*:1"}})",
           "enable_kv_cache_events"},
          {R"({"0": {"endpoint": "tcp://*:1", "topic": 7}})", "topic 7"},
          {R"({"0": {"endpoint": "tcp://*:1", "replay_endpoint": 7}})", "replay_endpoint 7"},
          {R"({"0": {"endpoint": 5557}})", "no endpoint"},
          {R"({"0": {"endpoint": "tcp://*:1"}, "00": {"endpoint": "tcp://*:2"}})",
           "DP rank 0 is listed twice"},
          {R"({"0": {"endpoint": "tcp://*:1"}, "1": {"endpoint": "tcp://10.0.0.5:1"}})",
           "both advertise tcp://10.0.0.5:1"},
      },
      [](const char* body) { return vllm(body); });
}

TEST(VllmSources, StatusAndTransportFailures) {
  auto why = fails(kUrl, vllm("engine starting", 503));
  EXPECT_TRUE(has(why, "answered HTTP 503: \"engine starting\"")) << why;
  engine_answers lost;
  lost.kv_event_sources = http_answer{"/kv_event_sources", 0, "", "Connection refused"};
  why = fails(kUrl, lost);
  EXPECT_TRUE(has(why, "GET /kv_event_sources: no answer: Connection refused")) << why;
  why = fails(kUrl, vllm("{}", 404));  // 404 and nobody asked /server_info
  EXPECT_TRUE(has(why, "/server_info was not asked")) << why;
  why = fails(kUrl, engine_answers{});
  EXPECT_TRUE(has(why, "neither /kv_event_sources nor /server_info was asked")) << why;
}

// ED8: at least one publisher, at most 1024, ranks and endpoints distinct, sorted by rank.
TEST(VllmSources, BoundsOnWhatArrives) {
  // A huge body is quoted by its first 256 bytes and its size.
  std::string body = "<html>" + std::string(10000, 'x');
  auto why = fails(kUrl, vllm(body));
  EXPECT_TRUE(has(why, "... (10006 bytes)")) << why;
  EXPECT_LT(why.size(), 500u);
  // Deep nesting is refused before parsing.
  why = fails(kUrl, vllm(std::string(100000, '[') + std::string(100000, ']')));
  EXPECT_TRUE(has(why, "nested deeper than 32")) << why;
  // More than 1024 publishers.
  std::string many = "[";
  for (int i = 0; i < 1100; ++i)
    many += (i ? "," : "") + std::string(R"({"endpoint":"tcp://*:1"})");
  why = fails(kUrl, vllm(many + "]"));
  EXPECT_TRUE(has(why, "at most that many")) << why;
}

// ED2: a 2xx /kv_event_sources is vLLM; a 404 or 405 there asks SGLang's /server_info.
TEST(VllmSources, NeedsServerInfoOnlyWhenTheRouteIsAbsent) {
  EXPECT_TRUE(needs_server_info(answer("/kv_event_sources", "", 404)));
  EXPECT_TRUE(needs_server_info(answer("/kv_event_sources", "", 405)));
  EXPECT_FALSE(needs_server_info(answer("/kv_event_sources", "{}", 200)));
  EXPECT_FALSE(needs_server_info(answer("/kv_event_sources", "", 500)));
  EXPECT_FALSE(needs_server_info(http_answer{"/kv_event_sources", 0, "", "refused"}));
}

}  // namespace
}  // namespace kvrelay::discovery
