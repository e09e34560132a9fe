// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// When a snapshot is used, written, and how often (base/snapshot_policy.hpp RD1-RD8).

#include "base/snapshot_policy.hpp"

#include <gtest/gtest.h>

namespace kvrelay::snapshot {
namespace {

using std::chrono::milliseconds;

identity me() { return identity{"vllm-0", "llama", "t1", "vllm", "tcp://10.0.0.1:5557", "kv", 0}; }

evidence started(double t) {
  evidence e;
  e.start_time = t;
  return e;
}

pipeline_snapshot taken(evidence e) {
  pipeline_snapshot s;
  s.who = me();
  s.engine = std::move(e);
  return s;
}

TEST(SnapshotPolicy, TheSameProcessIsProvedByItsStartTime) {  // RD3
  const auto v = decide(taken(started(1767225600.25)), me(), started(1767225600.25));
  EXPECT_TRUE(v.use()) << v.detail;
  EXPECT_TRUE(decide(taken(started(100.001)), me(), started(100.003)).use()) << "same 10 ms tick";
}

TEST(SnapshotPolicy, AnotherStartTimeIsAnotherProcess) {  // RD3
  const auto v = decide(taken(started(100.0)), me(), started(160.5));
  ASSERT_FALSE(v.use());
  EXPECT_EQ(*v.discard, discard_reason::engine_restarted);
  EXPECT_NE(v.detail.find("160.5"), std::string::npos) << v.detail;
  EXPECT_FALSE(decide(taken(started(100.0)), me(), started(100.02)).use()) << "two ticks apart";
}

TEST(SnapshotPolicy, LifetimeIdsDecideAloneWhenBothHaveOne) {  // RD2
  evidence a = started(100.0), b = started(100.0);
  a.lifetime_id = "aaa";
  b.lifetime_id = "bbb";
  EXPECT_EQ(*decide(taken(a), me(), b).discard, discard_reason::engine_restarted)
      << "the same start time does not outvote another lifetime id";
  b.lifetime_id = "aaa";
  b.start_time = 999.0;
  EXPECT_TRUE(decide(taken(a), me(), b).use()) << "an equal lifetime id decides";
  b.lifetime_id.clear();
  EXPECT_EQ(*decide(taken(a), me(), b).discard, discard_reason::engine_restarted)
      << "one side without an id: the start times decide";
}

TEST(SnapshotPolicy, NoProofIsNoUse) {  // RD4
  EXPECT_EQ(*decide(taken(evidence{}), me(), started(1.0)).discard, discard_reason::no_evidence);
  EXPECT_EQ(*decide(taken(started(1.0)), me(), evidence{}).discard, discard_reason::proof_missing);
  evidence id_only;
  id_only.lifetime_id = "x";
  EXPECT_EQ(*decide(taken(id_only), me(), started(1.0)).discard, discard_reason::proof_missing);
}

TEST(SnapshotPolicy, AnotherPipelinesSnapshotIsNeverUsed) {  // RD1
  for (int field = 0; field < 7; ++field) {
    identity other = me();
    switch (field) {
      case 0: other.replica_id = "vllm-1"; break;
      case 1: other.model_id = "mistral"; break;
      case 2: other.tenant_id = "t2"; break;
      case 3: other.hash_scheme = "sglang"; break;
      case 4: other.endpoint = "tcp://10.0.0.2:5557"; break;
      case 5: other.topic = ""; break;
      case 6: other.dp_rank = 1; break;
    }
    auto s = taken(started(1.0));
    s.who = other;
    const auto v = decide(s, me(), started(1.0));
    ASSERT_FALSE(v.use()) << field;
    EXPECT_EQ(*v.discard, discard_reason::other_pipeline);
    EXPECT_FALSE(v.detail.empty());
  }
}

TEST(SnapshotPolicy, FormatFaultsMapToTheirReasons) {  // RD5
  EXPECT_EQ(from_fault(fault::truncated), discard_reason::truncated);
  EXPECT_EQ(from_fault(fault::corrupt), discard_reason::corrupt);
  EXPECT_EQ(from_fault(fault::other_version), discard_reason::other_version);
  EXPECT_EQ(from_fault(fault::not_a_snapshot), discard_reason::not_a_snapshot);
  for (auto r : {discard_reason::unreadable, discard_reason::ring_moved_on,
                 discard_reason::proof_missing}) {
    EXPECT_STRNE(to_string(r), "unknown");
    EXPECT_GT(std::string(describe(r)).size(), 10u);
  }
}

TEST(SnapshotPolicy, WrittenOnlyWhenTheEngineIsTheSameAfterTheCut) {  // RD7
  EXPECT_TRUE(may_write(started(5.0), started(5.0)));
  EXPECT_FALSE(may_write(started(5.0), started(9.0))) << "restarted between";
  EXPECT_FALSE(may_write(started(5.0), evidence{})) << "cannot tell now";
  EXPECT_FALSE(may_write(evidence{}, started(5.0))) << "no evidence for the incarnation";
}

TEST(SnapshotPolicy, IntervalIsAQuarterOfTheRingsSpan) {  // RD8
  EXPECT_EQ(interval(10000, 200.0), milliseconds(12500)) << "ring covers 50 s at 200/s";
  EXPECT_EQ(interval(10000, 10.0), milliseconds(60000)) << "at most 60 s";
  EXPECT_EQ(interval(1000, 5000.0), milliseconds(1000)) << "at least 1 s";
  EXPECT_EQ(interval(10000, 0.0), milliseconds(60000)) << "no rate known";
  EXPECT_EQ(interval(0, 100.0), milliseconds(60000));
}

}  // namespace
}  // namespace kvrelay::snapshot
