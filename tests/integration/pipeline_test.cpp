// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The whole pipeline end to end over real loopback sockets: fake engine (ZMQ PUB + replay ROUTER)
// → in-process kvrelay daemon → policy server (gRPC). Every test asserts what the policy server
// finally holds, with the reference behaviours of docs/spec/reference-behaviour.md (R, L, A, E)
// and the design rules beyond the reference (docs/spec/design-rules.md DR5-DR23) (gaps, replay, resets, catch-up, hybrid, salt, DP).
//
// Absence is asserted only after a barrier: either a later sentinel that went through the same
// shard is visible, or the daemon was drained (stop_daemon: every ingress stopped, the final
// flush acknowledged), so "not there" never means "not there yet".
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <ostream>

#include "base/fingerprint.hpp"
#include "base/log.hpp"
#include "daemon/daemon.hpp"
#include "tests/support/harness.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/fake-engine/workload.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::e2e {
namespace {

constexpr int64_t bs = 16;
using fake::fake_hash;
using fake::wire_era;

std::vector<uint32_t> slice(const std::vector<uint32_t>& t, size_t from, size_t to) {
  return std::vector<uint32_t>(t.begin() + static_cast<std::ptrdiff_t>(from),
                               t.begin() + static_cast<std::ptrdiff_t>(to));
}

fake::encode_options era_opts(wire_era era, double ts = 0.0) {
  fake::encode_options o;
  o.era = era;
  o.ts = ts;
  return o;
}

// Whole seconds in the recent past: exact in a double and alive for the server's 30 min TTL.
double recent_seconds(int offset) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return static_cast<double>(now - 120 + offset);
}

struct Pipeline : ::testing::Test {
  std::unique_ptr<harness> h;

  void start(harness_options o = {}) {
    h = std::make_unique<harness>(std::move(o));
    ASSERT_TRUE(h->start_daemon()) << h->error();
  }
  void TearDown() override { h.reset(); }

  // Every full block of `tokens` is held by `rank`'s replica with its cumulative token count.
  bool resident(const std::vector<uint32_t>& tokens, int64_t block = bs,
                const std::string& adapter = "", int rank = 0) const {
    const auto p = fingerprint::prefixes(tokens, block);
    for (size_t i = 0; i < p.size(); ++i) {
      auto e = h->entry(p[i], adapter, rank);
      if (!e || e->token_count != block * static_cast<int64_t>(i + 1)) return false;
    }
    return !p.empty();
  }
  // No full block of `tokens` is held by `rank`'s replica.
  bool absent(const std::vector<uint32_t>& tokens, int64_t block = bs,
              const std::string& adapter = "", int rank = 0) const {
    for (uint64_t p : fingerprint::prefixes(tokens, block))
      if (h->entry(p, adapter, rank)) return false;
    return true;
  }
  bool wait_resident(const std::vector<uint32_t>& tokens, int64_t block = bs,
                     const std::string& adapter = "", int rank = 0) const {
    return harness::wait_until([&] { return resident(tokens, block, adapter, rank); });
  }
  bool wait_absent(const std::vector<uint32_t>& tokens, int64_t block = bs,
                   const std::string& adapter = "", int rank = 0) const {
    return harness::wait_until([&] { return absent(tokens, block, adapter, rank); });
  }
  // Counters some actors publish on a timer: wait (bounded) for them instead of reading once.
  bool metric_reaches(const std::string& name, double at_least) const {
    return harness::wait_until([&] { return h->metric_sum(name) >= at_least; });
  }
  policy::index_counters server_counters() const { return h->server().index().counters(); }
};

// ---- reporter ordering -------------------------------------------------------------------------

TEST_F(Pipeline, EvictionRemovesOnlyTheEvictedBlockAndFollowsItsStoreR03) {
  start();
  const auto t = token_range(100, 48);
  h->publish({stored(u_hashes({11, 12, 13}), t, bs)});
  ASSERT_TRUE(wait_resident(t)) << h->diagnose();
  h->publish({removed(u_hashes({13}))});
  const auto p = fingerprint::prefixes(t, bs);
  ASSERT_TRUE(harness::wait_until([&] { return !h->entry(p[2]); })) << h->diagnose();
  EXPECT_TRUE(resident(slice(t, 0, 32))) << h->diagnose();

  // R03: a store and its eviction in back-to-back batches, inside one debounce window. Whatever
  // the server was told, the eviction must come last: the block is not resident at the end.
  const auto u = token_range(900, 32);
  h->publish({stored(u_hashes({21, 22}), u, bs)});
  h->publish({removed(u_hashes({21, 22}))});
  const auto sentinel = token_range(5000, 16);
  h->publish({stored(u_hashes({31}), sentinel, bs)});
  ASSERT_TRUE(wait_resident(sentinel)) << h->diagnose();
  h->stop_daemon();
  EXPECT_TRUE(absent(u)) << h->diagnose();
  EXPECT_TRUE(resident(slice(t, 0, 32))) << h->diagnose();
  // That the eviction reached the server is the wait for p[2] above, in either eviction mode
  // (expire sends it as an expired entry, rpc as PREFIX_EVICTED; tests/evictions has both).
}

TEST_F(Pipeline, ClearSupersedesPendingAddsAndNothingFromBeforeItSurvivesR06) {
  start();
  const auto a = token_range(100, 32), b = token_range(200, 32), c = token_range(300, 32),
             d = token_range(400, 32);
  // R06: a store and a clear in the same batch: that store never reaches the server.
  h->publish({stored(u_hashes({1, 2}), a, bs), cleared()});
  h->publish({stored(u_hashes({3, 4}), b, bs)});
  ASSERT_TRUE(wait_resident(b)) << h->diagnose();
  // DESIGN "Ordering" rule 3: nothing stored before a clear survives it, even what was already
  // reported (b) or still pending (c); what follows the clear (d) is indexed.
  h->publish({stored(u_hashes({5, 6}), c, bs), cleared(), stored(u_hashes({7, 8}), d, bs)});
  ASSERT_TRUE(wait_resident(d)) << h->diagnose();
  ASSERT_TRUE(wait_absent(b)) << h->diagnose();
  h->stop_daemon();
  EXPECT_TRUE(absent(a)) << h->diagnose();
  EXPECT_TRUE(absent(b)) << h->diagnose();
  EXPECT_TRUE(absent(c)) << h->diagnose();
  EXPECT_TRUE(resident(d)) << h->diagnose();
  const auto sc = server_counters();
  // The start's own ALL_CLEARED (sent at once, DB14 in debouncer_protocol.hpp) and one per clear.
  EXPECT_EQ(sc.cleared_events, 3u);
  // Only b's and d's prefixes were ever sent: a and c never reached the server at all.
  EXPECT_EQ(sc.prefixes_upserted, 4u) << h->diagnose();
}

// ---- adapters ----------------------------------------------------------------------------------

TEST_F(Pipeline, AdaptersPartitionByLoraNameAndIdMapAndUnmappedIsDroppedA06A07A08) {
  harness_options o;
  o.engine.adapters = {{1, "sql-lora"}};
  start(o);
  // 64 tokens: the demo server's PREFIX_MATCH threshold.
  const auto shared = token_range(1000, 64), unmapped = token_range(2000, 32),
             named = token_range(3000, 32);
  auto base = stored(u_hashes({101, 102, 103, 104}), shared, bs);
  auto lora1 = stored(u_hashes({111, 112, 113, 114}), shared, bs);  // same tokens (A05)
  lora1.lora_id = 1;
  auto lora2 = stored(u_hashes({121, 122}), unmapped, bs);
  lora2.lora_id = 2;  // no name anywhere: fail-closed (A07)
  auto by_name = stored(u_hashes({131, 132}), named, bs);
  by_name.lora_id = 9;  // unmapped id, but the event names its adapter: the name wins
  by_name.lora_name = "chat-lora";
  h->publish({base, lora1, lora2, by_name}, era_opts(wire_era::g));
  ASSERT_TRUE(wait_resident(shared, bs, "")) << h->diagnose();
  ASSERT_TRUE(wait_resident(shared, bs, "sql-lora")) << h->diagnose();
  ASSERT_TRUE(wait_resident(named, bs, "chat-lora")) << h->diagnose();
  EXPECT_GE(h->metric_sum("kvrelay_unmapped_adapter_events_total"), 1.0);

  const auto routed = h->lookup(shared, bs, "sql-lora");
  EXPECT_EQ(routed.reason, "PREFIX_MATCH");
  EXPECT_EQ(routed.matched(h->replica()), 64);

  // A06: the LoRA block's eviction narrows to its partition; the base copy of the same prefix
  // stays. A07: the unmapped block never entered the reverse map, so its removal sends nothing.
  h->publish({removed(u_hashes({111, 112, 113, 114})), removed(u_hashes({121}))},
             era_opts(wire_era::g));
  ASSERT_TRUE(wait_absent(shared, bs, "sql-lora")) << h->diagnose();

  // Runtime mapping (admin / SIGHUP): the same id is now indexed under its new name. add_adapter
  // is asynchronous (a message to the decoder, racing the ZMQ thread's batches), so the store is
  // repeated until a batch decoded after the mapping shows up.
  ASSERT_TRUE(h->daemon().add_adapter(h->replica(), 2, "code-lora"));
  auto again = stored(u_hashes({141, 142}), unmapped, bs);
  again.lora_id = 2;
  ASSERT_TRUE(harness::wait_until(
      [&] {
        h->publish({again}, era_opts(wire_era::g));
        return harness::wait_until([&] { return resident(unmapped, bs, "code-lora"); },
                                   std::chrono::milliseconds(100));
      },
      std::chrono::seconds(10)))
      << h->diagnose();

  h->stop_daemon();
  EXPECT_TRUE(resident(shared, bs, "")) << h->diagnose();
  EXPECT_TRUE(resident(named, bs, "chat-lora")) << h->diagnose();
  for (const char* adapter : {"", "sql-lora", "chat-lora", "2"})
    EXPECT_TRUE(absent(unmapped, bs, adapter)) << adapter << "\n" << h->diagnose();
  EXPECT_TRUE(absent(named, bs, "")) << h->diagnose();
}

// ---- L2 tier -----------------------------------------------------------------------------------

TEST_F(Pipeline, L2TierDowngradesToT2WithTheEvictionTimeAndRestoresToT1L02L03L04) {
  harness_options o;
  o.engine.l2_tier = true;
  start(o);
  const double ts1 = recent_seconds(0), ts2 = recent_seconds(10), ts3 = recent_seconds(20),
               ts4 = recent_seconds(30);
  const auto us = [](double s) { return static_cast<int64_t>(s) * 1000000; };
  const auto a = token_range(100, 32), b = token_range(500, 16);
  const auto pa = fingerprint::prefixes(a, bs);
  const auto pb = fingerprint::prefixes(b, bs);
  const auto has = [&](uint64_t prefix, int32_t tier, int64_t seen_us) {
    auto e = h->entry(prefix);
    return e && e->tier == tier && e->last_seen_us == seen_us;
  };

  h->publish({stored(u_hashes({1, 2}), a, bs)}, era_opts(wire_era::c, ts1));
  ASSERT_TRUE(harness::wait_until([&] { return has(pa[1], 1, us(ts1)); })) << h->diagnose();

  // Evict block 2 at ts2, then store another block at ts3 right after: the downgrade keeps the
  // eviction's own time (L03), not the later batch's.
  h->publish({removed(u_hashes({2}))}, era_opts(wire_era::c, ts2));
  h->publish({stored(u_hashes({9}), b, bs)}, era_opts(wire_era::c, ts3));
  ASSERT_TRUE(harness::wait_until([&] { return has(pa[1], 2, us(ts2)) && has(pb[0], 1, us(ts3)); }))
      << h->diagnose();
  EXPECT_TRUE(has(pa[0], 1, us(ts1))) << h->diagnose();
  EXPECT_EQ(server_counters().evicted_events, 0u) << "L2 mode never sends PREFIX_EVICTED";

  // L04: re-stored (same chain), the block is T1 again.
  auto restore = stored(u_hashes({2}), slice(a, 16, 32), bs, fake_hash::u(1));
  h->publish({restore}, era_opts(wire_era::c, ts4));
  ASSERT_TRUE(harness::wait_until([&] { return has(pa[1], 1, us(ts4)); })) << h->diagnose();
  EXPECT_EQ(h->entry(pa[1])->token_count, 32);
  EXPECT_EQ(server_counters().evicted_events, 0u);
}

// ---- bad input ---------------------------------------------------------------------------------

TEST_F(Pipeline, NotABatchIsDroppedWholeABadEventCostsOnlyItselfD22) {
  start();
  h->publish_raw(std::string("\xff\x00\x01", 3));  // not a batch: dropped whole (WD1)
  // One good event and one truncated tuple: the good one applies, the bad one costs only itself
  // (wire_decoder WD2; the reference dropped both, D20).
  const auto half = token_range(700, 16);
  auto truncated = stored(u_hashes({0xE000}), {}, 128);
  truncated.truncate_slots = 3;
  h->publish({stored(u_hashes({70}), half, bs), truncated}, era_opts(wire_era::a));
  const auto good = token_range(800, 32);
  h->publish({stored(u_hashes({80, 81}), good, bs)});
  ASSERT_TRUE(wait_resident(good)) << h->diagnose();
  EXPECT_TRUE(resident(half)) << h->diagnose();
  EXPECT_EQ(h->metric_sum("kvrelay_batches_dropped_total"), 1.0);
  EXPECT_EQ(h->metric_sum("kvrelay_malformed_events_total"), 1.0);
}

// ---- sequence numbers --------------------------------------------------------------------------

TEST_F(Pipeline, GapOnTheLiveStreamIsRepairedByReplay) {
  start();
  const auto t = token_range(100, 48);
  // Batch k never arrives live (the ring has it); batch k+1 chains onto it. With the default
  // unknown_parent = drop, k+1 is indexed only if k was applied first.
  h->publish_replay_only(fake::encode_batch({stored(u_hashes({1, 2}), slice(t, 0, 32), bs)}, {}));
  h->publish({stored(u_hashes({3}), slice(t, 32, 48), bs, fake_hash::u(2))});
  ASSERT_TRUE(wait_resident(t)) << h->diagnose();
  // The ingress publishes its counters on change, at most once a second: wait for them.
  EXPECT_TRUE(metric_reaches("kvrelay_seq_gaps_total", 1));
  EXPECT_TRUE(metric_reaches("kvrelay_batches_recovered_total", 1));
  EXPECT_EQ(h->metric_sum("kvrelay_history_lost_total"), 0.0);
}

// DB19 end to end: what a gap's replay stored and evicted never reaches the server, although an
// eviction in it (of a block the server holds) makes a flush due at once on the live stream.
TEST_F(Pipeline, AReplayedGapSendsNoneOfWhatItStoredAndEvicted) {
  harness_options o;
  o.engine.window = std::chrono::milliseconds(500);  // the wait: up to ten of them, 5 s
  start(o);
  const auto a = token_range(100, 16), b = token_range(600, 160), c = token_range(2000, 32);
  h->publish({stored(u_hashes({1}), a, bs)});
  ASSERT_TRUE(wait_resident(a)) << h->diagnose();
  const auto before = server_counters();
  // Missed live, kept by the ring: ten blocks stored, the block the server holds evicted, the ten
  // evicted again.
  const auto ten = u_hashes({100, 101, 102, 103, 104, 105, 106, 107, 108, 109});
  h->publish_replay_only(fake::encode_batch({stored(ten, b, bs)}, {}));
  h->publish_replay_only(fake::encode_batch({removed(u_hashes({1}))}, {}));
  h->publish_replay_only(fake::encode_batch({removed(ten)}, {}));
  h->publish({stored(u_hashes({200, 201}), c, bs)});  // live: the gap is seen and read back
  ASSERT_TRUE(harness::wait_until([&] { return absent(a) && resident(c); })) << h->diagnose();
  EXPECT_TRUE(metric_reaches("kvrelay_batches_recovered_total", 3));
  const auto after = server_counters();
  const uint64_t added = (after.prefixes_upserted - before.prefixes_upserted) -
                         (after.prefixes_expired - before.prefixes_expired);
  EXPECT_EQ(added, 2u) << "c's two blocks; none of the ten the replay stored and evicted";
  EXPECT_TRUE(absent(b)) << h->diagnose();
}

struct HistoryLost : Pipeline, ::testing::WithParamInterface<bool> {};

TEST_P(HistoryLost, ClearsTheReplicaThenIndexesWhatFollows) {
  harness_options o;
  o.replay = GetParam();
  start(o);
  const auto a = token_range(100, 32), b = token_range(600, 32);
  h->publish({stored(u_hashes({1, 2}), a, bs)});
  ASSERT_TRUE(wait_resident(a)) << h->diagnose();
  // A batch nobody has any more (with replay: the ring no longer holds the range): it might
  // have evicted `a`, so no hint from before it may survive.
  h->lose(1);
  h->publish({stored(u_hashes({3, 4}), b, bs)});
  ASSERT_TRUE(harness::wait_until([&] { return absent(a) && resident(b); })) << h->diagnose();
  EXPECT_TRUE(metric_reaches("kvrelay_history_lost_total", 1));
  EXPECT_TRUE(metric_reaches("kvrelay_batches_lost_total", 1));
  EXPECT_GE(server_counters().cleared_events, 1u);
}

INSTANTIATE_TEST_SUITE_P(Pipeline, HistoryLost, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "RingLost" : "NoReplay"; });

TEST_F(Pipeline, SequenceResetIsANewIncarnationAndClears) {
  start();
  const auto a = token_range(100, 32), b = token_range(600, 32);
  h->publish({stored(u_hashes({1, 2}), a, bs)});
  h->publish({stored(u_hashes({3}), token_range(50, 16), bs)});
  ASSERT_TRUE(wait_resident(a)) << h->diagnose();
  h->restart_engine();  // seq back to 0
  h->publish({stored(u_hashes({1, 2}), b, bs)});  // a new engine reuses hashes freely
  ASSERT_TRUE(harness::wait_until([&] { return absent(a) && resident(b); })) << h->diagnose();
  EXPECT_TRUE(metric_reaches("kvrelay_incarnation_resets_total", 1));
  EXPECT_TRUE(absent(token_range(50, 16))) << h->diagnose();
}

TEST_F(Pipeline, ColdStartCatchesUpThroughReplayFromZero) {
  h = std::make_unique<harness>();
  const auto t = token_range(100, 48), gone = token_range(4000, 16);
  // Published before kvrelay exists: only the replay ring can tell it.
  h->publish({stored(u_hashes({1, 2}), slice(t, 0, 32), bs)});
  h->publish({stored(u_hashes({3}), slice(t, 32, 48), bs, fake_hash::u(2))});
  h->publish({stored(u_hashes({40}), gone, bs)});
  h->publish({removed(u_hashes({40}))});
  ASSERT_TRUE(h->start_daemon(/*sync=*/false)) << h->error();
  ASSERT_TRUE(wait_resident(t)) << h->diagnose();
  EXPECT_TRUE(metric_reaches("kvrelay_batches_recovered_total", 4));
  h->stop_daemon();
  EXPECT_TRUE(absent(gone)) << h->diagnose();
}

// ---- the router's view (reference e2e) ---------------------------------------------------------

harness_options reference_engine() {
  harness_options o;
  o.engine.replica_id = "fake-engine-0";
  o.engine.model_id = "fake-model";
  return o;
}

TEST_F(Pipeline, RouterLookupFromPromptTokensMatchesE04) {
  start(reference_engine());
  fake::scripted_options so;
  so.block_size = 128;
  so.num_blocks = 2;
  so.events = 2;
  so.start_token = 5000;
  h->publish(fake::scripted_events(so), era_opts(wire_era::a));
  const auto prompt = token_range(5000, 256);
  ASSERT_TRUE(wait_resident(prompt, 128)) << h->diagnose();

  const auto two = h->lookup(prompt, 128);
  ASSERT_TRUE(two.ok);
  EXPECT_EQ(two.reason, "PREFIX_MATCH");
  ASSERT_EQ(two.scores.size(), 1u);
  EXPECT_EQ(two.matched("fake-engine-0"), 256);
  const auto one = h->lookup(token_range(5000, 128), 128);
  EXPECT_EQ(one.reason, "PREFIX_MATCH");
  EXPECT_EQ(one.matched("fake-engine-0"), 128);
  const auto novel = h->lookup(token_range(90000, 256), 128);
  EXPECT_EQ(novel.reason, "AFFINITY_HINT");
  ASSERT_EQ(novel.scores.size(), 1u);
  EXPECT_EQ(novel.matched("fake-engine-0"), 0);
  // The engine's own block hashes are never index keys.
  const auto engine = h->lookup_hashes({fingerprint::to_be8(0xE000), fingerprint::to_be8(0xE001)},
                                       {128, 128});
  EXPECT_EQ(engine.reason, "AFFINITY_HINT");
  ASSERT_EQ(engine.scores.size(), 1u);
  EXPECT_EQ(engine.matched("fake-engine-0"), 0);
}

TEST_F(Pipeline, MissingTokensAndTruncatedTuplesIndexNothingE05) {
  start(reference_engine());
  fake::scripted_options so;
  so.omit_token_ids = true;
  h->publish(fake::scripted_events(so), era_opts(wire_era::a));
  auto truncated = stored(u_hashes({0xE000}), {}, 128);
  truncated.truncate_slots = 3;  // ["BlockStored", [0xE000], nil]
  h->publish({truncated}, era_opts(wire_era::a));
  ASSERT_TRUE(harness::wait_until(
      [&] { return h->metric_sum("kvrelay_malformed_events_total") >= 1.0; }));
  h->stop_daemon();  // the barrier: whatever the omit-token batch made is at the server now
  EXPECT_EQ(h->cache_state_prefixes(), 0);
  EXPECT_EQ(server_counters().prefixes_upserted, 0u) << h->diagnose();
  const auto r = h->lookup(token_range(0, 128), 128);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.reason, "NO_HINT");
  EXPECT_TRUE(r.scores.empty());
}

// ---- hybrid models, salt -----------------------------------------------------------------------

TEST_F(Pipeline, SlidingWindowGroupRemovalNeverEvicts) {
  start();
  const auto t = token_range(100, 32);
  const auto p = fingerprint::prefixes(t, bs);
  // Group 0 is the sliding-window group here, the full-attention group is 1 (vLLM does not
  // promise full attention is group 0). Both store the same blocks.
  auto swa = stored(u_hashes({1, 2}), t, bs);
  swa.group_idx = 0;
  swa.spec_kind = "sliding_window";
  swa.sliding_window = 16;
  auto full = stored(u_hashes({1, 2}), t, bs);
  full.group_idx = 1;
  full.spec_kind = "full_attention";
  h->publish({swa, full}, era_opts(wire_era::g));
  ASSERT_TRUE(wait_resident(t)) << h->diagnose();

  auto swa_gone = removed(u_hashes({1, 2}));  // out of the window: not out of the cache
  swa_gone.group_idx = 0;
  auto full_gone = removed(u_hashes({2}));
  full_gone.group_idx = 1;
  h->publish({swa_gone}, era_opts(wire_era::g));
  h->publish({full_gone}, era_opts(wire_era::g));
  ASSERT_TRUE(harness::wait_until([&] { return !h->entry(p[1]); })) << h->diagnose();
  h->stop_daemon();
  EXPECT_TRUE(h->entry(p[0]).has_value()) << h->diagnose();
}

TEST_F(Pipeline, SaltedAndMultimodalBlocksAreNotIndexed) {
  harness_options o;
  o.engine.hash_scheme = "sglang";
  o.engine.replica_id = "sglang-0";
  start(o);
  const auto salted_t = token_range(100, 32), plain_t = token_range(300, 32);
  auto salted = stored({fake_hash::i(-5), fake_hash::i(-6)}, salted_t, bs);
  salted.cache_salt = "tenant-a";  // slot-7 metadata map (era S3 on the wire)
  h->publish({salted, stored({fake_hash::i(-7), fake_hash::i(-8)}, plain_t, bs)},
             era_opts(wire_era::s2));
  ASSERT_TRUE(wait_resident(plain_t)) << h->diagnose();
  h->stop_daemon();
  EXPECT_TRUE(absent(salted_t)) << h->diagnose();
}

TEST_F(Pipeline, MultimodalExtraKeysAreNotIndexed) {
  start();
  const auto image_t = token_range(100, 32), text_t = token_range(300, 32);
  auto image = stored(u_hashes({1, 2}), image_t, bs);
  image.extra_keys = std::vector<fake::block_extra_keys>{
      std::vector<fake::extra_key>{fake::extra_key::mm("img-sha", 0)}, std::nullopt};
  h->publish({image, stored(u_hashes({3, 4}), text_t, bs)}, era_opts(wire_era::e));
  ASSERT_TRUE(wait_resident(text_t)) << h->diagnose();
  h->stop_daemon();
  EXPECT_TRUE(absent(image_t)) << h->diagnose();
}

// ---- every wire era gives the same fingerprints ------------------------------------------------

struct era_case {
  const char* name;
  wire_era era;
  const char* scheme;
  bool signed_hashes;  // SGLang / builtin hash(): negative ints on the wire
  bool salted;         // S3: salted stores with the slot-7 map, indexed with index_salted
};

// gtest would otherwise print the struct's bytes, padding included (uninitialised for valgrind).
void PrintTo(const era_case& c, std::ostream* os) { *os << c.name; }

struct WireEra : Pipeline, ::testing::WithParamInterface<era_case> {};

TEST_P(WireEra, StoresChainAcrossBatchesAndEvictWithTheSameFingerprints) {
  const auto& c = GetParam();
  harness_options o;
  o.engine.hash_scheme = c.scheme;
  o.engine.index_salted = c.salted;
  start(o);
  // Hashes above 2^63 (vLLM u64) or negative (SGLang i64): both must map back on removal.
  const auto hash = [&](int i) {
    return c.signed_hashes ? fake_hash::i(-1000 - i) : fake_hash::u(0xF000000000000000ULL + i);
  };
  const auto t = token_range(700, 48);
  auto first = stored({hash(0), hash(1)}, slice(t, 0, 32), bs);
  auto second = stored({hash(2)}, slice(t, 32, 48), bs, hash(1));
  if (c.salted) first.cache_salt = second.cache_salt = "tenant-a";
  h->publish({first}, era_opts(c.era));
  h->publish({second}, era_opts(c.era));
  ASSERT_TRUE(wait_resident(t)) << h->diagnose();
  auto gone = removed({hash(2)});
  h->publish({gone}, era_opts(c.era));
  const auto p = fingerprint::prefixes(t, bs);
  ASSERT_TRUE(harness::wait_until([&] { return !h->entry(p[2]); })) << h->diagnose();
  EXPECT_TRUE(resident(slice(t, 0, 32))) << h->diagnose();
}

INSTANTIATE_TEST_SUITE_P(
    Pipeline, WireEra,
    ::testing::Values(era_case{"A", wire_era::a, "vllm", true, false},
                      era_case{"C", wire_era::c, "vllm", false, false},
                      era_case{"G", wire_era::g, "vllm", false, false},
                      era_case{"H", wire_era::h, "vllm", false, false},
                      era_case{"I", wire_era::i, "vllm", false, false},
                      era_case{"S1", wire_era::s1, "sglang", true, false},
                      era_case{"S3", wire_era::s2, "sglang", true, true},
                      era_case{"S4", wire_era::s4, "sglang", true, false}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- data parallelism --------------------------------------------------------------------------

TEST_F(Pipeline, DataParallelRanksAreSeparateReplicas) {
  harness_options o;
  o.engine.dp_size = 2;
  o.engine.dp_mode = config::dp_mode::separate;
  start(o);
  ASSERT_EQ(h->ranks(), 2);
  EXPECT_EQ(h->replica(0), "vllm-0-dp0");
  EXPECT_EQ(h->replica(1), "vllm-0-dp1");
  const auto a = token_range(100, 32), b = token_range(200, 32);
  // Era G carries the rank in the envelope, which each pipeline checks against its own.
  h->publish({stored(u_hashes({1, 2}), a, bs)}, era_opts(wire_era::g), 0);
  h->publish({stored(u_hashes({1, 2}), b, bs)}, era_opts(wire_era::g), 1);
  ASSERT_TRUE(wait_resident(a, bs, "", 0)) << h->diagnose();
  ASSERT_TRUE(wait_resident(b, bs, "", 1)) << h->diagnose();
  EXPECT_TRUE(absent(a, bs, "", 1)) << h->diagnose();
  EXPECT_TRUE(absent(b, bs, "", 0)) << h->diagnose();
  // Each rank has its own state: a clear on rank 1 leaves rank 0 alone.
  h->publish({cleared()}, era_opts(wire_era::g), 1);
  ASSERT_TRUE(wait_absent(b, bs, "", 1)) << h->diagnose();
  h->stop_daemon();
  EXPECT_TRUE(resident(a, bs, "", 0)) << h->diagnose();
  EXPECT_EQ(h->metric_sum("kvrelay_wrong_dp_rank_batches_total"), 0.0);
}

// A daemon run inside another program (these tests) sets its configured log level at start and
// gives the process's back when it stops: a test after it in the same process that asserts on
// info lines saw none.
TEST_F(Pipeline, AStoppedDaemonGivesTheLogLevelBack) {
  log::set_level(log::level::debug);
  start();  // the harness configures warn
  EXPECT_EQ(log::current_level(), log::level::warn);
  h->stop_daemon();
  EXPECT_EQ(log::current_level(), log::level::debug);
  log::set_level(log::level::info);
}

}  // namespace
}  // namespace kvrelay::e2e
