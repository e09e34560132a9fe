// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// An index sized from what the engine says its cache holds (partition_set PS8) and tables
// faulted in when they are made (probe_table PT10): the pure rules, then the shard shell reading
// the scraper's capacity gauge.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <cstdio>
#include <numeric>
#include <random>

#include <unistd.h>

#include "actors/shard/partition_set.hpp"
#include "actors/shard/shard_actor.hpp"
#include "base/memory_budget.hpp"
#include "base/metrics_registry.hpp"
#include "base/probe_table.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

TEST(EngineSizing, TargetIsTheCapacityWithinAQuarterOfTheIndexRoom) {
  // No budget: the capacity.
  EXPECT_EQ(partition_set::reserve_target(1'000'000, 0, false, 0), 1'000'000u);
  // A budget: at most room / 4 / 32 blocks.
  EXPECT_EQ(partition_set::reserve_target(1'000'000, 64 * MiB, true, 0), 524'288u);
  EXPECT_EQ(partition_set::reserve_target(1'000, 64 * MiB, true, 0), 1'000u);
  EXPECT_EQ(partition_set::reserve_target(1'000'000, 0, true, 0), 0u) << "no room: nothing";
  // Nothing more to do at or under what was reserved; more once the engine says more.
  EXPECT_EQ(partition_set::reserve_target(1'000, 0, false, 1'000), 0u);
  EXPECT_EQ(partition_set::reserve_target(500, 0, false, 1'000), 0u);
  EXPECT_EQ(partition_set::reserve_target(2'000, 0, false, 1'000), 2'000u);
}

TEST(EngineSizing, AnAbsentOrAbsurdCapacitySizesNothing) {
  for (double c : {-1.0, 0.0, 0.5, std::nan(""), 1e300, -1e300, 0x1p40})
    EXPECT_EQ(partition_set::reserve_target(c, 64 * MiB, true, 0), 0u) << c;
  EXPECT_EQ(partition_set::reserve_target(1, 64 * MiB, true, 0), 1u);
}

shard_work declaring(std::vector<std::string> names, uint32_t first_new = 0) {
  shard_work w;
  w.epoch = 1;
  w.first_new = first_new;
  w.new_partitions = std::move(names);
  return w;
}

TEST(EngineSizing, OnlyTheBaseModelsPartitionIsReservedAndOnlyOnceDeclared) {
  partition_set ps;
  EXPECT_FALSE(ps.reserve_base(100'000)) << "nothing declared";
  ps.declare(declaring({"lora-a"}));
  EXPECT_FALSE(ps.reserve_base(100'000)) << "no base partition yet";
  const size_t lora_bytes = ps.index(0).heap_bytes();
  ps.declare(declaring({""}, 1));
  ASSERT_TRUE(ps.reserve_base(100'000));
  EXPECT_GE(ps.index(1).heap_bytes(), 100'000u * 20) << "20-byte slots for every block";
  EXPECT_LE(ps.index(1).heap_bytes(), 100'000u * 32);
  EXPECT_EQ(ps.index(0).heap_bytes(), lora_bytes);
}

TEST(EngineSizing, RoomMadeBeforeTheBaseIsDeclaredBecomesItsIndex) {
  partition_set ps;
  ASSERT_TRUE(ps.prepare_base(100'000)) << "a standby table while nothing is declared";
  const size_t made = ps.heap_bytes();
  EXPECT_GE(made, 100'000u * 20);
  ps.declare(declaring({"lora-a"}));
  EXPECT_LT(ps.index(0).heap_bytes(), 64u * 1024) << "an adapter's partition does not take it";
  ps.declare(declaring({""}, 1));
  EXPECT_GE(ps.index(1).heap_bytes(), 100'000u * 20) << "the base partition's index is it";
  EXPECT_LT(ps.heap_bytes(), made + 64 * 1024) << "taken over, not made twice";
  EXPECT_FALSE(ps.drop_standby()) << "nothing left standing by";
  // Once declared, prepare_base is reserve_base.
  ASSERT_TRUE(ps.prepare_base(200'000));
  EXPECT_GE(ps.index(1).heap_bytes(), 200'000u * 20);
}

TEST(EngineSizing, AStandbyOutlivesAClearAndGoesBackWhenDropped) {
  partition_set ps;
  ASSERT_TRUE(ps.prepare_base(100'000));
  const size_t made = ps.heap_bytes();
  ps.clear();
  EXPECT_EQ(ps.heap_bytes(), made) << "it holds no blocks: a clear has nothing to take";
  EXPECT_TRUE(ps.drop_standby());
  EXPECT_LT(ps.heap_bytes(), 64u * 1024);
  ps.declare(declaring({""}));
  EXPECT_LT(ps.index(0).heap_bytes(), 64u * 1024) << "a dropped standby is not taken over";
}

size_t resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

struct slot {
  uint64_t key;
  uint32_t value;
};

TEST(EngineSizing, AMappedTableIsFaultedInWhenItIsMade) {  // PT10
  probe_table<slot> t;
  const size_t before = resident_bytes();
  t.reserve(2'000'000);  // 16 arrays of ~2.4 MB, each a mapping of its own (PT6)
  const size_t after = resident_bytes();
  ASSERT_GE(t.heap_bytes(), 30 * MiB);
  // Untouched, a fresh mapping holds no page; populated, all of them.
  EXPECT_GE(after - before, t.heap_bytes() * 9 / 10);
  // And every slot is empty: the inserts find room without growing.
  const size_t cap = t.capacity();
  std::mt19937_64 rng(4);
  for (int i = 0; i < 2'000'000; ++i) t.insert(slot{rng() | 1, 0});
  EXPECT_EQ(t.capacity(), cap);
}

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

struct shard_fixture {
  testing::deterministic_system t;
  testing::recorder debouncer{t};
  pipeline_context ctx;
  shard_actor aut;
  caf::actor parent;

  // The shard charges (and publishes as kvrelay_index_bytes) its tables' bytes to a budget.
  explicit shard_fixture(uint64_t budget_bytes = 512 * MiB) {
    ctx.name = "sized-0";
    ctx.budget = memory_budget::make(budget_bytes, budget_source::config);
    parent = t.sys().spawn([this](caf::event_based_actor* self) -> caf::behavior {
      aut = spawn_shard(self, ctx, shard_options{}, debouncer.as<debouncer_actor>());
      return {[](int) {}};
    });
    t.stop_at_end(parent);
    t.run();
  }

  void send(std::vector<kv_event> events, std::vector<std::string> names = {},
            uint32_t first_new = 0, uint32_t partition = 0) {
    auto w = std::make_shared<shard_work>();
    w->epoch = epoch;
    w->events = std::move(events);
    w->partitions.assign(w->events.size(), partition);
    w->first_new = first_new;
    w->new_partitions = std::move(names);
    caf::anon_send(aut, shard_work_ptr{w});
    t.run();
  }

  // The scraper's gauge, as it sets it from the engine's /metrics.
  void engine_says(double capacity) {
    ctx.gauge("kvrelay_engine_cache_blocks", "engine blocks", {{"kind", "capacity"}}).set(capacity);
  }

  double index_bytes() const {
    return ctx.metrics->value("kvrelay_index_bytes", ctx.labels());
  }

  uint64_t epoch = 1;
};

TEST(EngineSizing, TheShardSizesItsIndexFromTheEnginesCapacityGauge) {
  shard_fixture f;
  f.send({stored(1)}, {""});
  EXPECT_LT(f.index_bytes(), 64 * 1024) << "no capacity said: it grows as blocks come";

  // The engine says it holds 200 k blocks; the shard looks at it within its look interval.
  f.engine_says(200'000);
  for (int i = 0; i < 300 && f.index_bytes() < 200'000 * 20; ++i) f.send({stored(2 + i)});
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20);
  EXPECT_LE(f.index_bytes(), 200'000.0 * 32);

  // A clear gives the arrays back (PT5), and the next look sizes the index again.
  caf::anon_send(f.aut, atom::clear_v, uint64_t{2});
  f.t.run();
  f.epoch = 2;
  EXPECT_LT(f.index_bytes(), 64 * 1024);
  f.send({stored(1000)});
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20);
}

TEST(EngineSizing, ASmallBudgetBoundsWhatIsReserved) {
  shard_fixture f(32 * MiB);
  const double room = static_cast<double>(f.ctx.budget->index_limit_bytes());
  f.engine_says(10'000'000);  // far more than the budget can hold
  f.send({stored(1)}, {""});
  EXPECT_GE(f.index_bytes(), room / 4 / 32 * 20) << "sized as far as a quarter of the room goes";
  EXPECT_LE(f.index_bytes(), room / 4);
  // What is left for the blocks themselves: the budget still takes them (IB3).
  EXPECT_TRUE(f.ctx.budget->index_room(1));
}

TEST(EngineSizing, AnotherReplicasCapacityIsNotThisShards) {
  shard_fixture f;
  f.ctx.metrics->gauge("kvrelay_engine_cache_blocks", "engine blocks",
                       {{"replica", "someone-else"}, {"kind", "capacity"}})
      .set(500'000);
  for (int i = 0; i < 300; ++i) f.send({stored(1 + i)}, i == 0 ? std::vector<std::string>{""}
                                                                : std::vector<std::string>{});
  EXPECT_LT(f.index_bytes(), 64 * 1024);
}

}  // namespace
}  // namespace kvrelay

namespace kvrelay {
namespace {

TEST(EngineSizing, TheShardSizesItsIndexWhileTheEngineIsQuiet) {
  shard_fixture f;
  // No capacity yet: the shard keeps looking, less and less often (100 ms, then 200 ms, ...).
  f.t.advance(std::chrono::milliseconds(1000));
  EXPECT_LT(f.index_bytes(), 64 * 1024);
  EXPECT_TRUE(f.t.has_timer()) << "still looking while no work came";
  f.engine_says(200'000);
  f.t.advance(std::chrono::milliseconds(100));
  EXPECT_LT(f.index_bytes(), 64 * 1024) << "the next look is 200 ms after the one before";
  f.t.advance(std::chrono::milliseconds(500));
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20) << "sized before any work";
  EXPECT_LE(f.index_bytes(), 200'000.0 * 32);
  EXPECT_FALSE(f.t.has_timer()) << "no more looks once sized";
  const double sized = f.index_bytes();
  // The first work declares the base model's partition: it takes the table made for it.
  f.send({stored(1)}, {""});
  EXPECT_LT(f.index_bytes(), sized + 64 * 1024);
  EXPECT_GE(f.index_bytes(), sized);
  for (int i = 0; i < 600; ++i) f.send({stored(2 + i)});
  EXPECT_LT(f.index_bytes(), sized + 64 * 1024) << "kept: the base partition uses it";
}

TEST(EngineSizing, AnEngineThatNeverSaysItsCapacityStopsTheQuietLooks) {
  shard_fixture f;
  int looks = 0;
  for (; looks < 100 && f.t.has_timer(); ++looks) f.t.advance(std::chrono::milliseconds(10'000));
  EXPECT_FALSE(f.t.has_timer()) << "an idle shard keeps no timer once it gave up";
  EXPECT_GE(looks, 10) << "it looked for a while first";
  EXPECT_LT(f.index_bytes(), 64 * 1024);
  // The first work's look still sizes it (PS8).
  f.engine_says(200'000);
  f.send({stored(1)}, {""});
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20);
}

TEST(EngineSizing, TheQuietLookStaysInsideASmallBudget) {
  shard_fixture f(32 * MiB);
  const double room = static_cast<double>(f.ctx.budget->index_limit_bytes());
  f.engine_says(10'000'000);  // far more than the budget can hold
  f.t.advance(std::chrono::milliseconds(100));
  EXPECT_GE(f.index_bytes(), room / 4 / 32 * 20) << "a standby as far as a quarter goes";
  EXPECT_LE(f.index_bytes(), room / 4);
  EXPECT_TRUE(f.ctx.budget->index_room(1)) << "the blocks still have room (IB3)";
}

TEST(EngineSizing, WorkBeforeTheQuietLookStopsIt) {
  shard_fixture f;
  f.engine_says(200'000);
  f.send({stored(1)}, {""});  // the first work's own look sizes it (PS8), in the data path
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20);
  const double sized = f.index_bytes();
  f.t.advance(std::chrono::milliseconds(1000));
  EXPECT_FALSE(f.t.has_timer()) << "traffic came: no quiet looks";
  EXPECT_EQ(f.index_bytes(), sized);
}

TEST(EngineSizing, AStandbyTheTrafficNeverNamesGoesBack) {
  shard_fixture f;
  f.engine_says(200'000);
  f.t.advance(std::chrono::milliseconds(100));
  ASSERT_GE(f.index_bytes(), 200'000.0 * 20) << "made while quiet, for the base model";
  // Traffic for one adapter only: a look interval later the standby is given back.
  f.send({stored(1)}, {"lora-a"});
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20) << "kept through the first look";
  for (int i = 0; i < 300; ++i) f.send({stored(2 + i)});
  EXPECT_LT(f.index_bytes(), 64 * 1024);
  // The base model's partition, declared later, is sized by the next look as before.
  f.send({stored(1000)}, {""}, 1);
  for (int i = 0; i < 300 && f.index_bytes() < 200'000 * 20; ++i)
    f.send({stored(2000 + i)}, {}, 0, 1);
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20);
}

TEST(EngineSizing, AClearKeepsAStandbyAndLooksNoMoreWhileQuiet) {
  shard_fixture f;
  f.engine_says(200'000);
  f.t.advance(std::chrono::milliseconds(100));
  ASSERT_GE(f.index_bytes(), 200'000.0 * 20);
  const double sized = f.index_bytes();
  // An engine restart before any batch: the standby holds nothing and stays.
  caf::anon_send(f.aut, atom::clear_v, uint64_t{2});
  f.t.run();
  f.epoch = 2;
  EXPECT_EQ(f.index_bytes(), sized);
  f.send({stored(1)}, {""});
  EXPECT_LT(f.index_bytes(), sized + 64 * 1024) << "taken over, not made again";
  EXPECT_GE(f.index_bytes(), sized);
}

TEST(EngineSizing, AClearAfterTrafficGivesTheTableBackUntilTheNextWork) {
  shard_fixture f;
  f.engine_says(200'000);
  f.send({stored(1)}, {""});
  ASSERT_GE(f.index_bytes(), 200'000.0 * 20);
  f.t.advance(std::chrono::milliseconds(1000));  // the start's look finds traffic: no more
  ASSERT_FALSE(f.t.has_timer());
  // A sleeping engine's clear: its table goes back (PT5) and is not made again while it sleeps.
  caf::anon_send(f.aut, atom::clear_v, uint64_t{2});
  f.t.run();
  f.epoch = 2;
  EXPECT_LT(f.index_bytes(), 64 * 1024);
  EXPECT_FALSE(f.t.has_timer());
  f.t.advance(std::chrono::milliseconds(60'000));
  EXPECT_LT(f.index_bytes(), 64 * 1024);
  f.send({stored(1000)});
  EXPECT_GE(f.index_bytes(), 200'000.0 * 20) << "the next work's look sizes it again";
}

}  // namespace
}  // namespace kvrelay
