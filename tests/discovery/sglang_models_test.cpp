// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// SGLang's /server_info shapes (ED5, ED7, ED9), /v1/models (ED10) and the quoting of what
// arrived (ED11). See docs/discovery.md for where each shape comes from.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actors/discovery/engine_discovery.hpp"
#include "tests/discovery/discovery_test_util.hpp"

namespace kvrelay::discovery {
namespace {

constexpr const char* kWorker = "http://10.0.0.9:30000";

// -- SGLang /server_info --------------------------------------------------------------------

TEST(SglangServerInfo, DescriptorAsMergedIn25844) {
  const auto e = ok(kWorker, sglang(R"({"model_path": "m", "page_size": 64, "dp_size": 1,
    "kv_events_config": "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\", \"topic\": \"kv\"}",
    "version": "0.5.9",
    "kv_events": {"publisher": "zmq", "endpoint_host": "*", "endpoint_port_base": 5557,
                  "topic": "kv", "block_size": 64, "dp_size": 1}})"));
  EXPECT_EQ(e.dialect, dialect::sglang);
  EXPECT_EQ(e.hash_scheme, "sglang");
  EXPECT_EQ(e.metrics_url, "http://10.0.0.9:30000/metrics");
  ASSERT_EQ(e.publishers.size(), 1u);
  const auto& p = e.publishers[0];
  EXPECT_EQ(p.endpoint, "tcp://10.0.0.9:5557");
  EXPECT_EQ(p.replay_endpoint, "");
  EXPECT_EQ(p.topic, "kv");
  EXPECT_EQ(p.block_size, 64);
  EXPECT_EQ(p.origin, "GET /server_info kv_events (port 5557 + rank 0)");
  EXPECT_TRUE(e.notes.empty());
}

TEST(SglangServerInfo, RanksAtBasePlusRankWithReplayFromTheRawConfig) {
  const auto e = ok(kWorker, sglang(R"({"dp_size": 2,
    "kv_events_config": "{\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\",\"replay_endpoint\":\"tcp://*:5600\"}",
    "kv_events": {"publisher": "zmq", "endpoint_host": "0.0.0.0", "endpoint_port_base": 5557,
                  "topic": "", "block_size": 128, "dp_size": 2, "load_endpoint_port_base": 5559,
                  "load_topic": "load"}})"));
  EXPECT_EQ(endpoints(e), (std::vector<std::string>{"tcp://10.0.0.9:5557", "tcp://10.0.0.9:5558"}));
  EXPECT_EQ(e.publishers[0].replay_endpoint, "tcp://10.0.0.9:5600");
  EXPECT_EQ(e.publishers[1].replay_endpoint, "tcp://10.0.0.9:5601");
  EXPECT_EQ(e.publishers[1].block_size, 128);
  EXPECT_EQ(e.publishers[1].topic, "");
}

TEST(SglangServerInfo, PerRankPublishersFrom38032) {
  // Multi-node DP attention: ranks on two hosts; the PR's example lists 2 of dp_size 8.
  const auto e = ok(kWorker, sglang(R"({
    "kv_events_config": "{\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\",\"replay_endpoint\":\"tcp://*:5600\"}",
    "kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557, "dp_size": 8,
                  "block_size": 64,
                  "publishers": [{"dp_rank": 4, "endpoint": "tcp://10.0.0.2:5561"},
                                 {"dp_rank": 0, "endpoint": "tcp://10.0.0.1:5557"}]}})"));
  EXPECT_EQ(endpoints(e), (std::vector<std::string>{"tcp://10.0.0.1:5557", "tcp://10.0.0.2:5561"}));
  EXPECT_EQ(e.publishers[1].dp_rank, 4);
  EXPECT_EQ(e.publishers[1].origin, "GET /server_info kv_events.publishers[0]");
  // The ports follow base + rank, so replay follows each rank's own host.
  EXPECT_EQ(e.publishers[0].replay_endpoint, "tcp://10.0.0.1:5600");
  EXPECT_EQ(e.publishers[1].replay_endpoint, "tcp://10.0.0.2:5604");
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_TRUE(has(e.notes[0], "lists 2 of dp_size 8 ranks")) << e.notes[0];
}

TEST(SglangServerInfo, ReplayIsLeftOffWhenPortsDoNotFollowTheBase) {
  const auto e = ok(kWorker, sglang(R"({
    "kv_events_config": "{\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\",\"replay_endpoint\":\"tcp://*:5600\"}",
    "kv_events": {"endpoint_host": "*", "endpoint_port_base": 41000, "dp_size": 2,
                  "publishers": [{"dp_rank": 0, "endpoint": "tcp://*:41000"},
                                 {"dp_rank": 1, "endpoint": "tcp://*:39999"}]}})"));
  EXPECT_EQ(endpoints(e),
            (std::vector<std::string>{"tcp://10.0.0.9:41000", "tcp://10.0.0.9:39999"}));
  EXPECT_EQ(e.publishers[0].replay_endpoint, "");
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_TRUE(has(e.notes[0], "replay is off")) << e.notes[0];
}

TEST(SglangServerInfo, Ipv6HostsAreBracketed) {
  const auto e = ok("http://[fd00::1]:30000",
                    sglang(R"({"kv_events": {"endpoint_host": "[::]", "endpoint_port_base": 5557,
                                             "dp_size": 2}})"));
  EXPECT_EQ(endpoints(e),
            (std::vector<std::string>{"tcp://[fd00::1]:5557", "tcp://[fd00::1]:5558"}));
  const auto f = ok(kWorker, sglang(R"({"kv_events": {"endpoint_host": "[fd00::9]",
                                                     "endpoint_port_base": 5557}})"));
  EXPECT_EQ(f.publishers[0].endpoint, "tcp://[fd00::9]:5557");
}

TEST(SglangServerInfo, RawConfigBefore25844) {
  const auto e = ok(kWorker, sglang(R"({"page_size": 16, "dcp_size": 2, "dp_size": 2,
    "kv_events_config": "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:6000\", \"topic\": \"t\", \"replay_endpoint\": \"tcp://*:6100\"}"})"));
  EXPECT_EQ(endpoints(e), (std::vector<std::string>{"tcp://10.0.0.9:6000", "tcp://10.0.0.9:6001"}));
  EXPECT_EQ(e.publishers[1].replay_endpoint, "tcp://10.0.0.9:6101");
  EXPECT_EQ(e.publishers[0].block_size, 32);  // page_size * dcp_size (#35298)
  EXPECT_EQ(e.publishers[0].topic, "t");
  EXPECT_EQ(e.publishers[0].origin, "GET /server_info kv_events_config (port 6000 + rank 0)");
  // A raw config dumped as an object, the page size without DCP, SGLang's default endpoint.
  const auto f =
      ok(kWorker, sglang(R"({"page_size": 16, "kv_events_config": {"publisher": "zmq"}})"));
  EXPECT_EQ(f.publishers[0].endpoint, "tcp://10.0.0.9:5557");
  EXPECT_EQ(f.publishers[0].block_size, 16);
}

TEST(SglangServerInfo, EventsDisabled) {
  for (const char* body : {
           R"({"kv_events": null, "kv_events_config": null})",
           R"({"kv_events": {"publisher": "null", "endpoint_host": "*", "endpoint_port_base": 1}})",
           R"({"kv_events_config": null})", R"({"kv_events_config": ""})",
           R"({"kv_events_config": "{\"endpoint\": \"tcp://*:5557\"}"})",  // publisher "null"
       }) {
    const auto why = fails(kWorker, sglang(body));
    EXPECT_EQ(why.rfind("KV events are disabled on the engine http://10.0.0.9:30000", 0), 0u)
        << body << ": " << why;
  }
  // SGLang says null for an unusable config too; the message says what was asked.
  const auto why = fails(kWorker, sglang(R"({"kv_events": null,
    "kv_events_config": "{\"publisher\": \"zmq\", \"endpoint\": \"ipc:///tmp/kv\"}"})"));
  EXPECT_TRUE(has(why, "although kv_events_config asks for zmq at \"ipc:///tmp/kv\"")) << why;
}

TEST(SglangServerInfo, NotUnderstood) {
  expect_failures(
      kWorker,
      {
          {"[1]", "not a JSON object"},
          {"nope", "not JSON"},
          {R"({"vllm_config": "model=m, dtype=auto", "vllm_env": {}})", "vllm-project/vllm #55844"},
          {R"({"model_path": "m"})", "neither kv_events nor kv_events_config"},
          {R"({"kv_events": 5})", "kv_events is not an object"},
          {R"({"kv_events": {"publisher": "nats"}})", "is not zmq"},
          {R"({"kv_events": {"endpoint_host": "*"}})", "no endpoint_port_base"},
          {R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": "5557"}})",
           "endpoint_port_base is"},
          {R"({"kv_events": {"endpoint_host": 1, "endpoint_port_base": 5557}})",
           "endpoint_host is 1"},
          {R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 65535, "dp_size": 2}})",
           "runs outside 1..65535"},
          {R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557, "dp_size": 0}})",
           "dp_size is not a positive integer"},
          {R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557, "dp_size": 5000}})",
           "dp_size 5000 is over 1024"},
          {R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557, "block_size": -1}})",
           "block_size is -1"},
          {R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557, "topic": []}})",
           "topic is"},
          {R"({"kv_events": {"endpoint_port_base": 5557, "publishers": {"0": "x"}}})",
           "publishers is"},
          {R"({"kv_events": {"endpoint_port_base": 5557, "publishers": [{"dp_rank": 0}]}})",
           "is not {dp_rank, endpoint}"},
          {R"({"kv_events": {"dp_size": 2, "publishers": [{"dp_rank": 2, "endpoint": "tcp://h:1"}]}})",
           "has DP rank 2 but dp_size is 2"},
          {R"({"kv_events": {"publishers": [{"dp_rank": 0, "endpoint": "ipc:///x"}]}})",
           "not a tcp:// endpoint"},
          {R"({"kv_events_config": "{not json"})", "kv_events_config not JSON"},
          {R"({"kv_events_config": "{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:0\"}"})",
           "bind request"},
          {R"({"kv_events_config": "{\"publisher\": \"kafka\"}"})", "is not zmq"},
          {R"({"kv_events_config": "{\"publisher\": 1}"})", "not a string"},
      },
      [](const char* body) { return sglang(body); });
}

TEST(SglangServerInfo, RouteAnswers) {
  engine_answers a = sglang("");
  a.server_info = answer("/server_info", "{}", 404);
  auto why = fails(kWorker, a);
  EXPECT_TRUE(has(why, "has neither /kv_event_sources")) << why;
  EXPECT_TRUE(has(why, "configure the endpoint explicitly")) << why;
  a.server_info = answer("/server_info", "boom", 500);
  why = fails(kWorker, a);
  EXPECT_TRUE(has(why, "GET /server_info: answered HTTP 500: \"boom\"")) << why;
  a.server_info = http_answer{"/server_info", 0, "", "Read timeout"};
  why = fails(kWorker, a);
  EXPECT_TRUE(has(why, "no answer: Read timeout")) << why;
  // The older route name answered instead.
  a.server_info = answer("/get_server_info",
                         R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557}})");
  EXPECT_EQ(ok(kWorker, a).publishers[0].origin,
            "GET /get_server_info kv_events (port 5557 + rank 0)");
}

// -- /v1/models --------------------------------------------------------------------------------

engine_answers with_models(engine_answers a, std::string body, int status = 200) {
  a.models = answer("/v1/models", std::move(body), status);
  return a;
}

const char* kOneRank = R"({"0": {"endpoint": "tcp://*:5557"}})";

TEST(Models, FirstServedModelSkippingAdapters) {
  const auto e = ok(kUrl, with_models(vllm(kOneRank), R"({"object": "list", "data": [
    {"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm", "root": "/models/q",
     "parent": null, "max_model_len": 32768},
    {"id": "qwen", "object": "model", "owned_by": "vllm", "root": "/models/q"},
    {"id": "sql-lora", "object": "model", "owned_by": "vllm", "parent": "Qwen/Qwen3-8B"},
    {"id": "qwen", "object": "model"}]})"));
  EXPECT_EQ(e.model_id, "Qwen/Qwen3-8B");
  EXPECT_EQ(e.model_ids, (std::vector<std::string>{"Qwen/Qwen3-8B", "qwen"}));
  const auto s =
      ok(kWorker, with_models(sglang(R"({"kv_events": {"endpoint_host": "*",
    "endpoint_port_base": 5557}})"),
                              R"({"object":"list","data":[{"id":"m","owned_by":"sglang"}]})"));
  EXPECT_EQ(s.model_id, "m");
}

TEST(Models, Failures) {
  struct status_case {
    const char* body;
    int status;
    const char* why;
  };
  for (const auto& c : std::vector<status_case>{
           {R"({"error": "Unauthorized"})", 401, "wants an API key"},
           {"", 403, "wants an API key"},
           {"down", 502, "answered HTTP 502: \"down\""},
           {"[]", 200, "not an OpenAI model list"},
           {R"({"data": {}})", 200, "not an OpenAI model list"},
           {R"({"data": []})", 200, "lists no served model"},
           {R"({"data": [{"id": "a", "parent": "b"}]})", 200, "lists no served model"},
           {R"({"data": [{"name": "a"}]})", 200, "data[0] has no model id"},
           {R"({"data": [{"id": ""}]})", 200, "data[0] has no model id"},
           {R"({"data": ["a"]})", 200, "data[0] has no model id"},
           {"<html>", 200, "not JSON"},
       }) {
    const auto why = fails(kUrl, with_models(vllm(kOneRank), c.body, c.status));
    EXPECT_TRUE(has(why, c.why)) << c.body << ": " << why;
    EXPECT_TRUE(has(why, "GET /v1/models")) << why;
  }
}

// -- quoting (ED11) -------------------------------------------------------------------------

TEST(Quote, BoundedAndEscaped) {
  EXPECT_EQ(quote(""), "(empty body)");
  EXPECT_EQ(quote(R"({"a": "b"})"), R"("{\"a\": \"b\"}")");
  EXPECT_EQ(quote(std::string("a\nb\x01\xff", 5)), R"("a\x0ab\x01\xff")");
  EXPECT_EQ(quote("abcdef", 3), "\"abc\"... (6 bytes)");
}

// Whatever arrives, the parser answers (no throw, no crash): every field of every shape set to
// every JSON kind.
TEST(Robustness, EveryFieldEveryKind) {
  const std::vector<std::string> kinds = {"null",
                                          "true",
                                          "0",
                                          "-1",
                                          "1.5",
                                          "\"\"",
                                          "\"x\"",
                                          "[]",
                                          "{}",
                                          "[[]]",
                                          "18446744073709551615"};
  const std::vector<std::string> vllm_templates = {
      R"({"0": {"endpoint": "tcp://*:1", "F": V}})", R"([{"F": V, "endpoint": "tcp://*:1"}])",
      R"({"sources": [{"F": V}]})",
      R"({"0": {"endpoint_addr": {"F": V, "host": "h", "port": 1}}})"};
  const std::vector<std::string> fields = {"endpoint",
                                           "replay_endpoint",
                                           "topic",
                                           "publisher",
                                           "transport",
                                           "enable_kv_cache_events",
                                           "data_parallel_rank",
                                           "dp_rank",
                                           "endpoint_addr",
                                           "host",
                                           "port",
                                           "protocol",
                                           "sources",
                                           "0"};
  const std::vector<std::string> sglang_templates = {
      R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557, "F": V}})",
      R"({"dp_size": V, "page_size": V, "kv_events_config": {"F": V}})",
      R"({"kv_events": {"publishers": [{"F": V, "dp_rank": 0}]}, "F": V})"};
  const std::vector<std::string> sglang_fields = {
      "endpoint_host", "endpoint_port_base", "topic",    "block_size",      "dp_size",
      "publishers",    "publisher",          "endpoint", "replay_endpoint", "dp_rank",
      "kv_events",     "kv_events_config"};
  auto fill = [](std::string t, const std::string& f, const std::string& v) {
    for (std::size_t at; (at = t.find('F')) != std::string::npos;) t.replace(at, 1, f);
    for (std::size_t at; (at = t.find('V')) != std::string::npos;) t.replace(at, 1, v);
    return t;
  };
  // The parser's catch-all says "answer not understood"; reaching it would be a missed check.
  auto clean = [](const outcome<discovered_engine>& r) {
    return r.ok() || r.error().context.find(": answer not understood: ") == std::string::npos;
  };
  int answered = 0;
  for (const auto& k : kinds) {
    for (const auto& f : fields) {
      for (const auto& t : vllm_templates) {
        EXPECT_TRUE(clean(discover(kUrl, vllm(fill(t, f, k))))) << fill(t, f, k);
        const std::string models = fill(R"({"data": [{"F": V}]})", f, k);
        EXPECT_TRUE(clean(discover(kUrl, with_models(vllm(kOneRank), models)))) << models;
        ++answered;
      }
    }
    for (const auto& f : sglang_fields) {
      for (const auto& t : sglang_templates) {
        EXPECT_TRUE(clean(discover(kWorker, sglang(fill(t, f, k))))) << fill(t, f, k);
        ++answered;
      }
    }
  }
  EXPECT_GT(answered, 500);
}

}  // namespace
}  // namespace kvrelay::discovery
