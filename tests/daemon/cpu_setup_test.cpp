// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// [cpu] scheduling on the calling thread (daemon/cpu_setup.hpp). Each case runs on a thread of
// its own, which it leaves with the policy it was given: the test process keeps its own.
#include "daemon/cpu_setup.hpp"

#include <gtest/gtest.h>

#include <sched.h>

#include <functional>
#include <string>
#include <thread>

namespace kvrelay {
namespace {

struct outcome {
  int policy_after = -1;  // sched_getscheduler, flags included
  log::record said;
};

// Gives a fresh thread `start` (a policy, flags included), applies `want` there and reports.
outcome run_on_thread(int start, config::cpu_scheduling want) {
  outcome out;
  std::thread t([&] {
    sched_param p{};
    if (sched_setscheduler(0, start, &p) != 0) return;
    out.said = apply_cpu_scheduling(want);
    out.policy_after = sched_getscheduler(0);
  });
  t.join();
  return out;
}

std::string field(const log::record& r, std::string_view key) {
  const std::string* v = r.find(key);
  return v ? *v : "(none)";
}

TEST(CpuScheduling, BatchReplacesTheNormalPolicy) {
  const auto o = run_on_thread(SCHED_OTHER, config::cpu_scheduling::batch);
  EXPECT_EQ(o.policy_after, SCHED_BATCH);
  EXPECT_EQ(o.said.severity, log::level::info);
  EXPECT_EQ(field(o.said, "policy"), "batch");
  EXPECT_EQ(field(o.said, "why"), "set");
  EXPECT_EQ(field(o.said, "setting"), "batch");
}

TEST(CpuScheduling, InheritLeavesTheNormalPolicy) {
  const auto o = run_on_thread(SCHED_OTHER, config::cpu_scheduling::inherit);
  EXPECT_EQ(o.policy_after, SCHED_OTHER);
  EXPECT_EQ(field(o.said, "policy"), "normal");
  EXPECT_EQ(field(o.said, "why"), "as started");
}

TEST(CpuScheduling, APolicyChosenAtStartIsKept) {
  for (const int start : {SCHED_IDLE, SCHED_BATCH}) {
    SCOPED_TRACE(scheduling_policy_name(start));
    const auto o = run_on_thread(start, config::cpu_scheduling::batch);
    EXPECT_EQ(o.policy_after, start);
    EXPECT_EQ(field(o.said, "policy"), scheduling_policy_name(start));
    EXPECT_NE(field(o.said, "why").find("kept"), std::string::npos) << field(o.said, "why");
  }
}

// Reset-on-fork is the starter's choice as well; clearing it would also need CAP_SYS_NICE,
// which an unprivileged sidecar lacks (the call would be refused).
TEST(CpuScheduling, BatchKeepsResetOnFork) {
  const auto o = run_on_thread(SCHED_OTHER | SCHED_RESET_ON_FORK, config::cpu_scheduling::batch);
  EXPECT_EQ(o.policy_after, SCHED_BATCH | SCHED_RESET_ON_FORK);
  EXPECT_EQ(field(o.said, "policy"), "batch");
}

TEST(CpuScheduling, PolicyNames) {
  EXPECT_STREQ(scheduling_policy_name(SCHED_OTHER), "normal");
  EXPECT_STREQ(scheduling_policy_name(SCHED_BATCH | SCHED_RESET_ON_FORK), "batch");
  EXPECT_STREQ(scheduling_policy_name(SCHED_IDLE), "idle");
  EXPECT_STREQ(scheduling_policy_name(SCHED_FIFO), "fifo");
  EXPECT_STREQ(scheduling_policy_name(SCHED_RR), "rr");
  EXPECT_STREQ(scheduling_policy_name(42), "unknown");
}

}  // namespace
}  // namespace kvrelay
