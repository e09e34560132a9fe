// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// When a snapshot is used, written, and how often (durable/format/snapshot_policy.hpp RD1-RD8).

#include "durable/format/snapshot_policy.hpp"

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
  // The tolerance is strict: a difference of exactly 5 ms is another process (0.0 and 0.005
  // differ by exactly the double 0.005).
  EXPECT_FALSE(decide(taken(started(0.0)), me(), started(0.005)).use());
}

// The detail says what each side showed: a start time, a lifetime id, both, or none.
TEST(SnapshotPolicy, TheDetailShowsBothSidesEvidence) {  // RD2-RD4
  evidence id = started(100.0);
  id.lifetime_id = "aaa";
  evidence other = started(160.5);
  other.lifetime_id = "bbb";
  EXPECT_EQ(decide(taken(id), me(), other).detail,
            "snapshot: process start 100.000000, lifetime id aaa; engine now: process start "
            "160.500000, lifetime id bbb");
  evidence only_id;
  only_id.lifetime_id = "aaa";
  evidence only_other_id;
  only_other_id.lifetime_id = "ccc";
  EXPECT_EQ(decide(taken(only_id), me(), only_other_id).detail,
            "snapshot: lifetime id aaa; engine now: lifetime id ccc");
  EXPECT_EQ(decide(taken(started(1.0)), me(), evidence{}).detail,
            "snapshot: process start 1.000000; engine now: none");
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
    // The detail names the first field that differs, with both values.
    static const char* const want[] = {
        "written for replica_id \"vllm-1\", this pipeline's \"vllm-0\"",
        "written for model_id \"mistral\", this pipeline's \"llama\"",
        "written for tenant_id \"t2\", this pipeline's \"t1\"",
        "written for hash_scheme \"sglang\", this pipeline's \"vllm\"",
        "written for endpoint \"tcp://10.0.0.2:5557\", this pipeline's \"tcp://10.0.0.1:5557\"",
        "written for topic \"\", this pipeline's \"kv\"",
        "written for dp_rank 1, this pipeline's 0"};
    EXPECT_EQ(v.detail, want[field]);
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
  EXPECT_EQ(interval(100, 1.0), milliseconds(25000)) << "one batch a second is a known rate";
}

// Not positive is no rate, sign included: a negative zero (zero times a negative delta) is not
// an infinite span below the bound.
TEST(SnapshotPolicy, ANegativeZeroRateIsNoRate) {  // RD8
  EXPECT_EQ(interval(100, -0.0), milliseconds(60000));
  EXPECT_EQ(interval(100, -5.0), milliseconds(60000));
}

}  // namespace
}  // namespace kvrelay::snapshot
