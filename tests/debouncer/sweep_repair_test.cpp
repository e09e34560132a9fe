// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// sweep_repair's rules (actors/debouncer/sweep_repair.hpp, SR1-SR4): which adapter entries a
// base-model PREFIX_EVICTED sweeps from a server that ignores adapter_scoped, and what goes back.
#include "actors/debouncer/sweep_repair.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kvrelay::debounce {
namespace {

prefix_add add(uint64_t fp, std::string adapter, uint32_t tokens = 16, tier t = tier::t1) {
  return prefix_add{fp, tokens, t, std::move(adapter)};
}
prefix_evict evict(uint64_t fp, std::string adapter, int64_t ts_us = 0) {
  return prefix_evict{fp, std::move(adapter), ts_us};
}
emit_unit unit(std::vector<prefix_add> adds, std::vector<prefix_evict> evicts = {},
               bool clear = false) {
  emit_unit u;
  u.clear = clear;
  u.adds = std::move(adds);
  u.evicts = std::move(evicts);
  return u;
}
std::vector<std::string> restored(const emit_unit& u, uint64_t fp) {
  std::vector<std::string> out;
  for (const auto& r : u.restores)
    if (r.fingerprint == fp) out.push_back(r.adapter);
  return out;
}

TEST(SweepRepair, SR2_ABaseEvictionPutsBackEveryAdapterHoldingTheFingerprint) {
  sweep_repair r;
  auto u1 = unit({add(7, ""), add(7, "sql", 32, tier::t2), add(7, "chat"), add(8, "sql")});
  r.on_unit(u1);
  EXPECT_TRUE(u1.restores.empty()) << "nothing was evicted";
  EXPECT_EQ(r.size(), 3u) << "SR1: only adapter keys are mirrored";

  auto u2 = unit({}, {evict(7, "", 5000)});
  r.on_unit(u2);
  auto got = restored(u2, 7);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"chat", "sql"}));
  EXPECT_EQ(u2.restores.size(), 2u) << "fingerprint 8 was not swept";
  EXPECT_EQ(u2.restores_ts_us, 5000);
  for (const auto& a : u2.restores)
    if (a.adapter == "sql") {
      EXPECT_EQ(a.token_count, 32u) << "the entry goes back as it was reported";
      EXPECT_EQ(a.t, tier::t2);
    }
  EXPECT_EQ(r.stats().restored, 2u);
  EXPECT_EQ(r.size(), 3u) << "the sweep changes nothing kvrelay knows: the adapters still hold it";
}

TEST(SweepRepair, SR2_TheUnitsOwnChangesComeFirst) {
  sweep_repair r;
  auto u1 = unit({add(7, "sql"), add(7, "chat")});
  r.on_unit(u1);
  // One unit evicts the base key and sql's; adds a new adapter: what is held after the unit
  // goes back, what the unit evicts does not.
  auto u2 = unit({add(7, "code", 48)}, {evict(7, "sql"), evict(7, "")});
  r.on_unit(u2);
  auto got = restored(u2, 7);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"chat", "code"}));
}

TEST(SweepRepair, SR2_AnAdapterEvictionIsScopedAndNeedsNoRepair) {
  sweep_repair r;
  auto u1 = unit({add(7, "sql"), add(7, "chat")});
  r.on_unit(u1);
  auto u2 = unit({}, {evict(7, "sql")});
  r.on_unit(u2);
  EXPECT_TRUE(u2.restores.empty());
  EXPECT_EQ(r.size(), 1u);
}

TEST(SweepRepair, SR1_AClearForgetsEverything) {
  sweep_repair r;
  auto u1 = unit({add(7, "sql")});
  r.on_unit(u1);
  auto probe = unit({}, {}, true);
  r.on_unit(probe);
  EXPECT_EQ(r.size(), 0u);
  auto u2 = unit({}, {evict(7, "")});
  r.on_unit(u2);
  EXPECT_TRUE(u2.restores.empty()) << "after a clear the server holds nothing to put back";
  // A clear followed by a re-report in the same unit: the re-reported adapter key is mirrored.
  auto u3 = unit({add(9, "sql")}, {}, true);
  r.on_unit(u3);
  auto u4 = unit({}, {evict(9, "")});
  r.on_unit(u4);
  EXPECT_EQ(restored(u4, 9), (std::vector<std::string>{"sql"}));
}

TEST(SweepRepair, SR1_DowngradesAreMirroredWithTheirTier) {
  sweep_repair r;
  emit_unit u1;
  u1.downgrades.push_back({100, {add(7, "sql", 16, tier::t2)}});
  r.on_unit(u1);
  auto u2 = unit({}, {evict(7, "")});
  r.on_unit(u2);
  ASSERT_EQ(u2.restores.size(), 1u);
  EXPECT_EQ(u2.restores[0].t, tier::t2);
}

TEST(SweepRepair, SR4_PastItsBoundItStopsUntilTheNextClear) {
  sweep_repair r(2);
  auto u1 = unit({add(1, "a"), add(2, "a"), add(3, "a")});
  r.on_unit(u1);
  EXPECT_FALSE(r.active());
  EXPECT_EQ(r.size(), 0u) << "the mirror's memory is released";
  EXPECT_EQ(r.stats().overflows, 1u);
  auto u2 = unit({add(4, "a")}, {evict(1, "")});
  r.on_unit(u2);
  EXPECT_TRUE(u2.restores.empty()) << "off: nothing it could trust to put back";
  EXPECT_EQ(r.stats().overflows, 1u) << "counted once per episode";
  auto u3 = unit({add(5, "a")}, {}, true);
  r.on_unit(u3);
  EXPECT_TRUE(r.active());
  auto u4 = unit({}, {evict(5, "")});
  r.on_unit(u4);
  EXPECT_EQ(restored(u4, 5), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace kvrelay::debounce
