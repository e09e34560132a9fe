// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The decoder's protocol (actors/decoder/batch_router.hpp, rules BR1-BR7), driven directly.
#include "actors/decoder/batch_router.hpp"

#include <gtest/gtest.h>

#include "decoder_test_util.hpp"

namespace kvrelay::test {
namespace {

const std::vector<uint32_t> k16 = iota_tokens(1, 16);

item store_ev(uint64_t h, std::optional<std::string> lora = std::nullopt,
              std::optional<int64_t> lora_id = std::nullopt, std::string medium = "GPU") {
  return M({{"type", S("BlockStored")},
            {"block_hashes", Hashes({h})},
            {"parent_block_hash", Nil()},
            {"token_ids", Toks(k16)},
            {"block_size", I(16)},
            {"lora_id", lora_id ? I(*lora_id) : Nil()},
            {"medium", S(medium)},
            {"lora_name", lora ? S(*lora) : Nil()}});
}
item remove_ev(uint64_t h, std::string medium = "GPU") {
  return M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({h})}, {"medium", S(medium)}});
}
item clear_ev() { return M({{"type", S("AllBlocksCleared")}}); }

router_output route(batch_router& r, const std::vector<item>& events, bool replayed = false) {
  const std::string bytes = batch(events);
  router_output out;
  r.on_batch(bytes.data(), bytes.size(), out, replayed);
  return out;
}

// "w<epoch>:<s|r><hash>@<partition>,..." or "clear<epoch>" per step, for compact expectations.
std::string steps(const router_output& out) {
  std::string s;
  for (const auto& st : out.steps) {
    if (!s.empty()) s += " | ";
    if (st.what == router_step::kind::clear) {
      s += "clear" + std::to_string(st.epoch);
      continue;
    }
    s += "w" + std::to_string(st.work->epoch) + ":";
    for (size_t i = 0; i < st.work->events.size(); ++i) {
      const auto& ev = st.work->events[i];
      if (i) s += ",";
      if (ev.type == event_type::stored) {
        s += "s" + std::to_string(ev.stored.block_hashes.at(0).value) + "@" +
             std::to_string(st.work->partitions.at(i));
      } else {
        s += "r" + std::to_string(ev.removed.block_hashes.at(0).value);
      }
    }
  }
  return s;
}

TEST(BatchRouter, BR2AClearMidBatchCutsTheWorkAndBumpsTheEpoch) {
  batch_router r;
  const auto out = route(r, {store_ev(1), clear_ev(), store_ev(2), remove_ev(2)});
  EXPECT_EQ(steps(out), "w1:s1@0 | clear2 | w2:s2@0,r2");
  EXPECT_EQ(r.epoch(), 2u);
  EXPECT_GT(out.steps[1].ts_us, 0) << "the clear carries the batch time";
  EXPECT_STREQ(out.steps[1].reason, "AllBlocksCleared");
}

TEST(BatchRouter, BR2AClearBetweenStoresAndRemovals) {
  batch_router r;
  const auto out = route(r, {store_ev(1), store_ev(2), clear_ev(), remove_ev(1), remove_ev(2)});
  EXPECT_EQ(steps(out), "w1:s1@0,s2@0 | clear2 | w2:r1,r2");
  // Two clears in a row: nothing between them, two epochs.
  const auto twice = route(r, {clear_ev(), clear_ev()});
  EXPECT_EQ(steps(twice), "clear3 | clear4");
}

TEST(BatchRouter, BR8AReplayedBatchMakesReplayedWorkOnBothSidesOfAClear) {
  batch_router r;
  auto out = route(r, {store_ev(1), clear_ev(), store_ev(2)}, true);
  ASSERT_EQ(steps(out), "w1:s1@0 | clear2 | w2:s2@0");
  EXPECT_TRUE(out.steps[0].work->replayed);
  EXPECT_TRUE(out.steps[2].work->replayed);
  out = route(r, {store_ev(3), remove_ev(1)});
  ASSERT_EQ(out.steps.size(), 1u);
  EXPECT_FALSE(out.steps[0].work->replayed) << "a live batch after a replayed one";
}

TEST(BatchRouter, BR4PartitionsCreatedMidBatchAreNamedByTheWorkThatUsesThem) {
  batch_router r;
  auto out = route(r, {remove_ev(9), store_ev(1), store_ev(2, "sql-lora"), remove_ev(2),
                       store_ev(3, "sql-lora")});
  ASSERT_EQ(out.steps.size(), 1u);
  EXPECT_EQ(steps(out), "w1:r9,s1@0,s2@1,r2,s3@1");
  const shard_work& w = *out.steps[0].work;
  EXPECT_EQ(w.first_new, 0u);
  EXPECT_EQ(w.new_partitions, (std::vector<std::string>{"", "sql-lora"}));
  EXPECT_EQ(out.new_partitions, w.new_partitions);
  // Later partitions continue the ids; a clear in between changes nothing about them.
  out = route(r, {store_ev(4, "sql-lora"), clear_ev(), store_ev(5, "b"), store_ev(6, "c")});
  EXPECT_EQ(steps(out), "w1:s4@1 | clear2 | w2:s5@2,s6@3");
  EXPECT_TRUE(out.steps[0].work->new_partitions.empty());
  EXPECT_EQ(out.steps[2].work->first_new, 2u);
  EXPECT_EQ(out.steps[2].work->new_partitions, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(r.partitions(), 4u);
}

TEST(BatchRouter, BR4AdapterByNameThenIdMapElseDroppedAndWarnedOnce) {
  router_options o;
  o.adapters = {{7, "mapped"}};
  batch_router r(o);
  auto out = route(r, {store_ev(1, std::nullopt, 7), store_ev(2, std::nullopt, 8),
                       store_ev(3, std::nullopt, 8), store_ev(4, "named", 8)});
  EXPECT_EQ(steps(out), "w1:s1@0,s4@1");
  EXPECT_EQ(out.new_partitions, (std::vector<std::string>{"mapped", "named"}));
  EXPECT_EQ(out.unmapped_ids, std::vector<int64_t>{8});
  EXPECT_EQ(r.stats().unmapped, 2u);
  out = route(r, {store_ev(5, std::nullopt, 8)});
  EXPECT_TRUE(out.unmapped_ids.empty()) << "warned once per id";
  r.add_adapter(8, "late");
  out = route(r, {store_ev(6, std::nullopt, 8)});
  EXPECT_EQ(steps(out), "w1:s6@2");
}

TEST(BatchRouter, BR4PartitionsAreBounded) {
  router_options o;
  o.max_partitions = 2;
  batch_router r(o);
  auto out = route(r, {store_ev(1, "a"), store_ev(2, "b"), store_ev(3, "c"), store_ev(4, "a")});
  EXPECT_EQ(steps(out), "w1:s1@0,s2@1,s4@0");
  EXPECT_TRUE(out.partition_limit_hit);
  out = route(r, {store_ev(5, "d")});
  EXPECT_FALSE(out.partition_limit_hit) << "warned once";
  EXPECT_EQ(r.stats().partition_limited, 2u);
}

TEST(BatchRouter, BR5UnknownMediaAreNotRoutedCountedByValueAndWarnedOnce) {
  batch_router r;
  auto out = route(r, {store_ev(1, std::nullopt, std::nullopt, "QUANTUM"),
                       remove_ev(1, "QUANTUM"), store_ev(2, std::nullopt, std::nullopt, "FS"),
                       remove_ev(3, "odd value!")});
  EXPECT_EQ(steps(out), "w1:s2@0");
  EXPECT_EQ(out.unknown_media, (std::vector<std::string>{"QUANTUM", "odd_value_"}));
  EXPECT_EQ(r.stats().unknown_media.at("QUANTUM"), 2u);
  EXPECT_EQ(r.stats().unknown_medium, 3u);
  out = route(r, {store_ev(4, std::nullopt, std::nullopt, "QUANTUM")});
  EXPECT_TRUE(out.unknown_media.empty());
  EXPECT_TRUE(out.steps.empty());
  // Distinct values are bounded: the rest count as "other".
  std::vector<item> many;
  for (int i = 0; i < 40; ++i) many.push_back(remove_ev(1, "m" + std::to_string(i)));
  route(r, many);
  EXPECT_EQ(r.stats().unknown_media.size(), batch_router::max_media_values + 1);
  EXPECT_GT(r.stats().unknown_media.at("other"), 0u);
}

TEST(BatchRouter, BR6EventsAndBlocksAreCountedByMedium) {
  batch_router r;
  route(r, {store_ev(1), store_ev(2, std::nullopt, std::nullopt, "CPU"), remove_ev(1, "gpu"),
            remove_ev(2, "lmcache-l2-redis"), clear_ev()});
  const auto& st = r.stats();
  const auto gpu = static_cast<size_t>(medium_id::gpu);
  EXPECT_EQ(st.events_by_medium[router_stats::stored][gpu], 1u);
  EXPECT_EQ(st.events_by_medium[router_stats::removed][gpu], 1u);
  EXPECT_EQ(st.blocks_by_medium[router_stats::stored][static_cast<size_t>(medium_id::cpu)], 1u);
  EXPECT_EQ(st.events_by_medium[router_stats::removed][static_cast<size_t>(medium_id::lmcache_l2)],
            1u);
  EXPECT_EQ(st.cleared, 1u);
  EXPECT_EQ(st.events, 5u);
}

TEST(BatchRouter, BR3NonMainGroupsAreFilteredAndIncarnationForgetsThem) {
  batch_router r;
  auto swa = M({{"type", S("BlockStored")}, {"block_hashes", Hashes({1})},
                {"parent_block_hash", Nil()}, {"token_ids", Toks(k16)}, {"block_size", I(16)},
                {"lora_id", Nil()}, {"medium", S("GPU")}, {"lora_name", Nil()},
                {"group_idx", I(1)}, {"kv_cache_spec_kind", S("sliding_window")}});
  auto rm1 = M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({1})},
                {"medium", S("GPU")}, {"group_idx", I(1)}});
  auto out = route(r, {swa, rm1});
  EXPECT_TRUE(out.steps.empty());
  EXPECT_EQ(r.stats().group_filtered, 2u);
  EXPECT_EQ(r.groups_learned(), 1u);
  r.on_incarnation_reset(out);
  EXPECT_EQ(steps(out), "clear2");
  EXPECT_EQ(r.groups_learned(), 0u);
  EXPECT_EQ(out.steps[0].ts_us, 0);
  r.on_history_lost(out);
  EXPECT_EQ(steps(out), "clear3");
  EXPECT_STREQ(out.steps[0].reason, "history lost");
}

TEST(BatchRouter, BR1UndecodableAndWrongRankBatchesAreDroppedWhole) {
  router_options o;
  o.expected_dp_rank = 0;
  batch_router r(o);
  router_output out;
  const std::string junk = "\xc1";
  r.on_batch(junk.data(), junk.size(), out);
  EXPECT_EQ(out.error, decode_error::bad_envelope);
  EXPECT_FALSE(out.detail.empty());
  EXPECT_TRUE(out.steps.empty());
  EXPECT_FALSE(out.first_batch);
  const std::string other = batch({store_ev(1)}, 3);
  r.on_batch(other.data(), other.size(), out);
  EXPECT_TRUE(out.wrong_rank);
  EXPECT_TRUE(out.steps.empty());
  out = route(r, {store_ev(1)});
  EXPECT_TRUE(out.first_batch);
  EXPECT_EQ(out.error, decode_error::none);
  out = route(r, {store_ev(2)});
  EXPECT_FALSE(out.first_batch) << "said once";
  EXPECT_EQ(r.stats().dropped, 2u);
  EXPECT_EQ(r.stats().wrong_rank, 1u);
  EXPECT_EQ(r.stats().decoded, 2u);
}

// A removal whose block_hashes is a str: the decoder skips it (WD2).
item bad_remove_ev() {
  return M({{"type", S("BlockRemoved")}, {"block_hashes", S("oops")}, {"medium", S("GPU")}});
}
item bad_store_ev() {
  return M({{"type", S("BlockStored")}, {"block_hashes", Hashes({5})}, {"token_ids", Toks(k16)},
            {"block_size", S("16")}});
}

TEST(BatchRouter, BR7SkippedEventsAreCountedAndTheRestRoutesInOrder) {
  batch_router r;
  const auto out = route(r, {store_ev(1), bad_store_ev(), remove_ev(1), bad_remove_ev(),
                             A({I(7), Hashes({1})}), store_ev(2)});
  EXPECT_EQ(steps(out), "w1:s1@0,r1,s2@0");
  ASSERT_EQ(out.malformed.size(), 3u);
  EXPECT_EQ(out.malformed[0].index, 1u);
  EXPECT_EQ(out.malformed[1].kind, event_kind::removed);
  EXPECT_EQ(out.malformed[2].kind, event_kind::unknown);
  EXPECT_TRUE(out.removal_lost);
  const auto& st = r.stats();
  EXPECT_EQ(st.malformed_total, 3u);
  EXPECT_EQ(st.removals_lost, 1u);
  EXPECT_EQ(st.malformed[static_cast<size_t>(event_kind::stored)]
                        [static_cast<size_t>(decode_error::bad_block_size)],
            1u);
  EXPECT_EQ(st.malformed[static_cast<size_t>(event_kind::removed)]
                        [static_cast<size_t>(decode_error::bad_hash)],
            1u);
  EXPECT_EQ(st.malformed[static_cast<size_t>(event_kind::unknown)]
                        [static_cast<size_t>(decode_error::bad_tag)],
            1u);
  EXPECT_EQ(st.decoded, 1u) << "the batch itself decoded";
  EXPECT_EQ(st.dropped, 0u);
}

TEST(BatchRouter, BR7RemovalLostIsSaidOncePerEpochAndAClearAfterItMakesItGood) {
  batch_router r;
  EXPECT_TRUE(route(r, {bad_remove_ev()}).removal_lost);
  EXPECT_FALSE(route(r, {bad_remove_ev()}).removal_lost) << "once until a clear";
  EXPECT_EQ(r.stats().removals_lost, 2u) << "but every one is counted";
  // A clear after it in the same batch makes the index match again: nothing to say.
  EXPECT_FALSE(route(r, {bad_remove_ev(), clear_ev()}).removal_lost);
  // One after the batch's last clear is lost in the new epoch.
  EXPECT_TRUE(route(r, {clear_ev(), bad_remove_ev()}).removal_lost);
  // Our own clears count too (lost history, a new incarnation).
  router_output out;
  r.on_history_lost(out);
  EXPECT_TRUE(route(r, {bad_remove_ev()}).removal_lost);
  // A malformed AllBlocksCleared is a lost removal of everything.
  r.on_incarnation_reset(out);
  const auto cleared = route(r, {M({{"type", S("AllBlocksCleared")}, {"medium", I(1)}})});
  ASSERT_EQ(cleared.malformed.size(), 1u);
  EXPECT_EQ(cleared.malformed[0].kind, event_kind::cleared);
  EXPECT_TRUE(cleared.removal_lost);
  EXPECT_TRUE(cleared.steps.empty()) << "not applied";
  // A bad store says nothing of the sort.
  r.on_history_lost(out);
  EXPECT_FALSE(route(r, {bad_store_ev()}).removal_lost);
}

TEST(BatchRouter, BR1WrongRankBatchesCountNoFaults) {
  router_options o;
  o.expected_dp_rank = 0;
  batch_router r(o);
  const std::string other = batch({bad_remove_ev()}, 3);
  router_output out;
  r.on_batch(other.data(), other.size(), out);
  EXPECT_TRUE(out.wrong_rank);
  EXPECT_TRUE(out.malformed.empty());
  EXPECT_FALSE(out.removal_lost);
  EXPECT_EQ(r.stats().malformed_total, 0u);
}

TEST(BatchRouter, EmptyAndUnknownOnlyBatchesProduceNoWork) {
  batch_router r;
  auto out = route(r, {});
  EXPECT_TRUE(out.steps.empty());
  out = route(r, {A({S("FutureEvent")})});
  EXPECT_TRUE(out.steps.empty());
  EXPECT_EQ(r.stats().unknown_tags, 1u);
}

}  // namespace
}  // namespace kvrelay::test
