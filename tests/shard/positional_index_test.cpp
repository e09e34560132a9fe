// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The reverse map: docs/spec/reference-behaviour.md §1.3 P01–P09, §1.4 A04–A05, docs/spec/design-rules.md's "beyond the
// reference" rules (unknown parent policy, tiers, taint, resident cap) and the index's own IX1–IX7
// (copies). Long because it is one table of rules, each with its own test, plus two properties.
#include "actors/shard/positional_index.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>

#include "base/fingerprint.hpp"

namespace fp = kvrelay::fingerprint;
using kvrelay::block_removed;
using kvrelay::block_stored;
using kvrelay::engine_hash;
using kvrelay::index_op;
using kvrelay::index_options;
using kvrelay::positional_index;
using kvrelay::tier;
using kvrelay::unknown_parent_policy;

namespace {

constexpr int64_t bs = 16;

std::vector<uint32_t> iota(uint32_t first, size_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<engine_hash> hashes(std::initializer_list<uint64_t> hs) {
  std::vector<engine_hash> out;
  for (uint64_t h : hs) out.push_back(engine_hash::from_int(h));
  return out;
}

engine_hash bin(const std::string& bytes) { return engine_hash{0, bytes}; }

block_stored store(std::vector<engine_hash> hs, std::vector<uint32_t> tokens,
                   std::optional<engine_hash> parent = std::nullopt, tier t = tier::t1) {
  block_stored ev;
  ev.first_tainted_block = static_cast<uint32_t>(hs.size());
  ev.block_hashes = std::move(hs);
  ev.token_ids = std::move(tokens);
  ev.block_size = bs;
  ev.parent = std::move(parent);
  ev.medium.tier = t;
  return ev;
}

block_stored store(std::initializer_list<uint64_t> hs, std::vector<uint32_t> tokens,
                   std::optional<uint64_t> parent = std::nullopt, tier t = tier::t1) {
  std::optional<engine_hash> p;
  if (parent) p = engine_hash::from_int(*parent);
  return store(hashes(hs), std::move(tokens), std::move(p), t);
}

block_removed removal(std::vector<engine_hash> hs, tier t = tier::t1) {
  block_removed ev;
  ev.block_hashes = std::move(hs);
  ev.medium.tier = t;
  return ev;
}

block_removed removal(std::initializer_list<uint64_t> hs, tier t = tier::t1) {
  return removal(hashes(hs), t);
}

index_op upsert(uint64_t f, uint32_t count, tier t = tier::t1) {
  return index_op{index_op::kind::upsert, f, count, t};
}
index_op evict(uint64_t f, uint32_t count, tier t = tier::t1) {
  return index_op{index_op::kind::evict, f, count, t};
}

}  // namespace

namespace kvrelay {
// Lets EXPECT_EQ compare and print op vectors.
bool operator==(const index_op& a, const index_op& b) {
  return std::tie(a.op, a.fingerprint, a.token_count, a.t) ==
         std::tie(b.op, b.fingerprint, b.token_count, b.t);
}
void PrintTo(const index_op& o, std::ostream* os) {
  *os << (o.op == index_op::kind::upsert ? "upsert{" : "evict{") << o.fingerprint << ", "
      << o.token_count << ", T" << static_cast<int>(o.t) << "}";
}
}  // namespace kvrelay

namespace {

// Applies one event and returns only the ops it produced.
std::vector<index_op> apply(positional_index& idx, const block_stored& ev) {
  std::vector<index_op> out;
  idx.stored(ev, out);
  return out;
}
std::vector<index_op> apply(positional_index& idx, const block_removed& ev) {
  std::vector<index_op> out;
  idx.removed(ev, out);
  return out;
}

std::vector<index_op> upserts_for(const std::vector<uint64_t>& fps, uint32_t first_count,
                                  tier t = tier::t1) {
  std::vector<index_op> out;
  uint32_t count = first_count;
  for (uint64_t f : fps) {
    out.push_back(upsert(f, count, t));
    count += static_cast<uint32_t>(bs);
  }
  return out;
}

// --- P01–P09 -------------------------------------------------------------------------------

TEST(PositionalIndex, P01SuffixEventChainsFromRememberedParent) {
  positional_index idx;
  const auto all = iota(0, 80);
  const auto roll = fp::prefixes(all, bs);
  ASSERT_EQ(roll.size(), 5u);

  auto first = apply(idx, store({10, 11, 12}, {all.begin(), all.begin() + 48}));
  auto second = apply(idx, store({13, 14}, {all.begin() + 48, all.end()}, 12));
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, upserts_for(roll, 16));
  EXPECT_EQ(first.back().token_count, 80u);
  EXPECT_EQ(idx.size(), 5u);
  EXPECT_EQ(idx.stats().stored_blocks, 5u);
}

TEST(PositionalIndex, P02FreshEventStartsWithContentHash) {
  positional_index idx;
  const auto tokens = iota(7, 32);
  const auto ops = apply(idx, store({1, 2}, tokens));
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].fingerprint, fp::content(tokens.data(), bs));
  EXPECT_EQ(ops[0].token_count, 16u);
  EXPECT_EQ(ops[1].fingerprint, fp::prefixes(tokens, bs)[1]);
}

TEST(PositionalIndex, GoldenAnchorSingleBlock) {
  // F03's anchor through the index: tokens 1..16 give 16863443419780771464.
  positional_index idx;
  EXPECT_EQ(apply(idx, store({99}, iota(1, 16))), std::vector<index_op>{upsert(16863443419780771464ull, 16)});
}

TEST(PositionalIndex, P03UnknownParentReRootsUnderRootPolicy) {
  index_options o;
  o.unknown_parent = unknown_parent_policy::root;
  positional_index idx(o);
  const auto tokens = iota(100, 32);
  EXPECT_EQ(apply(idx, store({5, 6}, tokens, 4242)), upserts_for(fp::prefixes(tokens, bs), 16));
  EXPECT_EQ(idx.stats().unknown_parent_rerooted, 1u);
  EXPECT_EQ(idx.stats().unknown_parent_dropped, 0u);
}

TEST(PositionalIndex, UnknownParentDroppedByDefaultAndDescendantsToo) {
  positional_index idx;
  EXPECT_TRUE(apply(idx, store({5, 6}, iota(100, 32), 4242)).empty());
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_EQ(idx.stats().unknown_parent_dropped, 1u);
  // The dropped blocks were never remembered, so their children are unknown-parent too.
  EXPECT_TRUE(apply(idx, store({7}, iota(132, 16), 6)).empty());
  EXPECT_EQ(idx.stats().unknown_parent_dropped, 2u);
  // And their removal is an unknown removal, not an eviction.
  EXPECT_TRUE(apply(idx, removal({5, 6})).empty());
  EXPECT_EQ(idx.stats().unknown_removals, 2u);
}

TEST(PositionalIndex, ParentZeroIsARealParent) {
  positional_index idx;
  const auto all = iota(1, 32);
  apply(idx, store({0}, {all.begin(), all.begin() + 16}));
  const auto ops = apply(idx, store({1}, {all.begin() + 16, all.end()}, 0));
  EXPECT_EQ(ops, std::vector<index_op>{upsert(fp::prefixes(all, bs)[1], 32)});
}

TEST(PositionalIndex, P04RemovalEvictsAndForgets) {
  positional_index idx;
  const auto tokens = iota(1, 16);
  apply(idx, store({77}, tokens));
  EXPECT_EQ(apply(idx, removal({77})),
            std::vector<index_op>{evict(fp::content(tokens.data(), bs), 16)});
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_TRUE(apply(idx, removal({77})).empty());
  EXPECT_EQ(idx.stats().evictions, 1u);
  EXPECT_EQ(idx.stats().unknown_removals, 1u);
}

TEST(PositionalIndex, P05ClearForgetsParents) {
  positional_index idx;
  apply(idx, store({1}, iota(0, 16)));
  idx.clear();
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_TRUE(apply(idx, store({2}, iota(16, 16), 1)).empty());  // drop policy
  EXPECT_EQ(idx.stats().clears, 1u);

  index_options o;
  o.unknown_parent = unknown_parent_policy::root;
  positional_index rooted(o);
  apply(rooted, store({1}, iota(0, 16)));
  rooted.clear();
  const auto tokens = iota(16, 16);
  EXPECT_EQ(apply(rooted, store({2}, tokens, 1)),
            std::vector<index_op>{upsert(fp::content(tokens.data(), bs), 16)});
}

TEST(PositionalIndex, P06CountMismatchChangesNothing) {
  positional_index idx;
  apply(idx, store({1}, iota(0, 16)));
  // 3 hashes but 2 full blocks: nothing, not even the known hash 1 is touched.
  EXPECT_TRUE(apply(idx, store({1, 2, 3}, iota(500, 32))).empty());
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.stats().mismatches, 1u);
  // Block 1 still has its original fingerprint: its child chains from it.
  const auto all = iota(0, 32);
  EXPECT_EQ(apply(idx, store({4}, {all.begin() + 16, all.end()}, 1)),
            std::vector<index_op>{upsert(fp::prefixes(all, bs)[1], 32)});
}

TEST(PositionalIndex, P06TrailingPartialTokensTolerated) {
  positional_index idx;
  const auto tokens = iota(100, 40);  // 2 full blocks + 8
  EXPECT_EQ(apply(idx, store({1, 2}, tokens)), upserts_for(fp::prefixes(tokens, bs), 16));
}

TEST(PositionalIndex, P07NoHashesOrBadBlockSizeGiveNothing) {
  positional_index idx;
  EXPECT_TRUE(apply(idx, store(std::vector<engine_hash>{}, iota(0, 16))).empty());
  for (int64_t b : {int64_t{0}, int64_t{-1}, INT64_MIN}) {
    auto ev = store({1}, iota(0, 16));
    ev.block_size = b;
    EXPECT_TRUE(apply(idx, ev).empty());
  }
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_EQ(idx.stats().empty_events, 4u);
}

TEST(PositionalIndex, HugeBlockSizeIsAMismatchNotACrash) {
  positional_index idx;
  auto ev = store({1, 2}, iota(0, 32));
  ev.block_size = INT64_MAX;
  EXPECT_TRUE(apply(idx, ev).empty());
  EXPECT_EQ(idx.stats().mismatches, 1u);
}

TEST(PositionalIndex, P08CountsAreCumulativeAcrossEvents) {
  positional_index idx;
  apply(idx, store({1, 2}, iota(0, 32)));
  const auto ops = apply(idx, store({3, 4, 5}, iota(32, 48), 2));
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].token_count, 48u);
  EXPECT_EQ(ops[2].token_count, 80u);
  for (const auto& o : ops) EXPECT_EQ(o.t, tier::t1);
}

TEST(PositionalIndex, P09ReStoreOverwritesAndReReports) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  const auto first = apply(idx, store({1}, tokens));
  EXPECT_EQ(apply(idx, store({1}, tokens)), first);  // same fingerprint: just re-reported
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.stats().fingerprint_changes, 0u);

  // Same engine hash, other content: the old hint is evicted, the new one reported.
  const auto other = iota(1000, 16);
  EXPECT_EQ(apply(idx, store({1}, other)),
            (std::vector<index_op>{evict(first[0].fingerprint, 16),
                                   upsert(fp::content(other.data(), bs), 16)}));
  EXPECT_EQ(idx.stats().fingerprint_changes, 1u);
  EXPECT_TRUE(apply(idx, removal({12345})).empty());
  EXPECT_EQ(idx.stats().unknown_removals, 1u);
}

// --- A04–A05: the index is per partition; adapters never enter the hash ---------------------

TEST(PositionalIndex, A04A05SameTokensInTwoPartitionsShareFingerprints) {
  positional_index base;
  positional_index lora;
  const auto tokens = iota(3, 48);
  auto plain = store({1, 2, 3}, tokens);
  auto with_lora = store({91, 92, 93}, tokens);  // a LoRA changes the engine hash, not ours
  with_lora.lora_name = "sql-lora";
  with_lora.lora_id = 1;
  const auto a = apply(base, plain);
  const auto b = apply(lora, with_lora);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, upserts_for(fp::prefixes(tokens, bs), 16));
  EXPECT_EQ(apply(lora, removal({93})), std::vector<index_op>{evict(a[2].fingerprint, 48)});
}

// --- tiers -----------------------------------------------------------------------------------

TEST(PositionalIndex, GpuRemovalWithCpuCopyDowngradesThenCpuRemovalEvicts) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  const uint64_t f = fp::content(tokens.data(), bs);
  EXPECT_EQ(apply(idx, store({1}, tokens, std::nullopt, tier::t1)),
            std::vector<index_op>{upsert(f, 16, tier::t1)});
  // CPU store of the same hash: the warmest holder is still the GPU.
  EXPECT_EQ(apply(idx, store({1}, tokens, std::nullopt, tier::t2)),
            std::vector<index_op>{upsert(f, 16, tier::t1)});
  EXPECT_EQ(apply(idx, removal({1}, tier::t1)), std::vector<index_op>{upsert(f, 16, tier::t2)});
  EXPECT_EQ(idx.stats().downgrades, 1u);
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(apply(idx, removal({1}, tier::t2)), std::vector<index_op>{evict(f, 16, tier::t2)});
  EXPECT_EQ(idx.size(), 0u);
}

TEST(PositionalIndex, ColderRemovalWithWarmerCopyEmitsNothing) {
  positional_index idx;
  apply(idx, store({1}, iota(0, 16), std::nullopt, tier::t1));
  apply(idx, store({1}, iota(0, 16), std::nullopt, tier::t3));
  EXPECT_TRUE(apply(idx, removal({1}, tier::t3)).empty());
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.stats().downgrades, 0u);
}

TEST(PositionalIndex, DiskStoreIsT3) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  EXPECT_EQ(apply(idx, store({1}, tokens, std::nullopt, tier::t3)),
            std::vector<index_op>{upsert(fp::content(tokens.data(), bs), 16, tier::t3)});
}

TEST(PositionalIndex, UnknownTierValueIsTreatedAsColdest) {
  positional_index idx;
  const auto ops = apply(idx, store({1}, iota(0, 16), std::nullopt, static_cast<tier>(9)));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].t, tier::t3);
}

TEST(PositionalIndex, RemovalFromATierNotHeldChangesNothing) {
  positional_index idx;
  apply(idx, store({1}, iota(0, 16)));
  EXPECT_TRUE(apply(idx, removal({1}, tier::t2)).empty());
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.stats().removal_tier_absent, 1u);
}

TEST(PositionalIndex, EmptyTokenStoreIsALocationUpdateForKnownHashesOnly) {
  positional_index idx;
  const auto tokens = iota(0, 32);
  const auto fps = fp::prefixes(tokens, bs);
  apply(idx, store({1, 2}, tokens));
  block_stored offload = store({1, 2, 3}, {}, std::nullopt, tier::t2);
  offload.block_size = 0;  // legacy offload events carry no usable block size
  EXPECT_TRUE(apply(idx, offload).empty());  // T1 still the warmest: nothing to say
  EXPECT_EQ(idx.stats().location_updates, 2u);
  EXPECT_EQ(idx.stats().location_unknown, 1u);
  EXPECT_EQ(idx.size(), 2u);  // hash 3 was not added
  // The CPU copy turns the GPU eviction into a downgrade.
  EXPECT_EQ(apply(idx, removal({1, 2}, tier::t1)),
            (std::vector<index_op>{upsert(fps[0], 16, tier::t2), upsert(fps[1], 32, tier::t2)}));
}

TEST(PositionalIndex, LocationUpdateAtAWarmerTierUpgrades) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  apply(idx, store({1}, tokens, std::nullopt, tier::t3));
  EXPECT_EQ(apply(idx, store({1}, {}, std::nullopt, tier::t1)),
            std::vector<index_op>{upsert(fp::content(tokens.data(), bs), 16, tier::t1)});
}

TEST(PositionalIndex, L2ModeTurnsLastGpuRemovalIntoT2AndForgets) {
  index_options o;
  o.ignore_block_removed = true;
  positional_index idx(o);
  const auto tokens = iota(0, 16);
  const uint64_t f = fp::content(tokens.data(), bs);
  apply(idx, store({1}, tokens));
  EXPECT_EQ(apply(idx, removal({1})), std::vector<index_op>{upsert(f, 16, tier::t2)});
  EXPECT_EQ(idx.size(), 0u);  // L05: the reverse map does not grow
  EXPECT_TRUE(apply(idx, removal({1})).empty());
  EXPECT_EQ(idx.stats().l2_downgrades, 1u);
  EXPECT_EQ(idx.stats().evictions, 0u);
  // A removal from a colder tier is still a real eviction.
  apply(idx, store({2}, tokens, std::nullopt, tier::t2));
  EXPECT_EQ(apply(idx, removal({2}, tier::t2)), std::vector<index_op>{evict(f, 16, tier::t2)});
}

// --- copies (IX1-IX5) ----------------------------------------------------------------------------

block_removed counted_removal(std::initializer_list<uint64_t> hs, std::vector<uint32_t> left,
                              tier t = tier::t1) {
  auto ev = removal(hs, t);
  ev.remaining_copies = std::move(left);
  ev.has_remaining_copies = true;
  return ev;
}

TEST(PositionalIndex, I1TwoCopiesNeedTwoRemovals) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  const uint64_t f = fp::content(tokens.data(), bs);
  apply(idx, store({1}, tokens));
  apply(idx, store({1}, tokens));  // vLLM recomputed the block: a second physical copy
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t1), 2u);
  EXPECT_TRUE(apply(idx, removal({1})).empty()) << "one copy is still resident";
  EXPECT_TRUE(idx.contains(engine_hash::from_int(1)));
  EXPECT_EQ(apply(idx, removal({1})), std::vector<index_op>{evict(f, 16)});
  EXPECT_FALSE(idx.contains(engine_hash::from_int(1)));
  EXPECT_EQ(idx.stats().copy_added, 1u);
  EXPECT_EQ(idx.stats().copy_removed, 1u);
}

TEST(PositionalIndex, I1CopiesAreCountedPerTier) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  const uint64_t f = fp::content(tokens.data(), bs);
  apply(idx, store({1}, tokens));
  apply(idx, store({1}, tokens));
  apply(idx, store({1}, tokens, std::nullopt, tier::t2));
  EXPECT_TRUE(apply(idx, removal({1})).empty());
  EXPECT_EQ(apply(idx, removal({1})), std::vector<index_op>{upsert(f, 16, tier::t2)})
      << "the last GPU copy went, the CPU one holds it";
  EXPECT_EQ(apply(idx, removal({1}, tier::t2)), std::vector<index_op>{evict(f, 16, tier::t2)});
}

TEST(PositionalIndex, I1LocationUpdatesCountCopiesToo) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  apply(idx, store({1}, tokens));
  auto loc = store({1}, {}, std::nullopt, tier::t2);
  apply(idx, loc);
  apply(idx, loc);
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t2), 2u);
  apply(idx, removal({1}, tier::t2));
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t2), 1u);
}

TEST(PositionalIndex, I2ReusedReannouncementRefreshesWithoutACopy) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  const uint64_t f = fp::content(tokens.data(), bs);
  apply(idx, store({1}, tokens));
  auto again = store({1}, tokens);
  again.origin = kvrelay::store_origin::reused;
  EXPECT_EQ(apply(idx, again), std::vector<index_op>{upsert(f, 16)}) << "P09: re-reported";
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t1), 1u);
  EXPECT_EQ(idx.stats().reannounced, 1u);
  EXPECT_EQ(apply(idx, removal({1})), std::vector<index_op>{evict(f, 16)});
  // NEW is a copy, like no origin at all.
  apply(idx, store({1}, tokens));
  auto fresh = store({1}, tokens);
  fresh.origin = kvrelay::store_origin::fresh;
  apply(idx, fresh);
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t1), 2u);
  // REUSED at a tier that held no copy still records that tier.
  auto reused_cpu = store({1}, tokens, std::nullopt, tier::t2);
  reused_cpu.origin = kvrelay::store_origin::reused;
  apply(idx, reused_cpu);
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t2), 1u);
  // A REUSED store of an unknown hash is simply a store.
  auto reused_new = store({9}, iota(100, 16));
  reused_new.origin = kvrelay::store_origin::reused;
  EXPECT_EQ(apply(idx, reused_new).size(), 1u);
  EXPECT_EQ(idx.copies(engine_hash::from_int(9), tier::t1), 1u);
}

TEST(PositionalIndex, I3CountsSaturateAndTheBlockGoesEarlyNeverLate) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  for (int i = 0; i < 9; ++i) apply(idx, store({1}, tokens));
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t1), positional_index::max_copies_t1);
  EXPECT_EQ(idx.stats().copies_saturated, 2u);
  for (uint32_t i = 1; i < positional_index::max_copies_t1; ++i)
    EXPECT_TRUE(apply(idx, removal({1})).empty()) << i;
  EXPECT_EQ(apply(idx, removal({1})).size(), 1u) << "evicted after 7 removals (2 copies left)";
  for (int i = 0; i < 5; ++i) apply(idx, store({2}, tokens, std::nullopt, tier::t3));
  EXPECT_EQ(idx.copies(engine_hash::from_int(2), tier::t3), positional_index::max_copies_other);
  // Neighbouring counts do not bleed into each other.
  EXPECT_EQ(idx.copies(engine_hash::from_int(2), tier::t1), 0u);
  EXPECT_EQ(idx.copies(engine_hash::from_int(2), tier::t2), 0u);
}

TEST(PositionalIndex, I4RemainingCopyCountsAreAuthoritative) {
  positional_index idx;
  const auto tokens = iota(0, 32);
  const auto fps = fp::prefixes(tokens, bs);
  apply(idx, store({1, 2}, tokens));
  // The engine says one copy of 1 is left (we had counted one): still held, count now 1.
  EXPECT_TRUE(apply(idx, counted_removal({1}, {1})).empty());
  EXPECT_TRUE(idx.contains(engine_hash::from_int(1)));
  EXPECT_EQ(apply(idx, counted_removal({1}, {0})), std::vector<index_op>{evict(fps[0], 16)});
  // Three counted copies of 2, and the engine says none is left: evicted at once.
  apply(idx, store({2}, iota(16, 16), 1));  // parent 1 is gone: dropped by the default policy
  EXPECT_EQ(idx.copies(engine_hash::from_int(2), tier::t1), 1u);
  apply(idx, store({5}, iota(200, 16)));
  apply(idx, store({5}, iota(200, 16)));
  apply(idx, store({5}, iota(200, 16)));
  EXPECT_EQ(apply(idx, counted_removal({5, 2}, {0, 0})).size(), 2u);
  EXPECT_EQ(idx.stats().authoritative_counts, 4u);
  // More copies than the bits hold: saturated, and right again when the engine says 0.
  apply(idx, store({6}, iota(300, 16)));
  apply(idx, counted_removal({6}, {40}));
  EXPECT_EQ(idx.copies(engine_hash::from_int(6), tier::t1), positional_index::max_copies_t1);
  EXPECT_EQ(apply(idx, counted_removal({6}, {0})).size(), 1u);
  // A list of the wrong length is ignored: the removal counts down.
  apply(idx, store({7}, iota(400, 16)));
  apply(idx, store({7}, iota(400, 16)));
  EXPECT_TRUE(apply(idx, counted_removal({7}, {0, 0})).empty());
  EXPECT_EQ(idx.stats().copy_counts_ignored, 1u);
  EXPECT_EQ(idx.copies(engine_hash::from_int(7), tier::t1), 1u);
}

TEST(PositionalIndex, I5ClearResetsTheCounts) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  apply(idx, store({1}, tokens));
  apply(idx, store({1}, tokens));
  idx.clear();
  apply(idx, store({1}, tokens));
  EXPECT_EQ(apply(idx, removal({1})).size(), 1u) << "one copy since the clear";
}

TEST(PositionalIndex, I6UnknownMediumIsNeverIndexed) {
  positional_index idx;
  auto ev = store({1}, iota(0, 16));
  ev.medium.id = kvrelay::medium_id::unknown;
  ev.medium.tier = tier::t3;
  EXPECT_TRUE(apply(idx, ev).empty());
  EXPECT_EQ(idx.size(), 0u);
  apply(idx, store({1}, iota(0, 16)));
  auto rm = removal({1});
  rm.medium.id = kvrelay::medium_id::unknown;
  EXPECT_TRUE(apply(idx, rm).empty());
  EXPECT_TRUE(idx.contains(engine_hash::from_int(1)));
  EXPECT_EQ(idx.stats().unknown_medium_events, 2u);
}

TEST(PositionalIndex, I7IntroducesMarksKeysNewToThePartition) {
  index_options o;
  o.unknown_parent = unknown_parent_policy::root;
  positional_index idx(o);
  const auto tokens = iota(0, 32);
  auto ops = apply(idx, store({1, 2}, tokens));
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_TRUE(ops[0].introduces && ops[1].introduces) << "new blocks";
  ops = apply(idx, store({1}, iota(0, 16)));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_FALSE(ops[0].introduces) << "a re-store under the same fingerprint";
  ops = apply(idx, store({2}, iota(16, 16), 777));  // re-rooted: another fingerprint
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].op, index_op::kind::evict);
  EXPECT_TRUE(ops[1].introduces) << "a re-store under a new fingerprint";
  // Downgrades and location upgrades only change the tier of a key already reported.
  apply(idx, store({1}, {}, std::nullopt, tier::t2));
  apply(idx, removal({1}));
  ops = apply(idx, removal({1}));  // both GPU copies gone
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].t, tier::t2);
  EXPECT_FALSE(ops[0].introduces);
  ops = apply(idx, store({1}, {}, std::nullopt, tier::t1));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_FALSE(ops[0].introduces);
  // A block remembered as tainted and indexed later is new to the server.
  auto salted = store({3}, iota(500, 16));
  salted.first_tainted_block = 0;
  EXPECT_TRUE(apply(idx, salted).empty());
  ops = apply(idx, store({3}, iota(500, 16)));
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_TRUE(ops[0].introduces);
}

TEST(PositionalIndex, ObserverSeesEveryMembershipChange) {
  struct log_observer : kvrelay::residency_observer {
    std::vector<std::pair<char, uint64_t>> log;
    void added(uint64_t k) override { log.emplace_back('+', k); }
    void forgotten(uint64_t k) override { log.emplace_back('-', k); }
  } obs;
  index_options o;
  o.max_resident = 2;
  positional_index idx(o);
  idx.set_observer(&obs);
  apply(idx, store({1, 2}, iota(0, 32)));
  apply(idx, store({1}, iota(0, 16)));  // already resident: no news
  apply(idx, store({3}, iota(100, 16)));  // over the cap: 1 goes
  apply(idx, removal({2}));
  using L = std::vector<std::pair<char, uint64_t>>;
  EXPECT_EQ(obs.log, (L{{'+', 1}, {'+', 2}, {'+', 3}, {'-', 1}, {'-', 2}}));
  std::vector<uint64_t> all;
  idx.for_each_key([&](uint64_t k) { all.push_back(k); });
  EXPECT_EQ(all, std::vector<uint64_t>{3});
}

// --- salted / multimodal / EAGLE --------------------------------------------------------------

TEST(PositionalIndex, TaintedBlocksAreRememberedButNotIndexed) {
  positional_index idx;
  const auto tokens = iota(0, 48);
  auto ev = store({1, 2, 3}, tokens);
  ev.first_tainted_block = 1;
  EXPECT_EQ(apply(idx, ev), upserts_for({fp::prefixes(tokens, bs)[0]}, 16));
  EXPECT_EQ(idx.size(), 3u);
  EXPECT_EQ(idx.stats().tainted_blocks, 2u);
  // A later event chained on a tainted block is tainted as a whole, and its blocks too.
  EXPECT_TRUE(apply(idx, store({4}, iota(48, 16), 3)).empty());
  EXPECT_TRUE(apply(idx, store({5}, iota(64, 16), 4)).empty());
  EXPECT_EQ(idx.stats().tainted_blocks, 4u);
  EXPECT_EQ(idx.stats().unknown_parent_dropped, 0u);
  // Removing tainted blocks forgets them without an eviction.
  EXPECT_TRUE(apply(idx, removal({2, 3, 4, 5})).empty());
  EXPECT_EQ(idx.size(), 1u);
}

TEST(PositionalIndex, IndexSaltedChainsThroughTaintedBlocks) {
  index_options o;
  o.index_salted = true;
  positional_index idx(o);
  const auto tokens = iota(0, 64);
  auto ev = store({1, 2, 3}, {tokens.begin(), tokens.begin() + 48});
  ev.first_tainted_block = 0;
  auto ops = apply(idx, ev);
  auto more = apply(idx, store({4}, {tokens.begin() + 48, tokens.end()}, 3));
  ops.insert(ops.end(), more.begin(), more.end());
  EXPECT_EQ(ops, upserts_for(fp::prefixes(tokens, bs), 16));
  EXPECT_EQ(idx.stats().tainted_blocks, 0u);
}

TEST(PositionalIndex, ReStoreAsTaintedEvictsTheOldHint) {
  positional_index idx;
  const auto tokens = iota(0, 16);
  apply(idx, store({1}, tokens));
  auto salted = store({1}, tokens);
  salted.first_tainted_block = 0;
  EXPECT_EQ(apply(idx, salted), std::vector<index_op>{evict(fp::content(tokens.data(), bs), 16)});
  EXPECT_TRUE(apply(idx, removal({1})).empty());
}

TEST(PositionalIndex, EagleBigramsNotIndexedByDefault) {
  positional_index idx;
  auto ev = store({1, 2}, iota(0, 64));  // 2 blocks of 16 [a, b] pairs
  ev.eagle_bigram = true;
  EXPECT_TRUE(apply(idx, ev).empty());
  EXPECT_EQ(idx.size(), 2u);
  EXPECT_EQ(idx.stats().tainted_blocks, 2u);
}

TEST(PositionalIndex, EagleBigramsIndexedOnFirstIdsWhenAllowed) {
  index_options o;
  o.index_salted = true;
  positional_index idx(o);
  const auto seq = iota(500, 33);  // the token sequence; pairs are (t[i], t[i+1])
  block_stored ev = store({1, 2}, {});
  for (size_t i = 0; i < 32; ++i) {
    ev.token_ids.push_back(seq[i]);
    ev.token_ids.push_back(seq[i + 1]);
  }
  ev.eagle_bigram = true;
  EXPECT_EQ(apply(idx, ev),
            upserts_for(fp::prefixes({seq.begin(), seq.begin() + 32}, bs), 16));
}

TEST(PositionalIndex, EagleCountMismatchUsesPairs) {
  positional_index idx;
  auto ev = store({1, 2}, iota(0, 32));  // 32 ids = 16 pairs = 1 block, not 2
  ev.eagle_bigram = true;
  EXPECT_TRUE(apply(idx, ev).empty());
  EXPECT_EQ(idx.stats().mismatches, 1u);
  EXPECT_EQ(idx.size(), 0u);
}

// --- engine hash forms ----------------------------------------------------------------------

TEST(PositionalIndex, BinHashesChainAndEvict) {
  positional_index idx;
  const auto all = iota(0, 48);
  const auto roll = fp::prefixes(all, bs);
  const std::string h1(32, '\x01'), h2(16, '\x02');
  auto ops = apply(idx, store({bin(h1), bin(h2)}, {all.begin(), all.begin() + 32}));
  // An int child of a bin parent, and an int hash equal to nothing in the bin map.
  auto more = apply(idx, store(hashes({7}), {all.begin() + 32, all.end()}, bin(h2)));
  ops.insert(ops.end(), more.begin(), more.end());
  EXPECT_EQ(ops, upserts_for(roll, 16));
  EXPECT_EQ(idx.size(), 3u);
  EXPECT_EQ(apply(idx, removal({bin(h2)})), std::vector<index_op>{evict(roll[1], 32)});
  EXPECT_TRUE(apply(idx, removal({bin(std::string(16, '\x03'))})).empty());
  EXPECT_EQ(idx.stats().unknown_removals, 1u);
}

TEST(PositionalIndex, IntAndBinHashesAreDistinctKeys) {
  positional_index idx;
  apply(idx, store(hashes({0}), iota(0, 16)));
  // A bin hash is never confused with the int hash 0.
  EXPECT_TRUE(apply(idx, removal({bin(std::string(8, '\0'))})).empty());
  EXPECT_EQ(idx.size(), 1u);
}

// --- limits ------------------------------------------------------------------------------------

TEST(PositionalIndex, CumulativeCountAboveLimitIsRejected) {
  positional_index idx;
  const int64_t big = int64_t{1} << 16;  // 256 chained blocks reach 2^24 tokens
  const auto tokens = iota(0, static_cast<size_t>(big));
  std::vector<index_op> out;
  for (uint64_t h = 1; h <= 255; ++h) {
    auto ev = store({h}, tokens, h == 1 ? std::nullopt : std::optional<uint64_t>(h - 1));
    ev.block_size = big;
    idx.stored(ev, out);
  }
  ASSERT_EQ(out.size(), 255u);
  EXPECT_EQ(out.back().token_count, 255u << 16);
  EXPECT_EQ(positional_index::max_token_count, (1u << 24) - 1);
  auto last = store({256}, tokens, 255);
  last.block_size = big;
  EXPECT_TRUE(apply(idx, last).empty());
  EXPECT_EQ(idx.stats().token_overflow, 1u);
  EXPECT_EQ(idx.size(), 255u);
}

TEST(PositionalIndex, CapEvictsOldestFirstStoreFirst) {
  index_options o;
  o.max_resident = 4;
  positional_index idx(o);
  const auto a = iota(0, 48);
  const auto b = iota(1000, 48);
  const auto fa = fp::prefixes(a, bs);
  apply(idx, store({1, 2, 3}, a));
  // Re-storing block 1 does not refresh its place: FIFO is by first store.
  apply(idx, store({1}, {a.begin(), a.begin() + 16}));
  const auto ops = apply(idx, store({4, 5, 6}, b));
  ASSERT_EQ(ops.size(), 5u);
  EXPECT_EQ(ops[3], evict(fa[0], 16));
  EXPECT_EQ(ops[4], evict(fa[1], 32));
  EXPECT_EQ(idx.size(), 4u);
  EXPECT_EQ(idx.stats().cap_evictions, 2u);
  EXPECT_TRUE(apply(idx, removal({1, 2})).empty());  // already forgotten
}

TEST(PositionalIndex, CapOrderSurvivesForgetAndReStore) {
  index_options o;
  o.max_resident = 3;
  positional_index idx(o);
  auto root = [](uint64_t h) { return store({h}, iota(static_cast<uint32_t>(h) * 100, 16)); };
  auto fp_of = [](uint64_t h) {
    const auto t = iota(static_cast<uint32_t>(h) * 100, 16);
    return fp::content(t.data(), bs);
  };
  apply(idx, root(1));
  apply(idx, root(2));
  apply(idx, root(3));
  apply(idx, removal({1}));
  apply(idx, root(1));  // now the newest
  EXPECT_EQ(apply(idx, root(4)), (std::vector<index_op>{upsert(fp_of(4), 16), evict(fp_of(2), 16)}));
  EXPECT_EQ(apply(idx, root(5)), (std::vector<index_op>{upsert(fp_of(5), 16), evict(fp_of(3), 16)}));
  EXPECT_EQ(apply(idx, root(6)), (std::vector<index_op>{upsert(fp_of(6), 16), evict(fp_of(1), 16)}));
}

TEST(PositionalIndex, CapQueueStaysBoundedUnderChurn) {
  index_options o;
  o.max_resident = 10;
  positional_index idx(o);
  const auto tokens = iota(0, 16);
  for (uint64_t i = 0; i < 100000; ++i) {
    std::vector<index_op> out;
    idx.stored(store({i % 7}, tokens), out);
    idx.removed(removal({i % 7}), out);
  }
  EXPECT_EQ(idx.size(), 0u);
  EXPECT_LT(idx.heap_bytes(), 64u * 1024);
  // The order is still right after compactions: 11 stores evict exactly the first.
  std::vector<index_op> out;
  for (uint64_t h = 100; h <= 110; ++h) idx.stored(store({h}, iota(static_cast<uint32_t>(h), 16)), out);
  EXPECT_EQ(idx.size(), 10u);
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(out[11], evict(fp::content(iota(100, 16).data(), bs), 16));
}

TEST(PositionalIndex, CapCountsTaintedBlocksAndEvictsThemSilently) {
  index_options o;
  o.max_resident = 1;
  positional_index idx(o);
  auto salted = store({1}, iota(0, 16));
  salted.first_tainted_block = 0;
  apply(idx, salted);
  const auto t = iota(50, 16);
  EXPECT_EQ(apply(idx, store({2}, t)), std::vector<index_op>{upsert(fp::content(t.data(), bs), 16)});
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.stats().cap_evictions, 1u);
}

// --- IX8: bounded tiers ------------------------------------------------------------------------

std::vector<uint32_t> tokens_of(uint64_t h) { return iota(static_cast<uint32_t>(h) * 100, 16); }
uint64_t fp_of(uint64_t h) {
  const auto t = tokens_of(h);
  return fp::content(t.data(), bs);
}
block_stored root_at(uint64_t h, tier t) { return store({h}, tokens_of(h), std::nullopt, t); }

// Hash 0 is kept apart from the table's array (PT1). A removal, the global cap and a tier bound
// each erase the slot their lookup found: the zero key's as any other, and only it.
TEST(PositionalIndex, TheZeroHashIsForgottenByARemovalTheCapAndATierBound) {
  struct log_observer : kvrelay::residency_observer {
    std::vector<uint64_t> gone;
    void added(uint64_t) override {}
    void forgotten(uint64_t k) override { gone.push_back(k); }
  };
  const auto zero = engine_hash::from_int(0);
  const auto seven = engine_hash::from_int(7);
  {
    log_observer obs;
    positional_index idx;
    idx.set_observer(&obs);
    apply(idx, root_at(0, tier::t1));
    apply(idx, root_at(7, tier::t1));
    EXPECT_EQ(apply(idx, removal({0})), (std::vector<index_op>{evict(fp_of(0), 16)}));
    EXPECT_FALSE(idx.contains(zero));
    EXPECT_TRUE(idx.contains(seven));
    EXPECT_EQ(idx.size(), 1u);
    EXPECT_EQ(obs.gone, std::vector<uint64_t>{0});
  }
  {
    index_options o;
    o.max_resident = 1;
    positional_index idx(o);
    apply(idx, root_at(0, tier::t1));
    EXPECT_EQ(apply(idx, root_at(7, tier::t1)),
              (std::vector<index_op>{upsert(fp_of(7), 16), evict(fp_of(0), 16)}));
    EXPECT_FALSE(idx.contains(zero));
    EXPECT_TRUE(idx.contains(seven));
    EXPECT_EQ(idx.size(), 1u);
  }
  {
    index_options o;
    o.max_t2_blocks = 1;
    positional_index idx(o);
    apply(idx, root_at(0, tier::t2));
    EXPECT_EQ(apply(idx, root_at(7, tier::t2)),
              (std::vector<index_op>{upsert(fp_of(7), 16, tier::t2), evict(fp_of(0), 16, tier::t2)}));
    EXPECT_FALSE(idx.contains(zero));
    EXPECT_TRUE(idx.contains(seven));
    EXPECT_EQ(idx.size(), 1u);
    EXPECT_EQ(idx.tier_blocks(tier::t2), 1u);
  }
}

TEST(PositionalIndex, I8AStoreOnlyTierKeepsItsBoundLeastRecentlyStoredFirst) {
  index_options o;
  o.max_t2_blocks = 3;
  positional_index idx(o);
  for (uint64_t h = 1; h <= 3; ++h) apply(idx, root_at(h, tier::t2));
  EXPECT_EQ(apply(idx, root_at(4, tier::t2)),
            (std::vector<index_op>{upsert(fp_of(4), 16, tier::t2), evict(fp_of(1), 16, tier::t2)}));
  // A re-store moves a block to the back: 3 outlives 2 now.
  apply(idx, root_at(3, tier::t2));
  EXPECT_EQ(apply(idx, root_at(5, tier::t2)),
            (std::vector<index_op>{upsert(fp_of(5), 16, tier::t2), evict(fp_of(2), 16, tier::t2)}));
  EXPECT_EQ(apply(idx, root_at(6, tier::t2)),
            (std::vector<index_op>{upsert(fp_of(6), 16, tier::t2), evict(fp_of(4), 16, tier::t2)}));
  EXPECT_EQ(idx.size(), 3u);
  EXPECT_EQ(idx.tier_blocks(tier::t2), 3u);
  EXPECT_EQ(idx.stats().t2_cap_drops, 3u);
  EXPECT_EQ(idx.stats().evictions, 0u) << "not removals";
  EXPECT_FALSE(idx.contains(engine_hash::from_int(1)));
  // GPU stores are not bounded by it.
  for (uint64_t h = 10; h < 20; ++h) apply(idx, root_at(h, tier::t1));
  EXPECT_EQ(idx.size(), 13u);
}

TEST(PositionalIndex, I8ADroppedCopyLeavesTheOtherTiers) {
  index_options o;
  o.max_t2_blocks = 1;
  positional_index idx(o);
  apply(idx, root_at(1, tier::t1));
  apply(idx, store({1}, {}, std::nullopt, tier::t2));  // location update: also on CPU
  // 2 at T2 pushes 1's CPU copy out: 1 stays on GPU, its warmest tier unchanged: no op.
  EXPECT_EQ(apply(idx, root_at(2, tier::t2)),
            (std::vector<index_op>{upsert(fp_of(2), 16, tier::t2)}));
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t2), 0u);
  EXPECT_EQ(idx.copies(engine_hash::from_int(1), tier::t1), 1u);
  // So its GPU removal evicts instead of downgrading to a CPU copy kvrelay no longer vouches for.
  EXPECT_EQ(apply(idx, removal({1})), (std::vector<index_op>{evict(fp_of(1), 16)}));
  // A T2 drop with a T3 copy left downgrades to T3.
  apply(idx, root_at(3, tier::t3));
  EXPECT_EQ(apply(idx, store({3}, {}, std::nullopt, tier::t2)),
            (std::vector<index_op>{upsert(fp_of(3), 16, tier::t2), evict(fp_of(2), 16, tier::t2)}))
      << "3 now holds the one T2 place, which was 2's";
  EXPECT_EQ(apply(idx, root_at(4, tier::t2)),
            (std::vector<index_op>{upsert(fp_of(4), 16, tier::t2), upsert(fp_of(3), 16, tier::t3)}));
  EXPECT_EQ(idx.stats().t2_cap_drops, 3u);
}

TEST(PositionalIndex, I8RemovalsAndClearsKeepTheCountExact) {
  index_options o;
  o.max_t2_blocks = 2;
  positional_index idx(o);
  apply(idx, root_at(1, tier::t2));
  apply(idx, root_at(2, tier::t2));
  apply(idx, removal({1}, tier::t2));  // a removal frees a place
  EXPECT_EQ(idx.tier_blocks(tier::t2), 1u);
  EXPECT_EQ(apply(idx, root_at(3, tier::t2)),
            (std::vector<index_op>{upsert(fp_of(3), 16, tier::t2)}));
  idx.clear();
  EXPECT_EQ(idx.tier_blocks(tier::t2), 0u);
  apply(idx, root_at(4, tier::t2));
  apply(idx, root_at(5, tier::t2));
  EXPECT_EQ(idx.stats().t2_cap_drops, 0u);
  // The global cap forgetting a block frees its tier place too.
  index_options g;
  g.max_resident = 1;
  g.max_t3_blocks = 5;
  positional_index both(g);
  apply(both, root_at(1, tier::t3));
  apply(both, root_at(2, tier::t3));
  EXPECT_EQ(both.tier_blocks(tier::t3), 1u);
}

// A store-only source at ten times the bound: the index and its memory stay where the bound
// puts them, and every block it lets go is evicted (the server's entries stay bounded too).
TEST(PositionalIndex, I8StoreOnlySourceAtTenTimesTheBoundStaysFlat) {
  index_options o;
  o.max_t2_blocks = 2000;
  positional_index idx(o);
  std::map<uint64_t, int> server;
  size_t heap_at_twice = 0;
  for (uint64_t h = 0; h < 20000; ++h) {
    std::vector<index_op> out;
    idx.stored(store({h + 1}, iota(static_cast<uint32_t>(h) * 16, 16), std::nullopt, tier::t2),
               out);
    for (const auto& op : out) {
      if (op.op == index_op::kind::upsert) ++server[op.fingerprint];
      else server.erase(op.fingerprint);
    }
    ASSERT_LE(idx.size(), 2000u);
    if (h == 3999) heap_at_twice = idx.heap_bytes();
  }
  EXPECT_EQ(idx.size(), 2000u);
  EXPECT_EQ(server.size(), 2000u);
  EXPECT_EQ(idx.stats().t2_cap_drops, 18000u);
  EXPECT_LE(idx.heap_bytes(), heap_at_twice) << "no growth from 2x to 10x the bound";
}

// --- resync, clear, memory --------------------------------------------------------------------

TEST(PositionalIndex, ForEachResidentReportsIndexedBlocksWithWarmestTier) {
  positional_index idx;
  const auto a = iota(0, 32);
  const auto fa = fp::prefixes(a, bs);
  apply(idx, store({1, 2}, a, std::nullopt, tier::t2));
  apply(idx, store({1}, {}, std::nullopt, tier::t1));  // location update: 1 is now on GPU too
  auto salted = store({3}, iota(900, 16));
  salted.first_tainted_block = 0;
  apply(idx, salted);
  std::map<uint64_t, std::pair<uint32_t, tier>> seen;
  idx.for_each_resident([&](uint64_t f, uint32_t c, tier t) { seen[f] = {c, t}; });
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[fa[0]], std::make_pair(16u, tier::t1));
  EXPECT_EQ(seen[fa[1]], std::make_pair(32u, tier::t2));
}

TEST(PositionalIndex, ClearEmptiesEverythingAndIndexWorksAfter) {
  index_options o;
  o.max_resident = 8;
  positional_index idx(o);
  apply(idx, store({1, 2}, iota(0, 32)));
  apply(idx, store({bin("abc")}, iota(0, 16)));
  idx.clear();
  EXPECT_EQ(idx.size(), 0u);
  size_t n = 0;
  idx.for_each_resident([&](uint64_t, uint32_t, tier) { ++n; });
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(apply(idx, removal({1, 2})).empty());
  EXPECT_EQ(apply(idx, store({1}, iota(0, 16))).size(), 1u);
}

TEST(PositionalIndex, MoveKeepsState) {
  positional_index a;
  apply(a, store({1}, iota(0, 16)));
  positional_index b(std::move(a));
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(apply(b, removal({1})).size(), 1u);
}

TEST(PositionalIndex, MillionBlocksFitInFortyEightBytesEach) {
  positional_index idx;
  std::vector<uint32_t> tokens(64);
  std::vector<index_op> out;
  out.reserve(4);
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint32_t e = 0; e < 250000; ++e) {
    std::iota(tokens.begin(), tokens.end(), e * 64);
    block_stored ev;
    for (int i = 0; i < 4; ++i) ev.block_hashes.push_back(engine_hash::from_int(h += 0x9e3779b97f4a7c15ull));
    ev.token_ids = tokens;
    ev.block_size = bs;
    ev.first_tainted_block = 4;
    out.clear();
    idx.stored(ev, out);
  }
  ASSERT_EQ(idx.size(), 1000000u);
  const double per_block = static_cast<double>(idx.heap_bytes()) / 1e6;
  RecordProperty("heap_bytes_per_block", std::to_string(per_block));
  EXPECT_LE(per_block, 48.0);
}

// --- property: the server's view, built from the ops alone, always equals the index ----------

// Random stores (chained, rooted, salted, EAGLE, offload, mismatched), removals at random tiers
// and clears over a small hash universe. Applying the emitted ops to a map fp → (count, tier)
// must give exactly what for_each_resident reports: no hint the index can no longer evict, no
// eviction of a hint never reported, the warmest tier always right.
void check_server_view_matches(index_options o, uint32_t seed) {
  std::mt19937 rng(seed);
  positional_index idx(o);
  std::map<uint64_t, std::pair<uint32_t, tier>> server;
  auto pick_hash = [&]() -> engine_hash {
    const uint32_t k = rng() % 56;
    return k < 48 ? engine_hash::from_int(k) : bin(std::string(9, static_cast<char>('a' + k)));
  };
  const tier tiers[] = {tier::t1, tier::t2, tier::t3};
  for (int step = 0; step < 20000; ++step) {
    std::vector<index_op> out;
    const uint32_t r = rng() % 100;
    if (r < 60) {
      block_stored ev;
      const size_t n = 1 + rng() % 4;
      for (size_t i = 0; i < n; ++i) ev.block_hashes.push_back(pick_hash());
      if (rng() % 10 < 7) ev.parent = pick_hash();
      ev.medium.tier = tiers[rng() % 3];
      ev.block_size = bs;
      ev.first_tainted_block = rng() % 8;
      ev.eagle_bigram = rng() % 20 == 0;
      const uint32_t shape = rng() % 20;
      size_t ntok = n * bs * (ev.eagle_bigram ? 2 : 1) + rng() % bs;
      if (shape == 0) ntok = 0;                                  // offload location update
      if (shape == 1) ntok = (n + 1) * bs * (ev.eagle_bigram ? 2 : 1);  // mismatch
      for (size_t i = 0; i < ntok; ++i) ev.token_ids.push_back(rng());
      idx.stored(ev, out);
    } else if (r < 98) {
      block_removed ev;
      const size_t n = 1 + rng() % 4;
      for (size_t i = 0; i < n; ++i) ev.block_hashes.push_back(pick_hash());
      ev.medium.tier = tiers[rng() % 3];
      idx.removed(ev, out);
    } else {
      idx.clear();
      server.clear();  // the caller sends ALL_CLEARED
    }
    for (const index_op& op : out) {
      if (op.op == index_op::kind::upsert) {
        server[op.fingerprint] = {op.token_count, op.t};
      } else {
        ASSERT_EQ(server.count(op.fingerprint), 1u) << "evict of an unreported hint, step " << step;
        server.erase(op.fingerprint);
      }
    }
    std::map<uint64_t, std::pair<uint32_t, tier>> resident;
    idx.for_each_resident([&](uint64_t f, uint32_t c, tier t) { resident[f] = {c, t}; });
    ASSERT_EQ(resident, server) << "step " << step;
    if (o.max_resident != 0) {
      ASSERT_LE(idx.size(), o.max_resident);
    }
    // IX8: each bounded tier within its bound, and its count exact.
    for (const auto& [t, cap] : {std::pair<tier, size_t>{tier::t2, o.max_t2_blocks},
                                 std::pair<tier, size_t>{tier::t3, o.max_t3_blocks}}) {
      if (cap == 0) continue;
      size_t held = 0;
      idx.for_each_key(
          [&](uint64_t k) { held += idx.copies(engine_hash::from_int(k), t) != 0 ? 1 : 0; });
      ASSERT_EQ(idx.tier_blocks(t), held) << "step " << step;
      ASSERT_LE(held, cap) << "step " << step;
    }
  }
  // The walk must have gone through the interesting paths, or it proves little.
  const auto& st = idx.stats();
  EXPECT_GT(st.stored_blocks, 1000u);
  EXPECT_GT(st.downgrades, 10u);
  EXPECT_GT(st.evictions, 100u);
  EXPECT_GT(st.fingerprint_changes, 100u);
  EXPECT_GT(st.location_updates, 10u);
  EXPECT_GT(st.mismatches, 10u);
  if (!o.index_salted) {
    EXPECT_GT(st.tainted_blocks, 100u);
  }
  if (o.max_resident != 0) {
    EXPECT_GT(st.cap_evictions, 100u);
  }
  if (o.max_t2_blocks != 0) {
    EXPECT_GT(st.t2_cap_drops, 100u);
  }
  if (o.max_t3_blocks != 0) {
    EXPECT_GT(st.t3_cap_drops, 100u);
  }
}

// An engine that stores and evicts physical copies (several per hash, at three tiers), sometimes
// announcing remaining_copy_counts and sometimes re-announcing reused blocks: the index must hold
// a (hash, tier) exactly while the engine holds a copy there, as long as no count saturates.
void check_copies_follow_the_engine(uint32_t seed, bool with_counts) {
  std::mt19937 rng(seed);
  positional_index idx;
  std::map<std::pair<uint64_t, int>, uint32_t> engine;  // (hash, tier index) → copies
  const tier tiers[] = {tier::t1, tier::t2, tier::t3};
  const auto tokens_of = [](uint64_t h) { return iota(static_cast<uint32_t>(h * 16), 16); };
  for (int step = 0; step < 20000; ++step) {
    const uint64_t h = rng() % 32;
    const int ti = static_cast<int>(rng() % 3);
    auto& n = engine[{h, ti}];
    std::vector<index_op> out;
    const uint32_t r = rng() % 100;
    if (r < 50) {
      if (n >= (ti == 0 ? 7u : 3u)) continue;  // beyond saturation the rule is "early", not exact
      auto ev = store({h}, tokens_of(h), std::nullopt, tiers[ti]);
      const bool held = n > 0;
      if (held && rng() % 4 == 0) {
        ev.origin = kvrelay::store_origin::reused;  // a re-announcement: no new copy
      } else {
        ++n;
      }
      idx.stored(ev, out);
    } else if (r < 98) {
      if (n == 0) continue;
      --n;
      auto ev = removal({h}, tiers[ti]);
      if (with_counts && rng() % 2 == 0) {
        ev.remaining_copies = {n};
        ev.has_remaining_copies = true;
      }
      idx.removed(ev, out);
    } else {
      idx.clear();
      engine.clear();
    }
    for (int k = 0; k < 3; ++k) {
      const auto it = engine.find({h, k});
      const uint32_t want = it == engine.end() ? 0 : it->second;
      ASSERT_EQ(idx.copies(engine_hash::from_int(h), tiers[k]), want)
          << "step " << step << " hash " << h << " tier " << k;
    }
  }
  EXPECT_GT(idx.stats().copy_added, 1000u);
  EXPECT_GT(idx.stats().copy_removed, 100u);
  EXPECT_GT(idx.stats().reannounced, 100u);
  EXPECT_GT(idx.stats().evictions + idx.stats().downgrades, 1000u);
  if (with_counts) {
    EXPECT_GT(idx.stats().authoritative_counts, 500u);
  }
}

TEST(PositionalIndexProperty, CopiesFollowTheEngine) { check_copies_follow_the_engine(7, false); }

TEST(PositionalIndexProperty, CopiesFollowTheEngineWithRemainingCounts) {
  check_copies_follow_the_engine(8, true);
}

TEST(PositionalIndexProperty, OpsKeepServerViewEqualToIndexDefault) {
  check_server_view_matches({}, 1);
}

TEST(PositionalIndexProperty, OpsKeepServerViewEqualToIndexRootPolicySalted) {
  index_options o;
  o.unknown_parent = unknown_parent_policy::root;
  o.index_salted = true;
  check_server_view_matches(o, 2);
}

TEST(PositionalIndexProperty, OpsKeepServerViewEqualToIndexWithCap) {
  index_options o;
  o.unknown_parent = unknown_parent_policy::root;
  o.max_resident = 6;
  check_server_view_matches(o, 3);
}

TEST(PositionalIndexProperty, OpsKeepServerViewEqualToIndexWithTierBounds) {
  index_options o;
  o.unknown_parent = unknown_parent_policy::root;
  o.max_t2_blocks = 4;
  o.max_t3_blocks = 3;
  check_server_view_matches(o, 4);
  o.max_resident = 8;  // both kinds of bound at once
  check_server_view_matches(o, 5);
}

}  // namespace

namespace {

// IX9: past the budget's room (memory_budget IB3) a block not held yet is refused with the rest
// of its chain, never reported; a block already held is still updated; the tiers go first.
TEST(PositionalIndex, IX9_ABlockTheBudgetHasNoRoomForIsRefusedWithTheRestOfItsChain) {
  auto budget = kvrelay::memory_budget::make(8 << 20, kvrelay::budget_source::config);
  kvrelay::standing_charge other(budget, kvrelay::standing_charge::on::index);
  index_options o;
  o.budget = budget;
  positional_index idx(o);
  const auto all = iota(0, 48);
  const auto roll = fp::prefixes(all, bs);
  EXPECT_EQ(apply(idx, store({10}, {all.begin(), all.begin() + 16})), upserts_for({roll[0]}, 16));

  const uint64_t share = budget->index_limit_bytes();
  other.set(share / 16 * 15);  // T1 only
  EXPECT_TRUE(apply(idx, store({20}, iota(1000, 16), std::nullopt, tier::t3)).empty())
      << "near the share a new T3 block is refused";
  EXPECT_EQ(idx.stats().refused_blocks, 1u);

  other.set(share);  // nothing new
  const auto ops = apply(idx, store({10, 11, 12}, all));
  EXPECT_EQ(ops, upserts_for({roll[0]}, 16)) << "the held block is updated, its chain refused";
  EXPECT_EQ(idx.stats().refused_blocks, 3u) << "11 and 12";
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_TRUE(apply(idx, store({11}, {all.begin() + 16, all.begin() + 32}, 10)).empty());

  other.set(0);  // room again: the same blocks are taken
  EXPECT_EQ(apply(idx, store({11, 12}, {all.begin() + 16, all.end()}, 10)),
            upserts_for({roll[1], roll[2]}, 32));
  EXPECT_EQ(idx.size(), 3u);
}

}  // namespace
