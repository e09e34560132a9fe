// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The debouncer's coalescing rules: final state per (adapter, fingerprint), clear supersedes,
// L2 downgrades keep their eviction time, the bound turns into a resync.
#include "actors/debouncer/pending_set.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace kvrelay {
namespace {

shard_ops ops(std::string adapter, std::vector<prefix_op> v, int64_t ts_us = 0,
              bool had_store = true) {
  shard_ops o;
  o.adapter = std::move(adapter);
  o.ops = std::move(v);
  o.ts_us = ts_us;
  o.had_store = had_store;
  return o;
}
prefix_op up(uint64_t fp, uint32_t tokens = 16, tier t = tier::t1) {
  return prefix_op{prefix_op::kind::upsert, fp, tokens, t};
}
prefix_op ev(uint64_t fp) { return prefix_op{prefix_op::kind::evict, fp, 0, tier::t1}; }

TEST(PendingSet, CoalescesToFinalStatePerKey) {
  pending_set p;
  p.apply(ops("", {up(1), up(2), up(1, 32, tier::t2)}, 100));
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.pending_adds(), 2u);
  auto u = p.take(7);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->id, 7u);
  ASSERT_EQ(u->adds.size(), 2u);
  for (const auto& a : u->adds)
    if (a.fingerprint == 1) {
      EXPECT_EQ(a.token_count, 32u);
      EXPECT_EQ(a.t, tier::t2);
    }
  EXPECT_EQ(u->adds_ts_us, 100);
  EXPECT_TRUE(p.empty());
  EXPECT_FALSE(p.take(8));
}

TEST(PendingSet, EvictAfterAddLeavesOnlyTheEviction) {
  pending_set p;
  p.apply(ops("", {up(1)}, 5));
  p.apply(ops("", {ev(1)}, 9, false));
  EXPECT_EQ(p.pending_adds(), 0u);
  EXPECT_EQ(p.pending_removals(), 1u);
  auto u = p.take(1);
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->adds.empty());
  ASSERT_EQ(u->evicts.size(), 1u);
  EXPECT_EQ(u->evicts[0].fingerprint, 1u);
  EXPECT_EQ(u->evicts[0].ts_us, 9);
}

TEST(PendingSet, ReAddAfterEvictIsAnAdd) {
  pending_set p;
  p.apply(ops("a", {ev(1)}, 1, false));
  p.apply(ops("a", {up(1)}, 2));
  auto u = p.take(1);
  ASSERT_EQ(u->adds.size(), 1u);
  EXPECT_TRUE(u->evicts.empty());
  EXPECT_EQ(u->adds[0].adapter, "a");
}

TEST(PendingSet, AdaptersArePartitionsOfTheKey) {  // A05: same fingerprint, two partitions
  pending_set p;
  p.apply(ops("", {up(1)}));
  p.apply(ops("sql-lora", {up(1)}));
  p.apply(ops("sql-lora", {ev(1)}));
  auto u = p.take(1);
  ASSERT_EQ(u->adds.size(), 1u);
  EXPECT_EQ(u->adds[0].adapter, "");
  ASSERT_EQ(u->evicts.size(), 1u);
  EXPECT_EQ(u->evicts[0].adapter, "sql-lora");
}

TEST(PendingSet, ClearSupersedesPendingAndComesFirst) {  // R06
  pending_set p;
  p.apply(ops("", {up(1), up(2)}, 10));
  p.clear(20);
  EXPECT_EQ(p.size(), 0u);
  EXPECT_FALSE(p.empty());
  p.apply(ops("", {up(3)}, 30));
  auto u = p.take(1);
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->clear);
  EXPECT_EQ(u->clear_ts_us, 20);
  ASSERT_EQ(u->adds.size(), 1u);
  EXPECT_EQ(u->adds[0].fingerprint, 3u);
  EXPECT_EQ(u->adds_ts_us, 30);
  auto v = p.take(2);
  EXPECT_FALSE(v);
}

TEST(PendingSet, L2ModeTurnsEvictionsIntoDowngradesWithTheirTime) {  // L02, L03, L08
  pending_set p(pending_set::options{true, 1000, 16384});
  p.apply(ops("", {up(1, 48)}, 100'000'000));
  auto first = p.take(1);
  ASSERT_EQ(first->adds.size(), 1u);
  p.apply(ops("", {prefix_op{prefix_op::kind::evict, 1, 48, tier::t1}}, 200'000'000, false));
  p.apply(ops("", {up(2)}, 300'000'000));
  auto u = p.take(2);
  ASSERT_EQ(u->downgrades.size(), 1u);
  EXPECT_EQ(u->downgrades[0].ts_us, 200'000'000);
  ASSERT_EQ(u->downgrades[0].entries.size(), 1u);
  EXPECT_EQ(u->downgrades[0].entries[0].t, tier::t2);
  EXPECT_EQ(u->downgrades[0].entries[0].token_count, 48u);
  EXPECT_TRUE(u->evicts.empty());
  ASSERT_EQ(u->adds.size(), 1u);
  EXPECT_EQ(u->adds_ts_us, 300'000'000);
}

TEST(PendingSet, AddTimestampIsTheLatestStoreAndResetsOnFlush) {  // R12
  pending_set p;
  p.apply(ops("", {up(1)}, 300));
  p.apply(ops("", {up(2)}, 200));
  p.apply(ops("", {}, 400, true));  // a store that produced no entries still counts
  auto u = p.take(1);
  EXPECT_EQ(u->adds_ts_us, 400);
  p.apply(ops("", {up(3)}, 0));
  EXPECT_EQ(p.take(2)->adds_ts_us, 0);
}

TEST(PendingSet, OverTheBoundItShedsItsAddsAndKeepsEvictions) {
  pending_set p(pending_set::options{false, 3, 16384});
  using r = pending_set::apply_result;
  EXPECT_EQ(p.apply(ops("", {up(1), ev(7), up(3)})), r::ok);
  EXPECT_EQ(p.apply(ops("", {up(4)})), r::shed_adds) << "adds are copies of the index";
  EXPECT_EQ(p.size(), 1u) << "the eviction stays";
  EXPECT_EQ(p.pending_adds(), 0u);
  EXPECT_EQ(p.drops().shed, 3u);
  auto u = p.take(1);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->evicts.size(), 1u);
}

// Ten times the bound, adds on three adapters and evictions on one: every add is shed, on every
// adapter, the evictions stay, and what is left still goes out.
TEST(PendingSet, AddsTenTimesOverTheBoundAreShedOnEveryAdapter) {
  pending_set p(pending_set::options{false, 100, 16384});
  using r = pending_set::apply_result;
  std::vector<prefix_op> evictions;
  for (uint64_t i = 0; i < 40; ++i) evictions.push_back(ev(50'000 + i));
  EXPECT_EQ(p.apply(ops("", evictions, 3, false)), r::ok);
  size_t sheds = 0;
  for (const std::string adapter : {"", "a", "b"}) {
    std::vector<prefix_op> v;
    for (uint64_t i = 0; i < 320; ++i) v.push_back(up(i));
    for (size_t off = 0; off < v.size(); off += 40) {
      const r res =
          p.apply(ops(adapter, std::vector<prefix_op>(v.begin() + off, v.begin() + off + 40)));
      ASSERT_NE(res, r::full) << "adds alone never hold the readers";
      sheds += res == r::shed_adds;
      EXPECT_LE(p.size(), 100u) << adapter << " " << off;
    }
  }
  EXPECT_EQ(sheds, 12u) << "40 evictions + 80 adds fit; the next 40 adds shed them all";
  EXPECT_EQ(p.pending_removals(), 40u);
  EXPECT_EQ(p.drops().shed + p.pending_adds(), 3u * 320);
  EXPECT_GE(p.drops().shed, 3u * 320 - 60);
  size_t evicted = 0, added = 0;
  while (auto u = p.take(evicted + added + 1)) {
    evicted += u->evicts.size();
    added += u->adds.size();
  }
  EXPECT_EQ(evicted, 40u);
  EXPECT_EQ(added + p.drops().shed, 3u * 320);
}

TEST(PendingSet, EvictionsAloneOverTheBoundAreKeptAndSaidFull) {
  pending_set p(pending_set::options{false, 3, 16384});
  using r = pending_set::apply_result;
  EXPECT_EQ(p.apply(ops("", {ev(1), ev(2), up(5)})), r::ok);
  const size_t small = p.heap_bytes();
  EXPECT_EQ(p.apply(ops("", {ev(3), ev(4)})), r::full) << "an eviction cannot be re-derived";
  EXPECT_EQ(p.size(), 4u) << "every eviction kept, the add shed";
  EXPECT_EQ(p.apply(ops("", {ev(6), ev(7), ev(8), ev(9)})), r::full);
  EXPECT_EQ(p.size(), 8u);
  EXPECT_GT(p.heap_bytes(), small) << "what it holds is charged to the memory budget";
}

TEST(PendingSet, AKeyAWalkSentIsNoLongerFreshAndCountsAsReported) {
  pending_set p(pending_set::options{false, 100, 16384});
  auto o = ops("", {up(1)});
  o.ops[0].introduces = true;
  p.apply(o);
  p.note_sent("", {up(1)});  // a walk read the index after the add: the server may hold 1
  p.apply(ops("", {ev(1)}));
  auto u = p.take(1);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->evicts.size(), 1u) << "the eviction must go: the walk's chunk carried 1";
  EXPECT_EQ(p.drops().unsent_pairs, 0u);
}

TEST(PendingSet, UnitsAreCappedInAddsAndTheRestFollows) {
  pending_set p(pending_set::options{false, 1000, 2});
  p.apply(ops("", {up(1), up(2), up(3), ev(9)}));
  auto a = p.take(1);
  EXPECT_EQ(a->adds.size(), 2u);
  EXPECT_EQ(a->evicts.size(), 1u);
  auto b = p.take(2);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->adds.size(), 1u);
  EXPECT_TRUE(p.empty());
}

prefix_op intro(uint64_t fp) {
  prefix_op o = up(fp);
  o.introduces = true;
  return o;
}

TEST(PendingSet, AFreshAddAndItsEvictionVanishTogether) {
  pending_set p;
  p.apply(ops("", {intro(1), up(1, 32, tier::t2)}));  // a tier change keeps it fresh
  p.apply(ops("", {ev(1)}, 9, false));
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.drops().unsent_pairs, 1u);
  EXPECT_FALSE(p.take(1));
}

TEST(PendingSet, AnAddTakenIsNoLongerFresh) {
  pending_set p;
  p.apply(ops("", {intro(1)}));
  ASSERT_TRUE(p.take(1));
  p.apply(ops("", {ev(1)}, 9, false));
  auto u = p.take(2);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->evicts.size(), 1u);
}

TEST(PendingSet, L2DowngradesAreNeverDropped) {
  pending_set p(pending_set::options{true, 1000, 16384});
  p.apply(ops("", {intro(1)}));
  p.apply(ops("", {prefix_op{prefix_op::kind::evict, 1, 16, tier::t1}}, 5, false));
  auto u = p.take(1);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->downgrades.size(), 1u);
  EXPECT_EQ(p.drops().unsent_pairs, 0u);
}

TEST(PendingSet, TrackingDropsEvictionsOfKeysNotSentSinceTheClear) {
  pending_set p;
  p.apply(ops("", {ev(7)}, 1, false));
  p.apply(ops("", {up(8)}));
  p.drop_for_resync();
  EXPECT_TRUE(p.empty()) << "the re-report brings the truth";
  EXPECT_EQ(p.drops().superseded, 2u);
  EXPECT_TRUE(p.tracking());
  p.apply(ops("", {ev(1)}, 1, false));  // never re-reported
  p.apply(ops("", {up(2)}));            // re-reported, still pending: fresh
  p.apply(ops("", {ev(2)}, 1, false));
  p.apply(ops("", {up(3)}));
  EXPECT_EQ(p.drops().unreported, 1u);
  EXPECT_EQ(p.drops().unsent_pairs, 1u);
  ASSERT_TRUE(p.take(1));
  EXPECT_EQ(p.tracked(), 1u);
  p.apply(ops("", {ev(3)}, 1, false));
  auto u = p.take(2);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->evicts.size(), 1u) << "3 went out since the clear";
  EXPECT_EQ(p.tracked(), 0u);
  p.end_tracking();
  p.apply(ops("", {ev(4)}, 1, false));
  EXPECT_EQ(p.pending_removals(), 1u) << "after the window, evictions go as before";
}

TEST(PendingSet, TrackingStopsAtTheBound) {
  pending_set p(pending_set::options{false, 2, 16384});
  p.drop_for_resync();
  p.apply(ops("", {up(1), up(2)}));
  p.take(1);
  p.apply(ops("", {up(3)}));
  p.take(2);
  EXPECT_FALSE(p.tracking()) << "past the bound, tracking gives up rather than grow";
  p.apply(ops("", {ev(9)}, 1, false));
  EXPECT_EQ(p.pending_removals(), 1u);
}

// The scan of a unit stops once the cap of adds is reached and every eviction and downgrade is
// taken: what it leaves behind must still all go, each key once, evictions in the first unit.
TEST(PendingSet, AddsOverTheCapWaitForLaterUnitsWhileEvictionsAllGoNow) {
  pending_set::options o;
  o.max_adds_per_unit = 3;
  o.l2_mode = false;
  pending_set p(o);
  std::vector<prefix_op> v;
  for (uint64_t i = 0; i < 10; ++i) v.push_back(up(i));
  for (uint64_t i = 100; i < 105; ++i) v.push_back(ev(i));
  p.apply(ops("", v, 7));
  std::set<uint64_t> added;
  size_t units = 0;
  while (auto u = p.take(units + 1)) {
    EXPECT_LE(u->adds.size(), 3u);
    EXPECT_EQ(u->evicts.size(), units == 0 ? 5u : 0u) << "unit " << units;
    for (const auto& a : u->adds) EXPECT_TRUE(added.insert(a.fingerprint).second) << a.fingerprint;
    ++units;
  }
  EXPECT_EQ(units, 4u);
  EXPECT_EQ(added.size(), 10u);
  EXPECT_TRUE(p.empty());
}

// One adapter's backlog past the cap must not hold the others' adds back for its whole length,
// whether the adds are in maps or (they introduce their keys) in logs.
TEST(PendingSet, CappedUnitsTakeTheAdaptersInTurn) {
  for (bool introduce : {false, true}) {
    SCOPED_TRACE(introduce ? "logs" : "maps");
    pending_set::options o;
    o.max_adds_per_unit = 2;
    pending_set p(o);
    const auto add = [&](uint64_t fp) {
      prefix_op op = up(fp);
      op.introduces = introduce;
      return op;
    };
    std::vector<prefix_op> v;
    for (uint64_t i = 0; i < 10; ++i) v.push_back(add(i));
    p.apply(ops("a", v));
    p.apply(ops("b", {add(100)}));
    p.apply(ops("c", {add(200)}));
    std::vector<std::string> order;
    while (auto u = p.take(order.size() + 1)) {
      ASSERT_LE(u->adds.size(), 2u);
      for (const auto& a : u->adds) order.push_back(a.adapter);
    }
    ASSERT_EQ(order.size(), 12u);
    const auto at = [&](const std::string& name) {
      return std::find(order.begin(), order.end(), name) - order.begin();
    };
    EXPECT_LT(at("b"), 4) << "b's add goes in the second unit, not after a's ten";
    EXPECT_LT(at("c"), 4);
  }
}

// A capped take starts where the one before it stopped (where it starts is a matter of cost: a
// backlog's takes each walked the slots emptied before them); what comes out must not change: the
// whole backlog, each pending add once, while adds, re-adds of taken keys and evictions arrive
// between the takes.
TEST(PendingSet, CappedTakesMissNothingWhileTheBacklogChangesBetweenThem) {
  constexpr size_t cap = 7;
  pending_set::options o;
  o.max_adds_per_unit = cap;
  pending_set p(o);
  std::map<std::string, std::set<uint64_t>> model;  // what must still come out, by adapter
  std::mt19937_64 rng(11);
  const auto add = [&](const std::string& adapter, uint64_t fp) {
    p.apply(ops(adapter, {up(fp)}));
    model[adapter].insert(fp);
  };
  const auto evict = [&](const std::string& adapter, uint64_t fp) {
    p.apply(ops(adapter, {ev(fp)}));
    model[adapter].erase(fp);
  };
  for (uint64_t fp = 1; fp <= 300; ++fp) add(fp % 4 == 0 ? "b" : "", fp);
  size_t units = 0;
  bool evicted_next = false;
  while (auto u = p.take(++units)) {
    ASSERT_LE(u->adds.size(), cap);
    std::set<std::pair<std::string, uint64_t>> in_unit;
    for (const auto& a : u->adds) {
      EXPECT_TRUE(in_unit.emplace(a.adapter, a.fingerprint).second) << "twice in one unit";
      EXPECT_EQ(model[a.adapter].erase(a.fingerprint), 1u) << a.adapter << "/" << a.fingerprint;
    }
    if (u->adds.size() < cap) {
      EXPECT_EQ(p.pending_adds(), 0u) << "unit " << units << " left adds behind";
    }
    if (units > 200) continue;  // then let it drain
    if (units % 10 == 3 && p.pending_adds() > cap) {
      // Evicted first: the add a copy's next take starts with, the key the next take goes on
      // from when the adapter it comes to has one.
      pending_set copy = p;
      auto next = copy.take(0);
      ASSERT_TRUE(next && !next->adds.empty());
      evict(next->adds.front().adapter, next->adds.front().fingerprint);
      evicted_next = true;
    }
    // Between takes: evict a few pending keys, add new ones, re-add one that went out.
    for (int k = 0; k < 3; ++k) {
      const std::string adapter = rng() % 2 ? "b" : "";
      auto& keys = model[adapter];
      if (keys.empty()) continue;
      auto it = keys.begin();
      std::advance(it, static_cast<long>(rng() % keys.size()));
      evict(adapter, *it);
    }
    add("", 1000 + units);
    if (!u->adds.empty()) add(u->adds.front().adapter, u->adds.front().fingerprint);
  }
  EXPECT_TRUE(evicted_next);
  for (const auto& [adapter, keys] : model) EXPECT_TRUE(keys.empty()) << adapter;
}

// A blast's backlog is mostly adds: what the memory budget is charged for one, and for a removal
// (which carries its batch time).
TEST(PendingSet, APendingAddIsChargedUnderTwentyBytes) {
  pending_set p;
  std::vector<prefix_op> adds, removals;
  for (uint64_t i = 0; i < 1000; ++i) {
    adds.push_back(up(i));
    removals.push_back(ev(10'000 + i));
  }
  p.apply(ops("", adds));
  EXPECT_LE(p.heap_bytes(), 1000u * 20);
  EXPECT_GE(p.heap_bytes(), 1000u * 16) << "a slot of fingerprint, token count, tier and freshness";
  const size_t with_adds = p.heap_bytes();
  p.apply(ops("", removals, 9, false));
  ASSERT_EQ(p.pending_removals(), 1000u);
  EXPECT_LE(p.heap_bytes() - with_adds, 1000u * 29);
  EXPECT_GE(p.heap_bytes() - with_adds, 1000u * 24);
}

TEST(PendingSet, ALargeSetIsReleasedWhenItEmpties) {
  pending_set::options o;
  o.shrink_above = 100;
  o.max_adds_per_unit = 1'000'000;
  pending_set p(o);
  std::vector<prefix_op> v;
  for (uint64_t i = 0; i < 1000; ++i) v.push_back(up(i));
  p.apply(ops("", v));
  EXPECT_FALSE(p.released_memory());
  ASSERT_TRUE(p.take(1));
  EXPECT_TRUE(p.released_memory());
  EXPECT_FALSE(p.released_memory()) << "once";
  p.apply(ops("", {up(1)}));
  p.take(2);
  EXPECT_FALSE(p.released_memory()) << "a small set is kept";
}

TEST(PendingSet, WhileAClearIsPendingNothingStoredAfterItNeedsEvicting) {
  pending_set p;
  p.clear(5);
  p.apply(ops("", {up(1), up(2)}));
  p.apply(ops("", {ev(1), ev(3)}, 9, false));
  auto u = p.take(1);
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->clear);
  ASSERT_EQ(u->adds.size(), 1u);
  EXPECT_EQ(u->adds[0].fingerprint, 2u);
  EXPECT_TRUE(u->evicts.empty()) << "the server holds neither 1 nor 3 after the clear";
  p.apply(ops("", {ev(2)}, 9, false));
  ASSERT_TRUE(p.take(2)) << "2 went out with the clear: its eviction follows";
}

// ---- Adds that introduce their key, logged in arrival order ----

std::vector<uint64_t> fps_of(const std::vector<prefix_add>& adds) {
  std::vector<uint64_t> v;
  for (const auto& a : adds) v.push_back(a.fingerprint);
  return v;
}

TEST(PendingSet, AddsThatIntroduceTheirKeysGoOutInArrivalOrder) {
  pending_set p;
  p.apply(ops("", {intro(5), intro(3), intro(9)}));
  p.apply(ops("", {intro(1)}));
  EXPECT_EQ(p.pending_adds(), 4u);
  auto u = p.take(1);
  ASSERT_TRUE(u);
  EXPECT_EQ(fps_of(u->adds), (std::vector<uint64_t>{5, 3, 9, 1}));
  EXPECT_TRUE(p.empty());
}

TEST(PendingSet, ALoggedAddAndItsEvictionVanishTogether) {
  pending_set p;
  p.apply(ops("", {intro(1), intro(2), intro(3)}));
  p.apply(ops("", {ev(2)}, 9, false));
  EXPECT_EQ(p.pending_adds(), 2u);
  EXPECT_EQ(p.pending_removals(), 0u);
  EXPECT_EQ(p.drops().unsent_pairs, 1u);
  auto u = p.take(1);
  ASSERT_TRUE(u);
  auto got = fps_of(u->adds);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(u->evicts.empty());
}

TEST(PendingSet, ALoggedAddReplacesAPendingEvictionAndIsNotFresh) {
  pending_set p;
  p.apply(ops("", {intro(1)}));
  ASSERT_TRUE(p.take(1));  // the server holds 1
  p.apply(ops("", {ev(1)}, 5, false));
  ASSERT_EQ(p.pending_removals(), 1u);
  p.apply(ops("", {intro(1)}));  // stored again before the eviction went
  EXPECT_EQ(p.pending_removals(), 0u);
  EXPECT_EQ(p.pending_adds(), 1u);
  p.apply(ops("", {ev(1)}, 9, false));
  auto u = p.take(2);
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->adds.empty());
  ASSERT_EQ(u->evicts.size(), 1u) << "the server may hold 1: its eviction must go";
  EXPECT_EQ(u->evicts[0].ts_us, 9);
  EXPECT_EQ(p.drops().unsent_pairs, 0u);
}

TEST(PendingSet, OneFingerprintLoggedTwiceIsOneAddOnceALookupComes) {
  // Two engine hashes with one fingerprint (one prefix under two cache salts) each introduce it.
  pending_set p;
  p.apply(ops("", {intro(7), intro(8)}));
  prefix_op again = intro(7);
  again.t = tier::t2;
  p.apply(ops("", {again}));
  EXPECT_EQ(p.pending_adds(), 3u) << "appended without a lookup";
  p.apply(ops("", {ev(9)}, 4, false));  // a lookup: the log becomes the map
  EXPECT_EQ(p.pending_adds(), 2u);
  auto u = p.take(1);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->adds.size(), 2u);
  for (const auto& a : u->adds) {
    if (a.fingerprint == 7) {
      EXPECT_EQ(a.t, tier::t2) << "the latest tier";
    }
  }
  ASSERT_EQ(u->evicts.size(), 1u);

  pending_set q;  // no lookup before the take: the same upsert goes twice
  q.apply(ops("", {intro(7), again}));
  auto v = q.take(1);
  ASSERT_TRUE(v);
  EXPECT_EQ(fps_of(v->adds), (std::vector<uint64_t>{7, 7}));
  EXPECT_TRUE(q.empty());
}

TEST(PendingSet, ALogTenTimesTheUnitCapGoesOutInOrderWhileItKeepsGrowing) {
  constexpr size_t cap = 16;
  pending_set::options o;
  o.max_adds_per_unit = cap;
  pending_set p(o);
  std::vector<uint64_t> sent_order;
  std::vector<uint64_t> expected;
  uint64_t next = 1;
  const auto add = [&](size_t n) {
    std::vector<prefix_op> v;
    for (size_t i = 0; i < n; ++i) {
      v.push_back(intro(next));
      expected.push_back(next++);
    }
    p.apply(ops("", v));
  };
  add(10 * cap);
  uint64_t id = 0;
  while (auto u = p.take(++id)) {
    ASSERT_LE(u->adds.size(), cap);
    for (auto fp : fps_of(u->adds)) sent_order.push_back(fp);
    if (id <= 100) add(cap);  // a stream that never lets the log empty
    EXPECT_EQ(p.pending_adds(), expected.size() - sent_order.size());
    // What went out is dropped as it goes: the array stays within a few times the most ever
    // pending (11 caps), not all the stream ever logged (110 caps).
    EXPECT_LE(p.allocated_bytes(), 4 * 11 * cap * 16) << "take " << id;
  }
  EXPECT_EQ(sent_order, expected) << "every add once, in the order it came";
  EXPECT_GT(id, 10u);
}

TEST(PendingSet, LoggedAddsTenTimesOverTheBoundAreShed) {
  pending_set p(pending_set::options{false, 100, 16384});
  std::vector<prefix_op> v;
  for (uint64_t i = 0; i < 1000; ++i) v.push_back(intro(i));
  EXPECT_EQ(p.apply(ops("", v)), pending_set::apply_result::shed_adds);
  EXPECT_EQ(p.pending_adds(), 0u);
  EXPECT_EQ(p.drops().shed, 1000u);
  EXPECT_FALSE(p.take(1));
  p.apply(ops("", {intro(5000)}));
  auto u = p.take(2);
  ASSERT_TRUE(u);
  EXPECT_EQ(fps_of(u->adds), (std::vector<uint64_t>{5000})) << "nothing shed comes back";
  EXPECT_TRUE(p.empty());
}

TEST(PendingSet, ALargeLogIsReleasedWhenItEmptiesOrMovesIntoTheMap) {
  pending_set::options o;
  o.shrink_above = 100;
  o.max_adds_per_unit = 300;
  pending_set p(o);
  std::vector<prefix_op> v;
  for (uint64_t i = 0; i < 1000; ++i) v.push_back(intro(i));
  p.apply(ops("", v));
  EXPECT_GE(p.allocated_bytes(), 1000u * 16);
  EXPECT_GE(p.heap_bytes(), 1000u * 16) << "the log's array is charged";
  for (uint64_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(p.take(id));
    EXPECT_FALSE(p.released_memory()) << "not while adds are left";
  }
  EXPECT_GE(p.heap_bytes(), 100u * 16) << "what went out of the log is charged until dropped";
  ASSERT_TRUE(p.take(4));
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.heap_bytes(), 0u);
  EXPECT_TRUE(p.released_memory());
  EXPECT_LT(p.allocated_bytes(), 1000u) << "the log's array went back";

  // A burst's log moved into the map by a lookup is not kept beside it: what is allocated then
  // is what a set that never logs holds for the same adds.
  o.log_adds = false;
  pending_set q(o);
  for (pending_set* s : {&p, &q}) {
    s->apply(ops("", v));
    s->apply(ops("", {ev(5)}, 9, false));
    EXPECT_EQ(s->pending_adds(), 999u);
  }
  EXPECT_LE(p.allocated_bytes(), q.allocated_bytes()) << "the map's slots, not the log's too";
}

TEST(PendingSet, WhileTrackingALoggedAddTakenCountsAsReported) {
  pending_set p;
  p.drop_for_resync();
  p.apply(ops("", {intro(1), intro(2)}));
  ASSERT_TRUE(p.take(1));
  EXPECT_EQ(p.tracked(), 2u);
  p.apply(ops("", {ev(1), ev(3)}, 5, false));
  auto u = p.take(2);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->evicts.size(), 1u) << "1 went out since the clear, 3 did not";
  EXPECT_EQ(u->evicts[0].fingerprint, 1u);
  EXPECT_EQ(p.drops().unreported, 1u);
}

TEST(PendingSet, AResyncSupersedesALog) {
  pending_set p;
  p.apply(ops("", {intro(1), intro(2), intro(3)}));
  p.drop_for_resync();
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.drops().superseded, 3u);
  EXPECT_FALSE(p.take(1));
  p.apply(ops("", {intro(4)}));
  auto u = p.take(2);
  ASSERT_TRUE(u);
  EXPECT_EQ(fps_of(u->adds), (std::vector<uint64_t>{4}));
}

// A blast's size: a million adds logged on two adapters, a lookup that moves one adapter's
// ~800 k into its map, then every unit taken. Nothing is lost or sent twice; the arrays go back.
TEST(PendingSet, AMillionLoggedAddsMoveIntoTheMapAndAllGoOut) {
  constexpr uint64_t total = 1'000'000, per_batch = 370;
  pending_set p;
  for (uint64_t first = 1; first <= total; first += per_batch) {
    std::vector<prefix_op> v;
    for (uint64_t fp = first; fp < std::min(total + 1, first + per_batch); ++fp)
      v.push_back(intro(fp));
    p.apply(ops((first / per_batch) % 5 == 0 ? "lora-a" : "", v));  // a fifth on the adapter
  }
  ASSERT_EQ(p.pending_adds(), total);
  p.apply(ops("", {ev(400)}, 9, false));  // the base model's, still logged: a fresh pair
  EXPECT_EQ(p.pending_adds(), total - 1);
  EXPECT_EQ(p.drops().unsent_pairs, 1u);
  std::vector<char> seen(total + 1, 0);
  uint64_t id = 0, adds = 0;
  while (auto u = p.take(++id)) {
    ASSERT_LE(u->adds.size(), 16384u);
    for (const auto& a : u->adds) {
      ASSERT_EQ(seen[a.fingerprint], 0) << a.fingerprint << " twice";
      seen[a.fingerprint] = 1;
      ++adds;
    }
  }
  EXPECT_EQ(adds, total - 1);
  EXPECT_EQ(seen[400], 0);
  EXPECT_TRUE(p.released_memory());
  EXPECT_LT(p.allocated_bytes(), 1u << 20) << "the burst's map and log went back";
}

// The index's side of a random run, and what a server that applies every unit ends up with: after
// the last unit they are equal, whether adds are logged or not.
TEST(PendingSet, LoggedOrNotTheServerEndsWithWhatTheIndexHolds) {
  struct held {
    uint32_t tokens;
    tier t;
    bool operator==(const held& o) const { return tokens == o.tokens && t == o.t; }
  };
  using state = std::map<std::pair<std::string, uint64_t>, held>;
  for (bool log_adds : {true, false}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      SCOPED_TRACE(::testing::Message() << "log_adds " << log_adds << " seed " << seed);
      pending_set::options o;
      o.max_adds_per_unit = 5;
      o.log_adds = log_adds;
      pending_set p(o);
      std::mt19937_64 rng(seed);
      state index, server;
      const std::string adapters[] = {"", "lora-a"};
      const auto deliver = [&](const emit_unit& u) {
        if (u.clear) server.clear();
        std::set<std::pair<std::string, uint64_t>> in_unit;
        for (const auto& a : u.adds) {
          EXPECT_TRUE(in_unit.emplace(a.adapter, a.fingerprint).second) << "twice in a unit";
          server[{a.adapter, a.fingerprint}] = held{a.token_count, a.t};
        }
        for (const auto& e : u.evicts) {
          EXPECT_TRUE(in_unit.emplace(e.adapter, e.fingerprint).second) << "added and evicted";
          server.erase({e.adapter, e.fingerprint});
        }
      };
      for (int step = 0; step < 400; ++step) {
        const std::string& adapter = adapters[rng() % 2];
        const auto roll = rng() % 20;
        if (roll < 8) {  // a store: new keys introduce themselves, known ones change tier
          std::vector<prefix_op> v;
          for (int i = 0; i < 1 + static_cast<int>(rng() % 6); ++i) {
            const uint64_t fp = rng() % 40;
            auto [it, fresh] = index.try_emplace({adapter, fp}, held{static_cast<uint32_t>(16 * (1 + fp % 5)), tier::t1});
            if (fresh) {
              v.push_back(intro(fp));
              v.back().token_count = it->second.tokens;
            } else {
              it->second.t = it->second.t == tier::t1 ? tier::t2 : tier::t1;
              v.push_back(up(fp, it->second.tokens, it->second.t));
            }
          }
          p.apply(ops(adapter, v, step));
        } else if (roll < 13) {  // evictions of held keys
          std::vector<prefix_op> v;
          for (int i = 0; i < 1 + static_cast<int>(rng() % 4); ++i) {
            auto it = index.find({adapter, rng() % 40});
            if (it == index.end()) continue;
            v.push_back(ev(it->first.second));
            index.erase(it);
          }
          p.apply(ops(adapter, v, step, false));
        } else if (roll < 18) {
          if (auto u = p.take(static_cast<uint64_t>(step))) deliver(*u);
        } else if (roll < 19) {  // a walk sent some held keys as they are
          std::vector<prefix_op> v;
          for (const auto& [k, h] : index)
            if (k.first == adapter && rng() % 3 == 0) {
              v.push_back(up(k.second, h.tokens, h.t));
              server[k] = h;
            }
          p.note_sent(adapter, v);
        } else if (rng() % 4 == 0) {  // the engine cleared its cache
          index.clear();
          p.clear(step);
        }
      }
      while (auto u = p.take(1'000'000)) deliver(*u);
      EXPECT_EQ(server, index);
    }
  }
}

}  // namespace
}  // namespace kvrelay
