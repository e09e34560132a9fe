// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Where typed status becomes what an operator reads (admin/status_render.hpp): the adapters of
// /debug/engines and /readyz's lines about policy-server targets, from hand-made status trees.
#include "admin/status_render.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvrelay {
namespace {

// A pipeline whose decoder holds one shard with these partitions, and this LoRA id map.
pipeline_view pipeline(const std::string& name, actor_status::string_map resident,
                       actor_status::string_map ids, bool ready = true) {
  pipeline_view p;
  p.name = p.replica_id = name;
  p.status = actor_status("pipeline", 0);
  p.status.add("ready", ready);
  p.status.add("adapters", std::move(ids));
  actor_status dec("decoder", 0);
  dec.name = "decoder";
  actor_status shard("shard", 0);
  shard.name = "shard";
  shard.add("resident_by_adapter", std::move(resident));
  dec.children.push_back(std::move(shard));
  p.status.children.push_back(std::move(dec));
  return p;
}

actor_status target(const std::string& address, bool up, const std::string& error = "") {
  actor_status t("target", 0);
  t.name = "target[" + address + "]";
  t.add("target", address);
  t.add("up", up);
  t.add("last_error", error);
  return t;
}

void with_targets(pipeline_view& p, std::vector<actor_status> targets) {
  actor_status deb("debouncer", 0);
  deb.name = "debouncer";
  deb.children = std::move(targets);
  p.status.children.push_back(std::move(deb));
}

TEST(RenderEngines, AdaptersAreThePartitionsTheIndexHoldsAndTheIdMap) {
  // lora-0 came from the events' lora_name; sql-lora is mapped from id 1 and holds nothing yet.
  const auto doc = nlohmann::json::parse(render_engines(
      {pipeline("vllm-0", {{"", "294"}, {"lora-0", "196"}}, {{"1", "sql-lora"}})}));
  ASSERT_EQ(doc.size(), 1u);
  const auto& a = doc[0]["adapters"];
  EXPECT_EQ(a.size(), 3u) << a;
  EXPECT_EQ(a[""]["resident_blocks"], 294);
  EXPECT_TRUE(a[""]["lora_id"].is_null());
  EXPECT_EQ(a["lora-0"]["resident_blocks"], 196);
  EXPECT_EQ(a["sql-lora"]["resident_blocks"], 0);
  EXPECT_EQ(a["sql-lora"]["lora_id"], 1);
  EXPECT_EQ(doc[0]["adapter_ids"], nlohmann::json({{"1", "sql-lora"}}));
}

TEST(RenderEngines, NothingResidentAndNoMapIsAnEmptyObject) {
  const auto doc = nlohmann::json::parse(render_engines({pipeline("vllm-0", {}, {})}));
  EXPECT_TRUE(doc[0]["adapters"].is_object());
  EXPECT_TRUE(doc[0]["adapters"].empty());
}

TEST(TargetReadiness, OneOfTwoDownIsADegradedLineWhileReady) {
  auto p = pipeline("vllm-0", {}, {});
  with_targets(p, {target("a:9090", true), target("b:9090", false, "UNAVAILABLE: connection refused")});
  EXPECT_EQ(target_readiness_lines({p}),
            std::vector<std::string>{"degraded (still ready): vllm-0: policy target b:9090 is down "
                                     "(1 of 2 up): UNAVAILABLE: connection refused"});
}

TEST(TargetReadiness, NotReadyLinesHaveNoDegradedPrefixAndEveryDownTargetIsNamed) {
  auto p = pipeline("vllm-0", {}, {}, /*ready=*/false);
  with_targets(p, {target("a:9090", false), target("b:9090", false), target("c:9090", true)});
  EXPECT_EQ(target_readiness_lines({p}),
            (std::vector<std::string>{"vllm-0: policy target a:9090 is down (1 of 3 up)",
                                      "vllm-0: policy target b:9090 is down (1 of 3 up)"}));
}

TEST(TargetReadiness, AllUpOrASingleTargetSaysNothing) {
  auto both = pipeline("vllm-0", {}, {});
  with_targets(both, {target("a:9090", true), target("b:9090", true)});
  auto one = pipeline("vllm-1", {}, {}, /*ready=*/false);
  with_targets(one, {target("a:9090", false)});  // readiness's own reason says it
  EXPECT_TRUE(target_readiness_lines({both, one}).empty());
}

}  // namespace
}  // namespace kvrelay
