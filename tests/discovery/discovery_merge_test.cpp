// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Explicit settings versus discovered ones (actors/discovery/discovery_merge.hpp, rules DM1-DM7).
// Pure: the discovered engines are built from parsed answers, as the daemon gets them.
#include "actors/discovery/discovery_merge.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tests/discovery/discovery_test_util.hpp"

namespace kvrelay::discovery {
namespace {

constexpr const char* kTwoRanks = R"({
  "0": {"publisher": "zmq", "endpoint": "tcp://10.0.0.5:41233",
        "replay_endpoint": "tcp://10.0.0.5:41234", "topic": "kv-events"},
  "1": {"publisher": "zmq", "endpoint": "tcp://10.0.0.5:41235", "replay_endpoint": null,
        "topic": "kv-events"}})";

discovered_engine two_ranks() {
  auto a = vllm(kTwoRanks);
  a.models = answer("/v1/models", R"({"data": [{"id": "llama"}, {"id": "llama-alias"},
                                              {"id": "sql-lora", "parent": "llama"}]})");
  return ok(kUrl, a);
}

engine_request request() {
  engine_request r;
  r.url = kUrl;
  r.replica_id = "vllm-0";
  return r;
}

discovered_target merged(const engine_request& r, const discovered_engine& d) {
  auto t = merge(r, d);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().render());
  return t.ok() ? t.value() : discovered_target{};
}

bool any_conflict(const discovered_target& t, const std::string& part) {
  for (const auto& c : t.conflicts)
    if (has(c, part)) return true;
  return false;
}

TEST(DiscoveryMerge, NothingGivenTakesEverythingFromTheEngineWithOrigins) {
  const auto t = merged(request(), two_ranks());
  EXPECT_EQ(t.url, kUrl);
  EXPECT_EQ(t.dialect, "vllm");
  EXPECT_TRUE(t.conflicts.empty());
  ASSERT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.ranks[0].replica_id, "vllm-0-dp0");
  EXPECT_EQ(t.ranks[1].replica_id, "vllm-0-dp1");
  EXPECT_EQ(t.ranks[0].endpoint.value, "tcp://10.0.0.5:41233");
  EXPECT_EQ(t.ranks[0].endpoint.origin, "discovered: GET /kv_event_sources [\"0\"]");
  EXPECT_EQ(t.ranks[1].endpoint.origin, "discovered: GET /kv_event_sources [\"1\"]");
  EXPECT_EQ(t.ranks[0].replay_endpoint.value, "tcp://10.0.0.5:41234");
  EXPECT_EQ(t.ranks[1].replay_endpoint.value, "");
  EXPECT_EQ(t.ranks[1].replay_endpoint.origin,
            "default (the engine advertises no replay endpoint)");
  EXPECT_EQ(t.ranks[1].topic.value, "kv-events");
  EXPECT_EQ(t.model_id.value, "llama");
  EXPECT_EQ(t.model_id.origin, "discovered: GET /v1/models");
  EXPECT_EQ(t.hash_scheme.value, "vllm");
  EXPECT_TRUE(has(t.hash_scheme.origin, "discovered: GET /kv_event_sources answered (vLLM)"));
  EXPECT_EQ(t.metrics_url.value, std::string(kUrl) + "/metrics");
  EXPECT_EQ(t.dp_size.value, "2");
  EXPECT_TRUE(has(t.dp_size.origin, "discovered: 2 publisher(s)"));
}

TEST(DiscoveryMerge, OneRankReportsAsTheReplicaAndMergedRanksToo) {
  auto d = ok(kUrl, vllm(R"({"0": {"publisher": "zmq", "endpoint": "tcp://10.0.0.5:41233"}})"));
  auto r = request();
  r.model_id = given{"m", "--model-id"};
  EXPECT_EQ(merged(r, d).ranks.at(0).replica_id, "vllm-0");
  r.separate_ranks = false;
  const auto t = merged(r, two_ranks());
  EXPECT_EQ(t.ranks.at(0).replica_id, "vllm-0");
  EXPECT_EQ(t.ranks.at(1).replica_id, "vllm-0");
}

TEST(DiscoveryMerge, ExplicitValuesWinAndEachDisagreementIsAConflict) {
  auto r = request();
  r.topic = given{"other", "--topic"};
  r.model_id = given{"my-model", "kvrelay.toml:3:1"};
  r.hash_scheme = given{"sglang", "--hash-scheme"};
  r.metrics_url = given{"http://10.0.0.5:9000/metrics", "--engine-metrics-url"};
  const auto t = merged(r, two_ranks());
  EXPECT_EQ(t.ranks.at(0).topic.value, "other");
  EXPECT_EQ(t.ranks.at(0).topic.origin, "flag/config (--topic)");
  EXPECT_EQ(t.model_id.value, "my-model");
  EXPECT_EQ(t.model_id.origin, "flag/config (kvrelay.toml:3:1)");
  EXPECT_EQ(t.hash_scheme.value, "sglang");
  EXPECT_EQ(t.metrics_url.value, "http://10.0.0.5:9000/metrics");
  EXPECT_TRUE(any_conflict(t, "rank 0 topic \"other\" (flag/config (--topic)) differs from the "
                              "engine's \"kv-events\" (discovered: GET /kv_event_sources "
                              "[\"0\"])"));
  EXPECT_TRUE(any_conflict(t, "rank 1 topic"));
  EXPECT_TRUE(any_conflict(t, "model_id \"my-model\""));
  EXPECT_TRUE(any_conflict(t, "hash_scheme \"sglang\""));
  EXPECT_TRUE(any_conflict(t, "metrics_url"));
  for (const auto& c : t.conflicts) {
    EXPECT_TRUE(has(c, "engine http://10.0.0.5:8000: ")) << c;
    EXPECT_TRUE(has(c, "the explicit value wins")) << c;
  }
  // Endpoints were not given: taken from the engine without a word.
  EXPECT_EQ(t.ranks.at(1).endpoint.value, "tcp://10.0.0.5:41235");
}

TEST(DiscoveryMerge, AgreeingExplicitValuesAliasesAndOffSwitchesAreNoConflict) {
  auto r = request();
  r.topic = given{"kv-events", "--topic"};
  r.model_id = given{"llama-alias", "--model-id"};  // a served name, not the first
  r.hash_scheme = given{"vllm", ""};
  r.metrics_url = given{"", "--engine-metrics-url"};  // scraping off
  r.replay_endpoint = given{"", "--replay-endpoint"};  // replay off
  const auto t = merged(r, two_ranks());
  EXPECT_TRUE(t.conflicts.empty()) << t.conflicts.front();
  EXPECT_EQ(t.model_id.value, "llama-alias");
  EXPECT_EQ(t.hash_scheme.origin, "flag/config");
  EXPECT_EQ(t.metrics_url.value, "");
  EXPECT_EQ(t.ranks.at(0).replay_endpoint.value, "");
  EXPECT_EQ(t.ranks.at(0).replay_endpoint.origin, "flag/config (--replay-endpoint)");
}

TEST(DiscoveryMerge, AnExplicitEndpointIsRankZerosAndDerivesTheOthers) {
  auto r = request();
  r.endpoint = given{"tcp://10.0.0.9:5557", "--endpoint"};
  r.rank_endpoint = [](const std::string& base, int64_t rank) -> std::optional<std::string> {
    const auto colon = base.rfind(':');
    return base.substr(0, colon + 1) + std::to_string(std::stoi(base.substr(colon + 1)) + rank);
  };
  const auto t = merged(r, two_ranks());
  ASSERT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.ranks[0].endpoint.value, "tcp://10.0.0.9:5557");
  EXPECT_EQ(t.ranks[1].endpoint.value, "tcp://10.0.0.9:5558");
  EXPECT_EQ(t.ranks[1].endpoint.origin, "flag/config (--endpoint)");
  EXPECT_TRUE(any_conflict(t, "rank 1 endpoint \"tcp://10.0.0.9:5558\""));
  // Without the arithmetic only rank 0 can be given explicitly.
  r.rank_endpoint = nullptr;
  const auto only0 = merged(r, two_ranks());
  ASSERT_EQ(only0.ranks.size(), 1u);
  EXPECT_TRUE(any_conflict(only0, "rank 1 left out: its endpoint cannot be derived"));
}

TEST(DiscoveryMerge, AnExplicitDpSizeBoundsTheRanks) {
  auto r = request();
  r.dp_size = given{"1", "--dp-size"};
  auto t = merged(r, two_ranks());
  ASSERT_EQ(t.ranks.size(), 1u);
  EXPECT_EQ(t.ranks[0].replica_id, "vllm-0") << "one rank: the replica itself";
  EXPECT_TRUE(any_conflict(t, "rank 1 left out: beyond the configured dp_size 1"));
  EXPECT_TRUE(any_conflict(t, "dp_size \"1\""));
  // More ranks than the engine advertises: those without an endpoint are left out.
  r.dp_size = given{"3", "--dp-size"};
  t = merged(r, two_ranks());
  EXPECT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.dp_size.value, "3");
  EXPECT_TRUE(any_conflict(t, "rank 2 left out: the engine does not advertise it"));
  r.dp_size = given{"zero", "--dp-size"};
  auto bad = merge(r, two_ranks());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ec::discovery_failed);
}

TEST(DiscoveryMerge, SglangRanksKeepTheirNumbersAndBlockSize) {
  const auto d = ok(kUrl, sglang(R"({"served_model_name": "qwen", "kv_events": {
      "publisher": "zmq", "endpoint_host": "*", "endpoint_port_base": 5557, "topic": "kv",
      "block_size": 64, "dp_size": 8,
      "publishers": [{"dp_rank": 0, "endpoint": "tcp://10.0.0.5:5557"},
                     {"dp_rank": 4, "endpoint": "tcp://10.0.0.6:5561"}]}})"));
  auto r = request();
  r.model_id = given{"qwen", ""};
  const auto t = merged(r, d);
  EXPECT_EQ(t.dialect, "sglang");
  EXPECT_EQ(t.hash_scheme.value, "sglang");
  ASSERT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.ranks[1].dp_rank, 4);
  EXPECT_EQ(t.ranks[1].replica_id, "vllm-0-dp4");
  EXPECT_EQ(t.ranks[1].block_size, 64);
  EXPECT_TRUE(has(t.hash_scheme.origin, "GET /server_info answered (SGLang)"));
}

TEST(DiscoveryMerge, NoModelAnywhereFails) {
  const auto d = ok(kUrl, vllm(R"([{"endpoint": "tcp://10.0.0.5:41233"}])"));  // no /v1/models
  auto r = merge(request(), d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ec::discovery_failed);
  EXPECT_TRUE(has(r.error().context, "engine http://10.0.0.5:8000: no model id"));
}

TEST(DiscoveryMerge, SamePipelinesIgnoresOriginsOnly) {
  const auto a = merged(request(), two_ranks());
  auto b = a;
  b.ranks[0].endpoint.origin = "discovered: elsewhere";
  b.conflicts.push_back("x");
  EXPECT_TRUE(a.same_pipelines(b));
  b.ranks[1].endpoint.value = "tcp://10.0.0.5:1";
  EXPECT_FALSE(a.same_pipelines(b));
  b = a;
  b.ranks.pop_back();
  EXPECT_FALSE(a.same_pipelines(b));
}

}  // namespace
}  // namespace kvrelay::discovery
