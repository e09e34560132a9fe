// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The shard shell under CAF's deterministic scheduler: work in, one shard_ops per touched
// partition out (epoch, batch time, store flag), clears by epoch, resync in chunks, /metrics.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <numeric>

#include "actors/shard/shard_actor.hpp"
#include "base/fingerprint.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

std::vector<uint32_t> tokens_for(uint64_t h) {
  std::vector<uint32_t> t(16);
  std::iota(t.begin(), t.end(), static_cast<uint32_t>(h * 100));
  return t;
}

kv_event stored(uint64_t h) {
  kv_event ev;
  ev.type = event_type::stored;
  ev.stored.block_hashes = {engine_hash::from_int(h)};
  ev.stored.token_ids = tokens_for(h);
  ev.stored.block_size = 16;
  ev.stored.first_tainted_block = 1;
  return ev;
}

kv_event removed(uint64_t h) {
  kv_event ev;
  ev.type = event_type::removed;
  ev.removed.block_hashes = {engine_hash::from_int(h)};
  return ev;
}

struct fixture {
  testing::deterministic_system t;
  testing::recorder debouncer{t};
  pipeline_context ctx;
  shard_actor aut;
  caf::actor parent;

  explicit fixture(index_options opts = {}) {
    ctx.name = "shard-0";
    // The shard is spawned linked to its decoder; a stand-in parent does that here.
    parent = t.sys().spawn([this, opts](caf::event_based_actor* self) -> caf::behavior {
      aut = spawn_shard(self, ctx, shard_options{opts, nullptr}, debouncer.as<debouncer_actor>());
      return {[](int) {}};
    });
    t.stop_at_end(parent);
    t.run();
  }

  void send(uint64_t epoch, std::vector<kv_event> events, std::vector<uint32_t> parts,
            uint32_t first_new = 0, std::vector<std::string> names = {}, bool replayed = false) {
    auto w = std::make_shared<shard_work>();
    w->epoch = epoch;
    w->replayed = replayed;
    w->ts = 1767225600.5;
    w->events = std::move(events);
    w->partitions = std::move(parts);
    w->first_new = first_new;
    w->new_partitions = std::move(names);
    caf::anon_send(aut, shard_work_ptr{w});
    t.run();
  }

  std::vector<shard_ops_ptr> take() {
    auto out = debouncer.all<shard_ops_ptr>();
    debouncer.clear();
    return out;
  }

  double metric(const std::string& name, label_set labels = {}) const {
    return ctx.metrics->value(name, ctx.labels(std::move(labels)));
  }
};

TEST(ShardActor, OneOpsMessagePerTouchedPartitionInFirstTouchOrder) {
  fixture f;
  f.send(1, {stored(1), stored(2), removed(1)}, {1, 0, 0}, 0, {"", "lora"});
  const auto ops = f.take();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0]->adapter, "lora");
  ASSERT_EQ(ops[0]->ops.size(), 2u) << "stored then evicted in one batch";
  EXPECT_TRUE(ops[0]->ops[0].introduces);
  EXPECT_EQ(ops[0]->ops[1].op, index_op::kind::evict);
  EXPECT_EQ(ops[1]->adapter, "");
  EXPECT_EQ(ops[1]->ops.size(), 1u);
  for (const auto& o : ops) {
    EXPECT_EQ(o->epoch, 1u);
    EXPECT_EQ(o->ts_us, 1767225600500000);
    EXPECT_TRUE(o->had_store);
    EXPECT_FALSE(o->resync);
  }
  EXPECT_EQ(f.metric("kvrelay_index_blocks_total", {{"adapter", "lora"}, {"outcome", "evicted"}}), 1);
  EXPECT_EQ(f.metric("kvrelay_resident_blocks", {{"adapter", ""}}), 1);
  EXPECT_EQ(f.metric("kvrelay_resident_blocks", {{"adapter", "lora"}}), 0);
  // A removal only: no store flag; a removal no partition holds: no message, counted.
  f.send(1, {removed(2), removed(99)}, {0, 0});
  const auto rm = f.take();
  ASSERT_EQ(rm.size(), 1u);
  EXPECT_FALSE(rm[0]->had_store);
  EXPECT_EQ(f.metric("kvrelay_removal_routing_total", {{"outcome", "unrouted"}}), 1);
}

// The debouncer holds history back (DB19): it learns what is history from the ops.
TEST(ShardActor, OpsOfReplayedWorkSayTheyAreReplayed) {
  fixture f;
  f.send(1, {stored(1), stored(2)}, {1, 0}, 0, {"", "lora"}, true);
  const auto replayed = f.take();
  ASSERT_EQ(replayed.size(), 2u);
  for (const auto& o : replayed) EXPECT_TRUE(o->replayed) << o->adapter;
  f.send(1, {removed(1), stored(3)}, {0, 0});
  const auto live = f.take();
  ASSERT_EQ(live.size(), 2u);
  for (const auto& o : live) EXPECT_FALSE(o->replayed) << o->adapter;
}

TEST(ShardActor, ClearsByEpochAndStaleWorkStillDeclaresItsPartitions) {
  fixture f;
  f.send(1, {stored(1)}, {0}, 0, {""});
  caf::anon_send(f.aut, atom::clear_v, uint64_t{3});
  f.t.run();
  f.take();
  EXPECT_EQ(f.metric("kvrelay_resident_blocks", {{"adapter", ""}}), 0);
  // Work from before the clear is dropped, but the partition it names exists from now on.
  f.send(2, {stored(5)}, {1}, 1, {"late"});
  EXPECT_TRUE(f.take().empty());
  f.send(3, {stored(6)}, {1});
  const auto ops = f.take();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]->adapter, "late");
  EXPECT_EQ(ops[0]->epoch, 3u);
  // An older clear changes nothing.
  caf::anon_send(f.aut, atom::clear_v, uint64_t{2});
  f.t.run();
  EXPECT_EQ(f.metric("kvrelay_resident_blocks", {{"adapter", "late"}}), 1);
}

TEST(ShardActor, AWalkReadsEveryPartitionInChunksFromItsCursor) {
  fixture f;
  std::vector<kv_event> evs;
  std::vector<uint32_t> parts;
  for (uint64_t h = 0; h < 1000; ++h) {
    evs.push_back(stored(h));
    parts.push_back(h < 5 ? 1 : 0);
  }
  f.send(1, std::move(evs), std::move(parts), 0, {"", "a"});
  f.take();
  // Ten times the chunk: a walk of 100 at a time, each answer's last message the cursor.
  uint32_t partition = 0;
  uint64_t key = 0;
  size_t base = 0, lora = 0, asks = 0;
  for (bool done = false; !done; ++asks) {
    ASSERT_LT(asks, 50u);
    caf::anon_send(f.aut, atom::walk_v, uint64_t{asks + 1}, partition, key, uint32_t{100});
    f.t.run();
    const auto ops = f.take();
    ASSERT_FALSE(ops.empty());
    size_t in_chunk = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      EXPECT_TRUE(ops[i]->resync);
      EXPECT_EQ(ops[i]->walk, asks + 1);
      EXPECT_EQ(ops[i]->walk_last, i + 1 == ops.size());
      in_chunk += ops[i]->ops.size();
      (ops[i]->adapter.empty() ? base : lora) += ops[i]->ops.size();
    }
    done = ops.back()->walk_done;
    if (!done) {
      EXPECT_GE(in_chunk, 100u);
    }
    EXPECT_LE(in_chunk, 200u) << "max plus a cluster";
    EXPECT_EQ(ops.back()->resident, 1000u);
    partition = ops.back()->walk_partition;
    key = ops.back()->walk_key;
  }
  EXPECT_EQ(base, 995u) << "every block once";
  EXPECT_EQ(lora, 5u);
  EXPECT_GE(asks, 10u);
}

TEST(ShardActor, DrainAnswersAfterEarlierWork) {
  fixture f;
  f.send(1, {stored(1)}, {0}, 0, {""});
  bool drained = false;
  auto client = f.t.sys().spawn([&](caf::event_based_actor* self) {
    self->request(f.aut, std::chrono::seconds(1), atom::drain_v).then([&](bool ok) {
      drained = ok;
    });
  });
  f.t.stop_at_end(client);
  f.t.run();
  EXPECT_TRUE(drained);
  EXPECT_EQ(f.take().size(), 1u);
}

}  // namespace
}  // namespace kvrelay
