// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The shard's snapshot hooks: a partition set exported and imported into a fresh one
// holds the same blocks with the same copies and tiers, routes removals the same way (the
// directory is rebuilt), and says what it holds as upserts for the server.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "actors/shard/partition_set.hpp"
#include "durable/format/snapshot_format.hpp"

namespace kvrelay {
namespace {

medium_info parse_medium(const std::string& m) {
  return m == "CPU" ? medium_info{tier::t2, medium_id::cpu, false, {}}
                    : medium_info{tier::t1, medium_id::gpu, false, {}};
}

block_stored store(uint64_t hash, std::optional<uint64_t> parent, uint32_t first_token,
                   const char* medium = "GPU") {
  block_stored s;
  s.block_hashes.push_back(engine_hash{hash, {}});
  if (parent) s.parent = engine_hash{*parent, {}};
  for (uint32_t i = 0; i < 16; ++i) s.token_ids.push_back(first_token + i);
  s.block_size = 16;
  s.medium = parse_medium(medium);
  s.first_tainted_block = 1;  // none tainted
  return s;
}

shard_work work(std::vector<std::pair<uint32_t, kv_event>> events,
                std::vector<std::string> new_parts = {}, uint32_t first_new = 0) {
  shard_work w;
  w.epoch = 1;
  w.first_new = first_new;
  w.new_partitions = std::move(new_parts);
  for (auto& [p, e] : events) {
    w.events.push_back(std::move(e));
    w.partitions.push_back(p);
  }
  return w;
}

kv_event stored_event(block_stored s) {
  kv_event e;
  e.type = event_type::stored;
  e.stored = std::move(s);
  return e;
}

kv_event removed_event(uint64_t hash, const char* medium = "GPU") {
  kv_event e;
  e.type = event_type::removed;
  e.removed.block_hashes.push_back(engine_hash{hash, {}});
  e.removed.medium = parse_medium(medium);
  return e;
}

// (partition, fingerprint) → (tokens, warmest tier), from resident blocks.
std::map<std::pair<uint32_t, uint64_t>, std::pair<uint32_t, tier>> view(const partition_set& p) {
  std::map<std::pair<uint32_t, uint64_t>, std::pair<uint32_t, tier>> v;
  p.for_each_resident([&](uint32_t part, uint64_t fp, uint32_t tokens, tier t) {
    v[{part, fp}] = {tokens, t};
  });
  return v;
}

TEST(IndexImage, ExportImportHoldsTheSameBlocksAndRoutesRemovalsTheSame) {
  partition_set a;
  // Partition 0: a LoRA adapter (home until the base model's appears), 1: the base model.
  a.apply(work({{0, stored_event(store(10, std::nullopt, 100))},
                {0, stored_event(store(11, 10, 200))},
                {1, stored_event(store(20, std::nullopt, 300))},
                {1, stored_event(store(20, std::nullopt, 300))},  // a second copy (IX1)
                {1, stored_event(store(20, std::nullopt, 300, "CPU"))}},
               {"sql-lora", ""}));
  std::vector<snapshot::partition_image> images;
  a.export_partitions(images);
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].adapter, "sql-lora");
  EXPECT_EQ(images[1].adapter, "");

  partition_set b;
  EXPECT_EQ(b.import_partitions(images), 3u) << "every remembered block taken";
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(b.home(), a.home()) << "the base model's partition is home again";
  EXPECT_EQ(b.directory_size(), a.directory_size());
  EXPECT_EQ(view(b), view(a));
  // The server learns them by a walk (PS7), which finds exactly the resident blocks.
  partition_set::walk_position at;
  std::vector<partition_set::result> chunk;
  ASSERT_TRUE(b.walk(at, 1000, chunk).done);
  size_t upserts = 0;
  for (const auto& r : chunk)
    for (const auto& op : r.ops) {
      EXPECT_EQ(op.op, index_op::kind::upsert);
      ++upserts;
    }
  EXPECT_EQ(upserts, 3u);
  // Copies survived: the first GPU removal of 20 leaves a copy, the second downgrades to CPU.
  for (partition_set* s : {&a, &b}) {
    auto r1 = s->apply(work({{0, removed_event(20)}}));
    EXPECT_TRUE(r1.empty() || r1.front().ops.empty()) << "a copy is left";
    auto r2 = s->apply(work({{0, removed_event(20)}}));
    ASSERT_EQ(r2.size(), 1u);
    ASSERT_EQ(r2.front().ops.size(), 1u);
    EXPECT_EQ(r2.front().ops.front().t, tier::t2) << "downgraded to the CPU copy";
    // A removal of the adapter's block is routed through the rebuilt directory.
    auto r3 = s->apply(work({{0, removed_event(11)}}));
    ASSERT_EQ(r3.size(), 1u);
    EXPECT_EQ(r3.front().partition, 0u);
    EXPECT_EQ(r3.front().ops.front().op, index_op::kind::evict);
  }
  EXPECT_EQ(view(b), view(a));
}

TEST(IndexImage, ImportIntoANonEmptySetDoesNothing) {
  partition_set a;
  a.apply(work({{0, stored_event(store(1, std::nullopt, 1))}}, {""}));
  std::vector<snapshot::partition_image> images;
  a.export_partitions(images);
  EXPECT_EQ(a.import_partitions(images), 0u);
  EXPECT_EQ(a.size(), 1u);
}

TEST(IndexImage, ImportStopsAtTheResidentCap) {
  partition_set a;
  std::vector<std::pair<uint32_t, kv_event>> evs;
  for (uint64_t h = 1; h <= 10; ++h) evs.push_back({0, stored_event(store(h, std::nullopt, 16 * h))});
  a.apply(work(std::move(evs), {""}));
  std::vector<snapshot::partition_image> images;
  a.export_partitions(images);
  index_options capped;
  capped.max_resident = 4;
  partition_set b(capped);
  EXPECT_EQ(b.import_partitions(images), 4u) << "only what it holds is taken";
  EXPECT_EQ(b.index(0).size(), 4u);
}

}  // namespace
}  // namespace kvrelay
