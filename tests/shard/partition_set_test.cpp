// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The shard's protocol (actors/shard/partition_set.hpp, rules PS1-PS6): partitions declared by
// work, batch order across partitions, removals routed by the hash directory.
#include "actors/shard/partition_set.hpp"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <set>

#include "base/fingerprint.hpp"

namespace kvrelay {
namespace {

constexpr int64_t bs = 16;

std::vector<uint32_t> tokens_for(uint64_t h) {
  std::vector<uint32_t> t(bs);
  std::iota(t.begin(), t.end(), static_cast<uint32_t>(h * 100));
  return t;
}

uint64_t fp_of(uint64_t h) {
  const auto t = tokens_for(h);
  return fingerprint::content(t.data(), bs);
}

// Builds a work the way the decoder does: stores name their partition, removals do not.
struct work_builder {
  shard_work w;
  explicit work_builder(uint32_t first_new = 0, std::vector<std::string> names = {}) {
    w.epoch = 1;
    w.first_new = first_new;
    w.new_partitions = std::move(names);
  }
  work_builder& store(uint32_t partition, uint64_t h, tier t = tier::t1) {
    kv_event ev;
    ev.type = event_type::stored;
    ev.stored.block_hashes = {engine_hash::from_int(h)};
    ev.stored.token_ids = tokens_for(h);
    ev.stored.block_size = bs;
    ev.stored.first_tainted_block = 1;
    ev.stored.medium.tier = t;
    w.events.push_back(std::move(ev));
    w.partitions.push_back(partition);
    return *this;
  }
  work_builder& remove(std::vector<uint64_t> hs, std::optional<std::vector<uint32_t>> left = {}) {
    kv_event ev;
    ev.type = event_type::removed;
    for (uint64_t h : hs) ev.removed.block_hashes.push_back(engine_hash::from_int(h));
    if (left) {
      ev.removed.remaining_copies = *left;
      ev.removed.has_remaining_copies = true;
    }
    w.events.push_back(std::move(ev));
    w.partitions.push_back(0);
    return *this;
  }
};

// partition → (fingerprint → evicted?) of one apply: what each partition emitted.
std::map<uint32_t, std::vector<std::pair<uint64_t, bool>>> emitted(
    const std::vector<partition_set::result>& rs) {
  std::map<uint32_t, std::vector<std::pair<uint64_t, bool>>> out;
  for (const auto& r : rs)
    for (const auto& op : r.ops)
      out[r.partition].emplace_back(op.fingerprint, op.op == index_op::kind::evict);
  return out;
}

using emits = std::map<uint32_t, std::vector<std::pair<uint64_t, bool>>>;

TEST(PartitionSet, S2StoreAndRemovalInTheBatchThatCreatesTheBasePartition) {
  partition_set ps;
  const auto rs = ps.apply(work_builder(0, {""}).store(0, 1).remove({1}).w);
  EXPECT_EQ(emitted(rs), (emits{{0, {{fp_of(1), false}, {fp_of(1), true}}}}));
  EXPECT_EQ(ps.index(0).size(), 0u);
}

TEST(PartitionSet, S2StoreAndRemovalInTheBatchThatCreatesALoraPartition) {
  partition_set ps;
  ps.apply(work_builder(0, {""}).store(0, 1).w);
  // The adapter's first batch: its partition is created, stored into and removed from.
  const auto rs = ps.apply(work_builder(1, {"sql-lora"}).store(1, 2).remove({2}).w);
  EXPECT_EQ(emitted(rs), (emits{{1, {{fp_of(2), false}, {fp_of(2), true}}}}));
  EXPECT_TRUE(ps.directory_active());
  EXPECT_EQ(ps.home(), 0u);
  EXPECT_EQ(ps.directory_size(), 0u) << "hash 1 is the base partition's: home needs no slot";
}

TEST(PartitionSet, S3TheHomePartitionsBlocksTakeNoDirectorySlot) {
  partition_set ps;
  ps.apply(work_builder(0, {""}).store(0, 1).store(0, 2).w);
  EXPECT_FALSE(ps.directory_active()) << "one partition needs no directory";
  const auto rs = ps.apply(work_builder(1, {"a"}).store(1, 3).store(1, 4).remove({1, 3}).w);
  EXPECT_EQ(emitted(rs), (emits{{1, {{fp_of(3), false}, {fp_of(4), false}, {fp_of(3), true}}},
                                {0, {{fp_of(1), true}}}}));
  EXPECT_EQ(ps.directory_size(), 1u) << "only a's hash 4";
  EXPECT_EQ(ps.index(0).stats().unknown_removals, 0u) << "home is asked, not told, about 3";
}

TEST(PartitionSet, S3TheBaseModelsPartitionBecomesHomeWhenItAppearsLater) {
  partition_set ps;
  ps.apply(work_builder(0, {"a", "b"}).store(0, 1).store(0, 2).store(1, 3).w);
  EXPECT_EQ(ps.home(), 0u);
  EXPECT_EQ(ps.directory_size(), 1u) << "b's hash 3; a is home";
  ps.apply(work_builder(2, {""}).store(2, 4).store(2, 5).w);
  EXPECT_EQ(ps.home(), 2u);
  EXPECT_EQ(ps.directory_size(), 3u) << "a's hashes 1 and 2 entered it, b's 3 stayed";
  ps.apply(work_builder(3, {"c"}).store(3, 6).w);
  EXPECT_EQ(ps.home(), 2u) << "the base partition stays home";
  const auto rs = ps.apply(work_builder().remove({1, 3, 4, 6, 99}).w);
  EXPECT_EQ(emitted(rs), (emits{{0, {{fp_of(1), true}}},
                                {1, {{fp_of(3), true}}},
                                {2, {{fp_of(4), true}}},
                                {3, {{fp_of(6), true}}}}));
  EXPECT_EQ(ps.stats().unrouted_hashes, 1u);
  EXPECT_EQ(ps.directory_size(), 1u) << "a's hash 2";
}

TEST(PartitionSet, S3RemovalsReachOnlyTheHoldingPartition) {
  partition_set ps;
  std::vector<std::string> names;
  for (int a = 0; a < 256; ++a) names.push_back("lora-" + std::to_string(a));
  work_builder stores(0, names);
  for (uint32_t a = 0; a < 256; ++a) stores.store(a, 1000 + a);
  ps.apply(stores.w);
  ASSERT_EQ(ps.size(), 256u);
  EXPECT_EQ(ps.directory_size(), 255u) << "lora-0 is home";
  const auto rs = ps.apply(work_builder().remove({1000 + 17, 1000 + 200, 99}).w);
  EXPECT_EQ(emitted(rs), (emits{{17, {{fp_of(1017), true}}}, {200, {{fp_of(1200), true}}}}));
  for (uint32_t a = 0; a < 256; ++a)
    EXPECT_EQ(ps.index(a).stats().unknown_removals, 0u) << "partition " << a << " never saw it";
  EXPECT_EQ(ps.stats().unrouted_hashes, 1u);
  EXPECT_EQ(ps.directory_size(), 253u);
}

TEST(PartitionSet, S4AHashHeldBySeveralPartitionsIsRemovedFromEach) {
  partition_set ps;
  ps.apply(work_builder(0, {"", "a", "b"}).store(0, 5).store(1, 5).store(2, 6).w);
  auto rs = ps.apply(work_builder().remove({5}).w);
  EXPECT_EQ(emitted(rs), (emits{{0, {{fp_of(5), true}}}, {1, {{fp_of(5), true}}}}));
  EXPECT_EQ(ps.stats().shared_hashes, 1u);
  EXPECT_EQ(ps.directory_size(), 1u);
  // Held by two, forgotten by one: the other still gets the next removal.
  ps.apply(work_builder().store(0, 7).store(2, 7).w);
  ps.apply(work_builder().store(2, 7).w);  // a second copy in "b"
  rs = ps.apply(work_builder().remove({7}).w);
  EXPECT_EQ(emitted(rs), (emits{{0, {{fp_of(7), true}}}})) << "b keeps its second copy";
  rs = ps.apply(work_builder().remove({7}).w);
  EXPECT_EQ(emitted(rs), (emits{{2, {{fp_of(7), true}}}}));
  EXPECT_EQ(ps.directory_size(), 1u);  // hash 6
}

TEST(PartitionSet, S3CapEvictionsLeaveTheDirectory) {
  index_options o;
  o.max_resident = 2;
  partition_set ps(o);
  ps.apply(work_builder(0, {"", "a"}).store(1, 1).store(1, 2).store(1, 3).store(0, 9).w);
  EXPECT_EQ(ps.index(1).size(), 2u);
  EXPECT_EQ(ps.directory_size(), 2u) << "1 was pushed out of a; 9 is home's";
  const auto rs = ps.apply(work_builder().remove({1}).w);
  EXPECT_TRUE(rs.empty());
  EXPECT_EQ(ps.stats().unrouted_hashes, 1u);
}

TEST(PartitionSet, S3RemainingCopyCountsAreRoutedPerHash) {
  partition_set ps;
  ps.apply(work_builder(0, {"", "a"}).store(0, 1).store(1, 2).store(1, 2).w);
  auto rs = ps.apply(work_builder().remove({2, 1}, std::vector<uint32_t>{1, 0}).w);
  EXPECT_EQ(emitted(rs), (emits{{0, {{fp_of(1), true}}}}));
  EXPECT_EQ(ps.index(1).copies(engine_hash::from_int(2), tier::t1), 1u);
  ps.apply(work_builder().store(1, 2).w);
  rs = ps.apply(work_builder().remove({2}, std::vector<uint32_t>{0, 0}).w);
  EXPECT_TRUE(emitted(rs).empty()) << "a wrong-length list is ignored: 2 copies counted down";
  EXPECT_EQ(ps.stats().copy_counts_ignored, 1u);
  rs = ps.apply(work_builder().remove({2}, std::vector<uint32_t>{0}).w);
  EXPECT_EQ(emitted(rs), (emits{{1, {{fp_of(2), true}}}}));
}

TEST(PartitionSet, S5ClearForgetsBlocksAndDirectoryButKeepsPartitions) {
  partition_set ps;
  ps.apply(work_builder(0, {"", "a"}).store(0, 1).store(1, 2).w);
  ps.clear();
  EXPECT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps.directory_size(), 0u);
  EXPECT_EQ(ps.index(0).size() + ps.index(1).size(), 0u);
  auto rs = ps.apply(work_builder().remove({1, 2}).w);
  EXPECT_TRUE(rs.empty());
  rs = ps.apply(work_builder().store(1, 1).remove({1}).w);
  EXPECT_EQ(emitted(rs), (emits{{1, {{fp_of(1), false}, {fp_of(1), true}}}}));
}

TEST(PartitionSet, S6ResultsInFirstTouchOrderWithTheStoreFlag) {
  partition_set ps;
  ps.apply(work_builder(0, {"", "a", "b"}).store(0, 1).w);
  // b: an event that yields nothing (its parent is unknown) still counts as a store (R12).
  work_builder w;
  w.store(2, 5);
  w.w.events.back().stored.parent = engine_hash::from_int(424242);
  w.store(1, 6).remove({1});
  const auto rs = ps.apply(w.w);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].partition, 2u);
  EXPECT_TRUE(rs[0].had_store);
  EXPECT_TRUE(rs[0].ops.empty());
  EXPECT_EQ(rs[1].partition, 1u);
  EXPECT_TRUE(rs[1].had_store);
  EXPECT_EQ(rs[2].partition, 0u);
  EXPECT_FALSE(rs[2].had_store) << "a partition only removed from";
  // A removal that changes nothing touches nobody.
  EXPECT_TRUE(ps.apply(work_builder().remove({777}).w).empty());
}

// A work's ops are sized once for the blocks it stores, and room for blocks that made no op
// (tainted here) does not travel with the result: a message is charged by its ops' capacity.
TEST(PartitionSet, OpsAreSizedForTheWorkAndCarryNoRoomForBlocksThatMadeNone) {
  partition_set ps;
  work_builder stores(0, {""});
  for (uint64_t h = 1; h <= 600; ++h) stores.store(0, h);
  auto rs = ps.apply(stores.w);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].ops.size(), 600u);
  EXPECT_EQ(rs[0].ops.capacity(), 600u);  // made once, not doubled to 1024

  work_builder tainted;
  for (uint64_t h = 1001; h <= 1600; ++h) {
    tainted.store(0, h);
    tainted.w.events.back().stored.first_tainted_block = 0;
  }
  rs = ps.apply(tainted.w);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_TRUE(rs[0].ops.empty());
  EXPECT_LE(rs[0].ops.capacity(), 16u);

  // One partition holds every block: a removal's ops are sized for it too.
  std::vector<uint64_t> held(600), not_held(600);
  std::iota(held.begin(), held.end(), 1);
  std::iota(not_held.begin(), not_held.end(), 5001);
  rs = ps.apply(work_builder().remove(held).w);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].ops.size(), 600u);
  EXPECT_EQ(rs[0].ops.capacity(), 600u);  // made once, not doubled to 1024
  // Removals that made no op carry no room with the result.
  rs = ps.apply(work_builder().remove(not_held).store(0, 9001).w);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].ops.size(), 1u);
  EXPECT_LE(rs[0].ops.capacity(), 16u);
}

TEST(PartitionSet, S1DeclarationsMustContinueTheIds) {
  partition_set ps;
  shard_work stale = work_builder(0, {"", "a"}).w;
  ps.declare(stale);
  EXPECT_EQ(ps.size(), 2u);
  ps.apply(work_builder(0, {"", "a"}).store(1, 1).w);  // repeated: nothing new
  EXPECT_EQ(ps.size(), 2u);
  // A gap in the ids is a decoder bug: nothing declared, its events skipped and counted.
  ps.apply(work_builder(5, {"x"}).store(5, 2).w);
  EXPECT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps.stats().bad_partition_events, 2u);
  EXPECT_EQ(ps.name(1), "a");
}

// Random stores, removals (some with counts) and clears over 8 partitions and a small hash
// universe, some hashes shared between partitions, the base model's partition declared half way
// (it becomes home): every partition must emit exactly what it would if every removal were
// offered to every partition holding the hash (plain indexes, no directory), and the directory
// must hold exactly the hashes held outside home.
TEST(PartitionSetProperty, RoutingEqualsOfferingEveryRemovalToEveryHolder) {
  std::mt19937 rng(11);
  index_options o;
  o.max_resident = 24;
  partition_set ps(o);
  std::vector<positional_index> ref;
  std::vector<std::string> names;
  for (int a = 0; a < 7; ++a) names.push_back("p" + std::to_string(a));
  ps.apply(work_builder(0, names).w);
  for (int a = 0; a < 8; ++a) ref.emplace_back(o);
  uint32_t declared = 7;
  for (int step = 0; step < 5000; ++step) {
    work_builder w;
    if (step == 2500) w = work_builder(7, {""});
    if (step == 2500) declared = 8;
    const int events = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < events; ++e) {
      const uint32_t r = rng() % 10;
      if (r < 6) {
        w.store(static_cast<uint32_t>(rng() % declared), rng() % 64);
      } else {
        std::vector<uint64_t> hs{rng() % 64, rng() % 64};
        if (rng() % 3 == 0)
          w.remove(hs, std::vector<uint32_t>{static_cast<uint32_t>(rng() % 2), static_cast<uint32_t>(rng() % 2)});
        else
          w.remove(hs);
      }
    }
    const auto got = emitted(ps.apply(w.w));
    std::vector<std::vector<index_op>> want(8);
    for (size_t i = 0; i < w.w.events.size(); ++i) {
      const kv_event& ev = w.w.events[i];
      if (ev.type == event_type::stored) {
        ref[w.w.partitions[i]].stored(ev.stored, want[w.w.partitions[i]]);
        continue;
      }
      const auto& rm = ev.removed;
      const bool counts = rm.has_remaining_copies && rm.remaining_copies.size() == rm.block_hashes.size();
      for (size_t k = 0; k < rm.block_hashes.size(); ++k)
        for (uint32_t p = 0; p < 8; ++p)
          if (ref[p].contains(rm.block_hashes[k]))
            ref[p].remove_hash(rm.block_hashes[k], rm.medium, counts ? &rm.remaining_copies[k] : nullptr, want[p]);
    }
    emits expected;
    for (uint32_t p = 0; p < 8; ++p)
      for (const auto& op : want[p])
        expected[p].emplace_back(op.fingerprint, op.op == index_op::kind::evict);
    ASSERT_EQ(got, expected) << "step " << step;
    if (rng() % 200 == 0) {
      ps.clear();
      for (auto& x : ref) x.clear();
    }
    std::set<uint64_t> held;
    for (uint32_t p = 0; p < ps.size(); ++p)
      if (p != ps.home())
        ps.index(p).for_each_key([&](uint64_t k) { held.insert(k); });
    ASSERT_EQ(ps.directory_size(), held.size()) << "step " << step;
  }
  EXPECT_EQ(ps.home(), 7u);
  EXPECT_GT(ps.stats().shared_hashes, 100u);
}

}  // namespace
}  // namespace kvrelay
