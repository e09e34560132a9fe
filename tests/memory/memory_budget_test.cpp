// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The memory budget's rules (base/memory_budget.hpp), tested directly.
#include "base/memory_budget.hpp"

#include <gtest/gtest.h>


#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

namespace kvrelay {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

// -- tickets ----------------------------------------------------------------------------------

TEST(BudgetTicket, ChargesItsQueueUntilDestroyed) {
  auto b = memory_budget::make(96 * MiB, budget_source::config);
  EXPECT_EQ(b->limit_bytes(), 16 * MiB);  // MD1: a sixth
  EXPECT_EQ(b->limit_messages(), 16u * 1024);  // MD1: one per KiB of it
  EXPECT_EQ(b->total_bytes(), 96 * MiB);
  EXPECT_EQ(b->source(), budget_source::config);
  {
    auto t = b->charge(budget_queue::shard, 1000);
    EXPECT_EQ(t.bytes(), 1000 + memory_budget::message_overhead);
    EXPECT_EQ(b->bytes(budget_queue::shard), t.bytes());
    EXPECT_EQ(b->messages(budget_queue::shard), 1u);
    EXPECT_EQ(b->bytes(budget_queue::ingress), 0u);
    EXPECT_EQ(b->used_messages(), 1u);
  }
  EXPECT_EQ(b->used_bytes(), 0u);
  EXPECT_EQ(b->used_messages(), 0u);
}

TEST(BudgetTicket, MovesWithoutReleasingAndReleasesOnce) {
  auto b = memory_budget::make(64 * MiB, budget_source::config);
  budget_ticket outer;
  EXPECT_TRUE(outer.empty());
  {
    auto t = b->charge(budget_queue::debouncer, 10);
    outer = std::move(t);
    EXPECT_TRUE(t.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(t.bytes(), 0u);  // NOLINT(bugprone-use-after-move): and holds no bytes
    EXPECT_EQ(outer.bytes(), 10 + memory_budget::message_overhead);
    EXPECT_EQ(b->messages(budget_queue::debouncer), 1u);
  }
  EXPECT_EQ(b->messages(budget_queue::debouncer), 1u);  // the moved-from one released nothing
  outer.release();
  EXPECT_EQ(outer.bytes(), 0u);
  EXPECT_TRUE(outer.empty());
  outer.release();
  EXPECT_EQ(b->used_bytes(), 0u);
  EXPECT_EQ(b->used_messages(), 0u);
  // A ticket assigned over releases what it held.
  auto a = b->charge(budget_queue::ingress, 1);
  a = b->charge(budget_queue::ingress, 2);
  EXPECT_EQ(b->messages(budget_queue::ingress), 1u);
  EXPECT_EQ(b->bytes(budget_queue::ingress), 2 + memory_budget::message_overhead);
}

TEST(BudgetTicket, ACopyIsUnchargedAndCopyingOverReleases) {
  auto b = memory_budget::make(64 * MiB, budget_source::config);
  auto t = b->charge(budget_queue::shard, 100);
  budget_ticket copy(t);  // NOLINT(performance-unnecessary-copy-initialization): the point
  EXPECT_TRUE(copy.empty());
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(b->messages(budget_queue::shard), 1u);
  t = copy;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(b->used_messages(), 0u);
  EXPECT_EQ(b->used_bytes(), 0u);
}

TEST(BudgetTicket, OutlivesTheLastOtherOwnerOfItsBudget) {
  budget_ticket t;
  {
    auto b = memory_budget::make(64 * MiB, budget_source::config);
    t = b->charge(budget_queue::shard, 5);
  }
  t.release();  // the ticket kept the budget alive
  EXPECT_TRUE(t.empty());
}

TEST(MemoryBudget, OverloadAccountingAcrossReaders) {
  auto b = memory_budget::make(64 * MiB, budget_source::config);
  b->note_pause();
  b->note_pause();
  EXPECT_EQ(b->paused_readers(), 2u);
  EXPECT_EQ(b->overloads(), 2u);
  b->note_resume(1'000);
  b->note_resume(2'000);
  EXPECT_EQ(b->paused_readers(), 0u);
  EXPECT_EQ(b->paused_ns(), 3'000u);
}

// -- the gate ---------------------------------------------------------------------------------

TEST(BudgetGate, MG1_ReadsBelowTheLimits) {
  budget_gate g;
  const auto d = g.observe(99, 9, 100, 10, 0);
  EXPECT_TRUE(d.read);
  EXPECT_FALSE(d.paused || d.resumed || d.trim);
  EXPECT_EQ(g.overloads(), 0u);
}

TEST(BudgetGate, MG2_PausesAtEitherLimitAndCountsOneOverload) {
  budget_gate bytes_gate, messages_gate;
  auto d = bytes_gate.observe(100, 0, 100, 10, 5);
  EXPECT_FALSE(d.read);
  EXPECT_TRUE(d.paused);
  d = messages_gate.observe(0, 10, 100, 10, 5);
  EXPECT_FALSE(d.read);
  EXPECT_TRUE(d.paused);
  // Still over: the same pause, not a new overload.
  d = bytes_gate.observe(150, 0, 100, 10, 6);
  EXPECT_FALSE(d.read);
  EXPECT_FALSE(d.paused);
  EXPECT_EQ(bytes_gate.overloads(), 1u);
}

TEST(BudgetGate, MG3_ResumesOnlyAtTheLowWaterMark) {
  budget_gate g;
  g.observe(100, 0, 100, 10, 0);
  EXPECT_FALSE(g.observe(51, 0, 100, 10, 1).read);  // below the limit, above half: still paused
  EXPECT_FALSE(g.observe(50, 6, 100, 10, 2).read);  // bytes low, messages not
  const auto d = g.observe(50, 5, 100, 10, 3);
  EXPECT_TRUE(d.read);
  EXPECT_TRUE(d.resumed);
  EXPECT_FALSE(g.paused());
  // Reading again, it pauses at the limit again: a second overload.
  EXPECT_TRUE(g.observe(100, 0, 100, 10, 4).paused);
  EXPECT_EQ(g.overloads(), 2u);
}

TEST(BudgetGate, MG4_PausedTimeSumsThePausesIncludingTheCurrentOne) {
  budget_gate g;
  g.observe(100, 0, 100, 10, 1'000);
  EXPECT_EQ(g.paused_ns(1'500), 500u);
  g.observe(0, 0, 100, 10, 2'000);  // resumed after 1000
  EXPECT_EQ(g.paused_ns(9'000), 1'000u);
  g.observe(100, 0, 100, 10, 10'000);
  EXPECT_EQ(g.paused_ns(10'250), 1'250u);
}

TEST(BudgetGate, MG5_TrimsOnceAfterAnOverloadWhenTheQueuesDrained) {
  constexpr uint64_t s = 1'000'000'000, ms = 1'000'000;
  budget_gate g;
  EXPECT_FALSE(g.observe(0, 0, 800, 80, 0).trim);  // no spike yet: nothing to give back
  g.observe(800, 0, 800, 80, 1 * s);
  auto d = g.observe(400, 0, 800, 80, 2 * s);  // resumed, not drained
  EXPECT_TRUE(d.resumed);
  EXPECT_FALSE(d.trim);
  EXPECT_TRUE(d.trim_due);  // keep observing while idle
  d = g.observe(100, 10, 800, 80, 3 * s);  // an eighth: drained, from now
  EXPECT_FALSE(d.trim);
  EXPECT_TRUE(d.trim_due);
  d = g.observe(100, 10, 800, 80, 3 * s + 200 * ms);  // drained for 200 ms
  EXPECT_TRUE(d.trim);
  EXPECT_TRUE(d.after_overload);
  EXPECT_FALSE(d.trim_due);
  EXPECT_FALSE(g.observe(0, 0, 800, 80, 4 * s).trim);  // once per spike
  g.observe(800, 0, 800, 80, 5 * s);
  g.observe(0, 0, 800, 80, 6 * s);
  d = g.observe(0, 0, 800, 80, 6 * s + 200 * ms);
  EXPECT_TRUE(d.trim);
  EXPECT_TRUE(d.after_overload);
  // A trim answers for the overload before it: the next spike, below the limits, is not one.
  g.observe(200, 0, 800, 80, 7 * s);
  g.observe(0, 0, 800, 80, 8 * s);
  d = g.observe(0, 0, 800, 80, 8 * s + 200 * ms);
  EXPECT_TRUE(d.trim);
  EXPECT_FALSE(d.after_overload);
}

// A burst that never reached the limits (no cgroup: the default budget) still gives its heap back.
TEST(BudgetGate, MG5_ASpikeBelowTheLimitsTrimsToo) {
  constexpr uint64_t s = 1'000'000'000, ms = 1'000'000;
  budget_gate g;
  auto d = g.observe(199, 0, 800, 80, 0);  // under a quarter: no spike
  EXPECT_FALSE(d.trim_due);
  d = g.observe(0, 19, 800, 80, 0);  // under a quarter of the messages too
  EXPECT_FALSE(d.trim_due);
  EXPECT_FALSE(g.observe(0, 0, 800, 80, 1 * s).trim);
  d = g.observe(0, 20, 800, 80, 2 * s);  // a quarter of the messages
  EXPECT_TRUE(d.read);
  EXPECT_EQ(g.overloads(), 0u);
  EXPECT_TRUE(d.trim_due);
  EXPECT_FALSE(g.observe(150, 0, 800, 80, 3 * s).trim);  // not drained yet (over an eighth)
  EXPECT_FALSE(g.observe(100, 10, 800, 80, 4 * s).trim);  // drained from here
  d = g.observe(100, 10, 800, 80, 4 * s + 200 * ms);
  EXPECT_TRUE(d.trim);
  EXPECT_FALSE(d.after_overload);
}

// A blast's queues drain for a moment between its batches: a trim then gives back pages the next
// batches fault in again. Only queues drained at every observation for 200 ms are trimmed.
TEST(BudgetGate, MG5_QueuesDrainedForAMomentAreNotTrimmed) {
  constexpr uint64_t ms = 1'000'000;
  budget_gate g;
  g.observe(300, 0, 800, 80, 0);  // a spike
  EXPECT_FALSE(g.observe(0, 0, 800, 80, 10 * ms).trim);
  EXPECT_FALSE(g.observe(101, 0, 800, 80, 100 * ms).trim) << "over an eighth: the quiet restarts";
  EXPECT_FALSE(g.observe(0, 0, 800, 80, 150 * ms).trim);
  auto d = g.observe(100, 0, 800, 80, 349 * ms);  // 199 ms since 150
  EXPECT_FALSE(d.trim);
  EXPECT_TRUE(d.trim_due);
  EXPECT_TRUE(g.observe(0, 10, 800, 80, 350 * ms).trim);
}

// Queues that swing around a quarter of the budget are trimmed at most once a second.
TEST(BudgetGate, MG5_AtMostOneTrimASecond) {
  constexpr uint64_t ms = 1'000'000;
  budget_gate g;
  g.observe(200, 0, 800, 80, 0);
  g.observe(0, 0, 800, 80, 10 * ms);
  EXPECT_TRUE(g.observe(0, 0, 800, 80, 210 * ms).trim);
  g.observe(200, 0, 800, 80, 220 * ms);
  g.observe(0, 0, 800, 80, 230 * ms);
  auto d = g.observe(0, 0, 800, 80, 430 * ms);  // drained 200 ms, 220 ms after the last trim
  EXPECT_FALSE(d.trim);
  EXPECT_TRUE(d.trim_due);  // still due: the reader keeps looking
  EXPECT_FALSE(g.observe(0, 0, 800, 80, 1'000 * ms).trim);
  EXPECT_TRUE(g.observe(0, 0, 800, 80, 1'210 * ms).trim);
  EXPECT_FALSE(g.observe(0, 0, 800, 80, 3'000 * ms).trim_due);
}

// -- sizing -----------------------------------------------------------------------------------

struct fake_fs {
  std::map<std::string, std::string> files;
  read_text_fn reader() const {
    return [this](const std::string& p) -> std::optional<std::string> {
      auto it = files.find(p);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
  }
};

TEST(ResolveBudget, MS1_AConfiguredValueWins) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "4:memory:/pod\n";
  fs.files["/sys/fs/cgroup/memory/pod/memory.limit_in_bytes"] = "134217728\n";
  const auto c = resolve_budget(96 * MiB, fs.reader());
  EXPECT_EQ(c.bytes, 96 * MiB);
  EXPECT_EQ(c.source, budget_source::config);
  EXPECT_STREQ(to_string(c.source), "config");
}

TEST(ResolveBudget, MS2_V1LimitLessAQuarter) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "9:name=systemd:/\n4:cpuacct,memory:/kubepods/pod1\n0::/\n";
  fs.files["/sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes"] = "134217728\n";
  const auto c = resolve_budget(0, fs.reader());
  EXPECT_EQ(c.source, budget_source::cgroup_v1);
  EXPECT_EQ(c.cgroup_limit, 128 * MiB);
  EXPECT_EQ(c.bytes, 96 * MiB);  // 128 MiB less a quarter
  EXPECT_EQ(c.cgroup_file, "/sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes");
  EXPECT_STREQ(to_string(c.source), "cgroup-v1");
  EXPECT_NE(describe(c).find("96 MiB (cgroup-v1: limit 128 MiB"), std::string::npos)
      << describe(c);
}

TEST(ResolveBudget, MS2_AContainerSeesItsCgroupAtTheRoot) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "4:memory:/host/path/not/mounted\n";
  fs.files["/sys/fs/cgroup/memory/memory.limit_in_bytes"] = "67108864";
  const auto c = resolve_budget(0, fs.reader());
  EXPECT_EQ(c.source, budget_source::cgroup_v1);
  EXPECT_EQ(c.bytes, 40 * MiB);  // 64 MiB less 24 MiB (more than a quarter)
}

TEST(ResolveBudget, MS2_AHostPathSeenFromInsideAContainer) {
  fake_fs fs;
  // /proc/self/cgroup names the host's path; the container's own cgroup is mounted at the
  // root, and kvrelay runs in a child cgroup of it.
  fs.files["/proc/self/cgroup"] = "4:memory:/process_api/abc123/kvrelay-bench\n";
  fs.files["/sys/fs/cgroup/memory/kvrelay-bench/memory.limit_in_bytes"] = "134217728";
  fs.files["/sys/fs/cgroup/memory/memory.limit_in_bytes"] = "9223372036854771712";
  const auto c = resolve_budget(0, fs.reader());
  EXPECT_EQ(c.source, budget_source::cgroup_v1);
  EXPECT_EQ(c.bytes, 96 * MiB);
  EXPECT_EQ(c.cgroup_file, "/sys/fs/cgroup/memory/kvrelay-bench/memory.limit_in_bytes");
}

TEST(ResolveBudget, MS3_V2MemoryMax) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "0::/system.slice/kvrelay.service\n";
  fs.files["/sys/fs/cgroup/system.slice/kvrelay.service/memory.max"] = "268435456\n";
  const auto c = resolve_budget(0, fs.reader());
  EXPECT_EQ(c.source, budget_source::cgroup_v2);
  EXPECT_EQ(c.bytes, 192 * MiB);
  EXPECT_STREQ(to_string(c.source), "cgroup-v2");
}

TEST(ResolveBudget, MS4_NoLimitIsTheDefault) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "4:memory:/\n0::/\n";
  fs.files["/sys/fs/cgroup/memory/memory.limit_in_bytes"] = "9223372036854771712\n";
  auto c = resolve_budget(0, fs.reader());
  EXPECT_EQ(c.source, budget_source::fallback);
  EXPECT_EQ(c.bytes, default_budget_bytes);
  EXPECT_STREQ(to_string(c.source), "default");
  fs.files.clear();
  fs.files["/proc/self/cgroup"] = "0::/\n";
  fs.files["/sys/fs/cgroup/memory.max"] = "max\n";
  c = resolve_budget(0, fs.reader());
  EXPECT_EQ(c.source, budget_source::fallback);
  // Nothing readable at all (no /proc): the default too.
  c = resolve_budget(0, fake_fs{}.reader());
  EXPECT_EQ(c.source, budget_source::fallback);
}

// MS2 vs MS3 on a hybrid host: a v1 memory controller without a limit is no limit, whatever a
// v2 file says (the v2 hierarchy has no memory controller there).
TEST(ResolveBudget, MS3_OnlyOnAPureV2Host) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "4:memory:/\n0::/svc\n";
  fs.files["/sys/fs/cgroup/memory/memory.limit_in_bytes"] = "9223372036854771712\n";
  fs.files["/sys/fs/cgroup/svc/memory.max"] = "268435456\n";
  EXPECT_EQ(resolve_budget(0, fs.reader()).source, budget_source::fallback);
  // Only the "0::" line is v2: an empty controller list under another hierarchy id is not.
  fs.files.clear();
  fs.files["/proc/self/cgroup"] = "0::/svc\n7::/other\n";
  fs.files["/sys/fs/cgroup/svc/memory.max"] = "268435456\n";
  fs.files["/sys/fs/cgroup/other/memory.max"] = "134217728\n";
  const auto c = resolve_budget(0, fs.reader());
  EXPECT_EQ(c.cgroup_file, "/sys/fs/cgroup/svc/memory.max");
  EXPECT_EQ(c.cgroup_limit, 256 * MiB);
}

// A limit file is one decimal number, spaces around it allowed; anything else, zero, or a value
// at "no limit" (2^62 and up) or past 64 bits is no limit.
TEST(ResolveBudget, MS2_LimitFileValues) {
  const auto with = [](const std::string& text) {
    fake_fs fs;
    fs.files["/proc/self/cgroup"] = "0::/\n";
    fs.files["/sys/fs/cgroup/memory.max"] = text;
    return resolve_budget(0, fs.reader());
  };
  EXPECT_EQ(with("  268435456 \n").cgroup_limit, 256 * MiB) << "spaces around it";
  for (const char* bad : {"268435456abc", "12 34", "0", "-5", "", "   ",
                          "4611686018427387904",  // 2^62: no limit (MS4)
                          "99999999999999999999999"}) {
    const auto c = with(bad);
    EXPECT_EQ(c.source, budget_source::fallback) << "'" << bad << "'";
    EXPECT_EQ(c.bytes, default_budget_bytes) << "'" << bad << "'";
  }
  EXPECT_EQ(with("4611686018427387903").source, budget_source::cgroup_v2) << "just under 2^62";
}

// A reader that leaves errno set (as a failed open does) must not make a good value unreadable.
TEST(ResolveBudget, MS2_AStaleErrnoIsNotAParseError) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "0::/\n";
  fs.files["/sys/fs/cgroup/memory.max"] = "268435456\n";
  const auto inner = fs.reader();
  const auto c = resolve_budget(0, [&](const std::string& p) {
    auto r = inner(p);
    errno = ENOENT;
    return r;
  });
  EXPECT_EQ(c.source, budget_source::cgroup_v2);
  EXPECT_EQ(c.cgroup_limit, 256 * MiB);
}

TEST(ResolveBudget, MS1_TheSmallestConfiguredValueWins) {
  const auto c = resolve_budget(1, fake_fs{}.reader());
  EXPECT_EQ(c.source, budget_source::config);
  EXPECT_EQ(c.bytes, 1u);
}

// MS4's margin: a quarter of the limit, at least 24 MiB; the budget never under 8 MiB.
TEST(ResolveBudget, MS4_TheMarginIsAQuarterAtLeast24MiB) {
  const auto budget_for = [](uint64_t limit) {
    fake_fs fs;
    fs.files["/proc/self/cgroup"] = "0::/\n";
    fs.files["/sys/fs/cgroup/memory.max"] = std::to_string(limit);
    return resolve_budget(0, fs.reader()).bytes;
  };
  EXPECT_EQ(budget_for(40 * MiB), 16 * MiB) << "40 less 24";
  EXPECT_EQ(budget_for(96 * MiB), 72 * MiB) << "a quarter and 24 MiB agree";
  EXPECT_EQ(budget_for(128 * MiB), 96 * MiB) << "a quarter (the injector's limit)";
  EXPECT_EQ(budget_for(1024 * MiB), 768 * MiB) << "a quarter";
  EXPECT_EQ(budget_for(24 * MiB), 8 * MiB) << "nothing left: the floor";
  EXPECT_EQ(budget_for(32 * MiB), 8 * MiB) << "exactly the floor";
  EXPECT_EQ(budget_for(33 * MiB), 9 * MiB) << "just above the floor";
}

// For --check and the log: MiB when whole, bytes otherwise; where it came from.
TEST(ResolveBudget, DescribeSaysWhereTheBudgetCameFrom) {
  budget_choice c;
  c.bytes = 96 * MiB;
  c.source = budget_source::config;
  EXPECT_EQ(describe(c), "96 MiB (config)");
  c.source = budget_source::fallback;
  c.bytes = default_budget_bytes;
  EXPECT_EQ(describe(c), "512 MiB (default: no memory.budget and no cgroup memory limit)");
  c.source = budget_source::cgroup_v2;
  c.bytes = 99 * MiB / 2;
  c.cgroup_limit = 99 * MiB;
  c.cgroup_file = "/sys/fs/cgroup/memory.max";
  EXPECT_EQ(describe(c),
            "51904512 bytes (cgroup-v2: limit 99 MiB in /sys/fs/cgroup/memory.max, less a margin)");
  c.source = budget_source::cgroup_v1;
  c.bytes = 3 * MiB;
  EXPECT_EQ(describe(c).rfind("3 MiB (cgroup-v1: limit 99 MiB in", 0), 0u) << describe(c);
}

TEST(ResolveBudget, MS4_ASmallLimitKeepsEightMiB) {
  fake_fs fs;
  fs.files["/proc/self/cgroup"] = "0::/\n";
  fs.files["/sys/fs/cgroup/memory.max"] = std::to_string(20 * MiB);
  EXPECT_EQ(resolve_budget(0, fs.reader()).bytes, 8 * MiB);
  fs.files["/sys/fs/cgroup/memory.max"] = "garbage";
  EXPECT_EQ(resolve_budget(0, fs.reader()).source, budget_source::fallback);
}

TEST(DeriveBounds, MD1_ToMD5) {
  auto b = derive_bounds(96 * MiB, 1);
  EXPECT_EQ(b.queue_bytes, 16 * MiB);
  EXPECT_EQ(b.queue_messages, 16u * 1024);
  EXPECT_EQ(b.index_bytes, 72 * MiB);  // MD5: 3/4
  EXPECT_EQ(b.rcvhwm, 192);  // 6 MiB at 32 KiB
  EXPECT_EQ(b.max_pending, 196608u);
  b = derive_bounds(8 * MiB, 1);
  EXPECT_EQ(b.rcvhwm, 64);  // the floor
  EXPECT_EQ(b.max_pending, 16384u);  // the floor
  b = derive_bounds(8 * MiB, 16);
  EXPECT_EQ(b.rcvhwm, 64);  // the floor
  b = derive_bounds(uint64_t{64} << 30, 0);  // MD4: 0 pipelines as 1
  EXPECT_EQ(b.rcvhwm, 100000);
  EXPECT_EQ(b.max_pending, 2000000u);
  EXPECT_EQ(derive_bounds(64 * MiB, 0).rcvhwm, derive_bounds(64 * MiB, 1).rcvhwm);
  EXPECT_EQ(derive_bounds(0, 1).queue_messages, 64u);
}

// -- the index in the budget (IB1-IB4), the queues' share around it (MD1), holds (MG6) ---------

TEST(IndexBudget, IB1_StandingChargesFollowTheirOwnerAndGoWithIt) {
  auto b = memory_budget::make(96 * MiB, budget_source::config);
  {
    standing_charge idx(b, standing_charge::on::index);
    idx.set(10 * MiB);
    EXPECT_EQ(b->index_bytes(), 10 * MiB);
    idx.set(4 * MiB);
    EXPECT_EQ(b->index_bytes(), 4 * MiB);
    standing_charge pending(b, standing_charge::on::debouncer_queue);
    pending.set(1000);
    EXPECT_EQ(b->bytes(budget_queue::debouncer), 1000u);
    EXPECT_EQ(b->messages(budget_queue::debouncer), 0u) << "a standing charge is no message";
    standing_charge moved = std::move(idx);
    EXPECT_EQ(b->index_bytes(), 4 * MiB) << "moved, not released";
  }
  EXPECT_EQ(b->index_bytes(), 0u);
  EXPECT_EQ(b->used_bytes(), 0u);
}

// IB1: a charge moved onto a live one releases what that one held and carries its kind; an
// inert or moved-from charge changes nothing; a charge moved onto itself keeps what it holds.
TEST(IndexBudget, IB1_AChargeMovedOntoAnotherReleasesItsOldAndCarriesItsKind) {
  auto b = memory_budget::make(96 * MiB, budget_source::config);
  standing_charge idx(b, standing_charge::on::index);
  idx.set(100);
  standing_charge pending(b, standing_charge::on::debouncer_queue);
  pending.set(7);
  idx = std::move(pending);
  EXPECT_EQ(b->index_bytes(), 0u) << "what the target held is released";
  EXPECT_EQ(b->bytes(budget_queue::debouncer), 7u);
  idx.set(9);
  EXPECT_EQ(b->bytes(budget_queue::debouncer), 9u) << "the kind moved with it";
  EXPECT_EQ(b->index_bytes(), 0u);
  pending.set(3);  // moved from: inert
  EXPECT_EQ(b->bytes(budget_queue::debouncer), 9u);
  auto& same = idx;
  idx = std::move(same);
  EXPECT_EQ(b->bytes(budget_queue::debouncer), 9u) << "moved onto itself: unchanged";
  standing_charge inert;
  inert.set(5);  // no budget: nothing to charge, and no crash
  EXPECT_EQ(b->used_bytes(), 9u);
}

TEST(IndexBudget, IB3_RoomForANewBlockShrinksByTierNearTheShare) {
  auto b = memory_budget::make(96 * MiB, budget_source::config);
  ASSERT_EQ(b->index_limit_bytes(), 72 * MiB);
  standing_charge idx(b, standing_charge::on::index);
  const uint64_t share = b->index_limit_bytes();
  idx.set(share / 8 * 7 - 1);
  EXPECT_TRUE(b->index_room(3));
  idx.set(share / 8 * 7);
  EXPECT_FALSE(b->index_room(3)) << "T3 goes first";
  EXPECT_TRUE(b->index_room(2));
  idx.set(share / 16 * 15 - 1);
  EXPECT_TRUE(b->index_room(2)) << "up to fifteen sixteenths";
  idx.set(share / 16 * 15);
  EXPECT_FALSE(b->index_room(2)) << "then T2";
  EXPECT_TRUE(b->index_room(1));
  idx.set(share);
  EXPECT_FALSE(b->index_room(1)) << "at the share, nothing new";
}

TEST(IndexBudget, MD1_TheQueuesGetWhatTheIndexLeavesAFifthOfNeverUnderAFortieth) {
  auto b = memory_budget::make(96 * MiB, budget_source::config);
  EXPECT_EQ(b->limit_bytes(), 16 * MiB) << "an empty index: budget/6";
  standing_charge idx(b, standing_charge::on::index);
  idx.set(46 * MiB);
  EXPECT_EQ(b->limit_bytes(), 10 * MiB) << "(96 - 46) / 5";
  EXPECT_LT(b->limit_messages(), 16u * 1024);
  idx.set(90 * MiB);
  EXPECT_EQ(b->limit_bytes(), 96 * MiB / 40) << "the floor";
  EXPECT_GE(b->limit_messages(), 64u);

  // A budget so small that the messages' share of what the index leaves is under 64: 64.
  auto tiny = memory_budget::make(240 * 1024, budget_source::config);
  standing_charge full(tiny, standing_charge::on::index);
  full.set(tiny->index_limit_bytes());
  ASSERT_LT(64 * tiny->limit_bytes() / (240 * 1024 / 6), 64u);
  EXPECT_EQ(tiny->limit_messages(), 64u);
}

TEST(IndexBudget, MG6_AHoldMakesTheQueuesFullUntilEveryHoldIsOff) {
  auto b = memory_budget::make(96 * MiB, budget_source::config);
  budget_gate g;
  auto observe = [&](uint64_t now) {
    return g.observe(b->used_bytes(), b->used_messages(), b->limit_bytes(), b->limit_messages(),
                     now);
  };
  EXPECT_TRUE(observe(1).read);
  b->hold();
  b->hold();
  EXPECT_FALSE(observe(2).read) << "held: full";
  b->unhold();
  EXPECT_FALSE(observe(3).read) << "another hold is still on";
  b->unhold();
  EXPECT_TRUE(observe(4).read);
  EXPECT_EQ(b->used_bytes(), 0u);
}

TEST(IndexBudget, MG7_MeasuredPressureFillsTheQueuesOnlyWhileTheyHoldSomething) {
  auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v1);
  b->note_rss(200 * MiB);
  EXPECT_FALSE(b->pressed()) << "no limit known: never pressed";
  b->set_process_limit(128 * MiB);
  EXPECT_EQ(b->pressure_line(), 120 * MiB) << "the limit less a sixteenth";
  b->note_rss(120 * MiB - 1);
  EXPECT_FALSE(b->pressed());
  b->note_rss(120 * MiB);
  EXPECT_TRUE(b->pressed()) << "at the line";
  EXPECT_EQ(b->used_bytes(), 0u) << "queues empty: the pressure is not work in flight";

  budget_gate g;
  auto observe = [&](uint64_t now) {
    return g.observe(b->used_bytes(), b->used_messages(), b->limit_bytes(), b->limit_messages(),
                     now);
  };
  EXPECT_TRUE(observe(1).read) << "nothing queued: reading goes on, whatever the pressure";
  {
    auto t = b->charge(budget_queue::shard, 1000);
    EXPECT_EQ(b->used_bytes(), 1000 + memory_budget::message_overhead + b->limit_bytes());
    EXPECT_FALSE(observe(2).read) << "pressed with work queued: full";
    b->note_rss(100 * MiB);
    EXPECT_TRUE(observe(3).read) << "below the line again: the charge alone, far under half";
    b->note_rss(121 * MiB);
    EXPECT_FALSE(observe(4).read);
  }
  EXPECT_TRUE(observe(5).read) << "the queues drained: reading resumes under pressure";
  standing_charge pending(b, standing_charge::on::debouncer_queue);
  pending.set(1);
  EXPECT_EQ(b->used_bytes(), 1 + b->limit_bytes()) << "one byte is work in flight too";
}

TEST(IndexBudget, MG7_SamplesTheProcessOnlyWithALimitAndAtMostEvery5ms) {
  auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v2);
  b->sample_rss(1'000'000'000);
  EXPECT_EQ(b->rss(), 0u) << "no limit: nothing read";
  b->set_process_limit(uint64_t{1} << 40);
  b->sample_rss(2'000'000'000);
  const uint64_t first = b->rss();
  EXPECT_GT(first, 1 * MiB) << "this test's own resident memory";
  EXPECT_LT(first, uint64_t{1} << 40);
  std::vector<char> grow(64 * MiB, 1);  // touched: resident
  b->sample_rss(2'004'000'000);
  EXPECT_EQ(b->rss(), first) << "4 ms later: the last sample stands";
  b->sample_rss(2'005'000'000);
  EXPECT_GE(b->rss(), first + 60 * MiB) << "5 ms later: sampled again, the 64 MiB seen";
  EXPECT_EQ(grow[grow.size() / 2], 1);
}

TEST(IndexBudget, MG7_TheWorkingSetIsUsageLessInactiveFilePages) {
  EXPECT_EQ(working_set("134217728\n", "cache 5\ninactive_file 7\ntotal_inactive_file 1048576\n",
                        false),
            127 * MiB)
      << "v1: the hierarchy's inactive file pages, as usage is the hierarchy's";
  EXPECT_EQ(working_set("134217728\n", "anon 1\ninactive_file 2097152\nactive_file 9\n", true),
            126 * MiB)
      << "v2: inactive_file";
  EXPECT_EQ(working_set("1000\n", "total_inactive_file 5000\n", false), 0u) << "never below 0";
  EXPECT_EQ(working_set("1000\n", "", false), 1000u) << "no stat: the usage";
  EXPECT_EQ(working_set("", "total_inactive_file 5\n", false), std::nullopt);
  EXPECT_EQ(working_set("max\n", "", true), std::nullopt);
  EXPECT_EQ(working_set("  1000\n", "total_inactive_file   10\n", false), 990u) << "spaces";
  EXPECT_EQ(working_set("   ", "", false), std::nullopt);
  EXPECT_EQ(working_set("1000", "inactive_file 10", true), 990u) << "no newline at the end";
  EXPECT_EQ(working_set("1000\n", "total_inactive_file x\n", false), 1000u) << "no number: 0";
  EXPECT_EQ(working_set("1000\n", "xtotal_inactive_file 10\ntotal_inactive_file 10\n", false),
            990u)
      << "a key is matched at the start of its line only";
}

TEST(IndexBudget, MG7_SamplesTheCgroupsFilesWhereItKnowsThem) {
  char tmpl[] = "/tmp/kvrelay-mg7-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir + "/" + name, std::ios::trunc) << text;
  };
  write("memory.usage_in_bytes", std::to_string(125 * MiB) + "\n");
  write("memory.stat", "total_inactive_file " + std::to_string(10 * MiB) + "\n");
  {
    auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v1);
    b->set_process_limit(128 * MiB, dir, /*v2=*/false);
    b->sample_rss(1'000'000'000);
    EXPECT_EQ(b->rss(), 115 * MiB);
    EXPECT_FALSE(b->pressed()) << "115 MiB of working set is under the 120 MiB line";
    write("memory.stat", "total_inactive_file " + std::to_string(4 * MiB) + "\n");
    b->sample_rss(1'010'000'000);
    EXPECT_EQ(b->rss(), 121 * MiB) << "the files are read again at each sample";
    EXPECT_TRUE(b->pressed());
  }
  write("memory.current", std::to_string(50 * MiB) + "\n");
  write("memory.stat", "anon 1\ninactive_file " + std::to_string(5 * MiB) + "\n");
  {
    auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v2);
    b->set_process_limit(128 * MiB, dir, /*v2=*/true);
    b->sample_rss(1'000'000'000);
    EXPECT_EQ(b->rss(), 45 * MiB) << "v2 reads memory.current, and its own key of memory.stat";
  }
  write("memory.current", "7");  // one byte, no newline
  write("memory.stat", "inactive_file 0\n");
  {
    auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v2);
    b->set_process_limit(1, dir, /*v2=*/true);
    b->sample_rss(1'000'000'000);
    EXPECT_EQ(b->rss(), 7u) << "any limit reads the files, and a one-byte file is read";
  }
  for (const char* f : {"memory.usage_in_bytes", "memory.current", "memory.stat"})
    std::remove((dir + "/" + f).c_str());
  ::rmdir(dir.c_str());
}

size_t open_fds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n += e.exists() ? 1 : 0;
  return n;
}

// MG7: the cgroup's two files are opened once, for a limit and a directory both given, and only
// together; the budget closes them when it goes.
TEST(IndexBudget, MG7_TheCgroupsFilesAreOpenedOnceBothOrNeitherAndClosed) {
  char tmpl[] = "/tmp/kvrelay-mg7fd-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/memory.current") << "4096\n";
  {  // the process' own statm stays open once read (as in the daemon): open it before counting
    auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v2);
    b->set_process_limit(128 * MiB);
    b->sample_rss(1'000'000'000);
  }
  const size_t before = open_fds();
  {
    auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v2);
    b->set_process_limit(128 * MiB, dir, /*v2=*/true);
    EXPECT_EQ(open_fds(), before) << "memory.stat is missing: neither is kept";
    b->sample_rss(1'000'000'000);
    EXPECT_GT(b->rss(), 4096u) << "the process' resident memory instead";
  }
  EXPECT_EQ(open_fds(), before);
  std::ofstream(dir + "/memory.stat") << "inactive_file 0\n";
  {
    auto b = memory_budget::make(96 * MiB, budget_source::cgroup_v2);
    b->set_process_limit(0, dir, /*v2=*/true);
    EXPECT_EQ(open_fds(), before) << "no limit: nothing to sample";
    b->set_process_limit(128 * MiB, dir, /*v2=*/true);
    EXPECT_EQ(open_fds(), before + 2);
    b->set_process_limit(64 * MiB, dir, /*v2=*/true);
    EXPECT_EQ(open_fds(), before + 2) << "a new limit keeps the files";
    b->sample_rss(1'000'000'000);
    EXPECT_EQ(b->rss(), 4096u);
  }
  EXPECT_EQ(open_fds(), before) << "closed with the budget";
  for (const char* f : {"memory.current", "memory.stat"}) std::remove((dir + "/" + f).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace kvrelay
