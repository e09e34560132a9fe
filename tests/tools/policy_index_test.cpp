// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The demo policy server's index against the real server's ingest semantics
// (docs/spec/policy-contract.md §2), its freshness rule (the facts in policy_index.hpp) and the
// longest-prefix LookupRoute (§1). Over 400 lines: one fixture for every rule of one index.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "base/fingerprint.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tools/policy-server/policy_index.hpp"

namespace kvrelay::policy {
namespace {

const std::string K1 = fingerprint::to_be8(1), K2 = fingerprint::to_be8(2),
                  K3 = fingerprint::to_be8(3);

struct PolicyIndex : ::testing::Test {
  int64_t now = 1'000'000'000;
  index_options opts() {
    index_options o;
    o.now_us = [this] { return now; };
    return o;
  }
  policy_index idx{opts()};

  static ic::CacheStateUpdate csu(const std::string& replica, const std::string& scheme = "vllm",
                                  const std::string& tenant = "t") {
    ic::CacheStateUpdate u;
    u.set_replica_id(replica);
    u.set_model_id("m");
    u.set_tenant_id(tenant);
    u.set_hash_scheme(scheme);
    return u;
  }
  static void add(ic::CacheStateUpdate& u, const std::string& key, int32_t tokens,
                  ic::CacheTier tier = ic::CACHE_TIER_T1, const std::string& adapter = "") {
    auto* p = u.add_prefixes();
    p->set_prefix_hash(key);
    p->set_token_count(tokens);
    p->set_tier(tier);
    p->set_adapter_id(adapter);
  }
  static ic::CacheEvent event(ic::CacheEvent::Type type, const std::string& replica,
                              const std::string& key = "", const std::string& adapter = "") {
    ic::CacheEvent e;
    e.set_type(type);
    e.set_replica_id(replica);
    e.set_model_id("m");
    e.set_tenant_id("t");
    e.set_prefix_hash(key);
    e.set_adapter_id(adapter);
    return e;
  }
  ic::LookupRouteResponse chain(const std::vector<std::string>& keys, int32_t per_block,
                                const std::string& adapter = "") {
    ic::LookupRouteRequest r;
    r.set_model_id("m");
    r.set_tenant_id("t");
    r.set_hash_scheme("vllm");
    r.set_adapter_id(adapter);
    for (const auto& k : keys) {
      r.add_block_hashes(k);
      r.add_block_token_counts(per_block);
    }
    ic::LookupRouteResponse resp;
    idx.lookup(r, &resp);
    return resp;
  }
  ic::LookupRouteResponse exact(const std::string& key) {
    ic::LookupRouteRequest r;
    r.set_model_id("m");
    r.set_tenant_id("t");
    r.set_hash_scheme("vllm");
    r.set_prefix_hash(key);
    ic::LookupRouteResponse resp;
    idx.lookup(r, &resp);
    return resp;
  }
};

TEST_F(PolicyIndex, IngestKeysByTenantModelSchemeAdapterPrefix) {
  auto u = csu("r0");
  add(u, K1, 16);
  add(u, K2, 32, ic::CACHE_TIER_T2, "sql-lora");
  idx.ingest(u);
  const auto h = idx.holders("t", "m", "vllm", "", K1);
  ASSERT_EQ(h.count("r0"), 1u);
  EXPECT_EQ(h.at("r0").token_count, 16);
  EXPECT_EQ(h.at("r0").last_seen_us, now);  // timestamp 0 = server now
  EXPECT_EQ(h.at("r0").tier, 1);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "sql-lora", K2).at("r0").tier, 2);
  EXPECT_TRUE(idx.holders("t", "m", "vllm", "", K2).empty());
  EXPECT_TRUE(idx.holders("t", "m", "sglang", "", K1).empty());
  EXPECT_EQ(idx.total_prefixes("t", "m"), 2u);
}

TEST_F(PolicyIndex, TimestampTakenLiterallyAndLastWriteWins) {
  auto u = csu("r0");
  u.set_timestamp_us(12345);
  add(u, K1, 16, ic::CACHE_TIER_T2);
  idx.ingest(u);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1).at("r0").last_seen_us, 12345);
  auto again = csu("r0");
  add(again, K1, 48, ic::CACHE_TIER_T1);
  idx.ingest(again);
  const auto e = idx.holders("t", "m", "vllm", "", K1).at("r0");
  EXPECT_EQ(e.token_count, 48);
  EXPECT_EQ(e.tier, 1);
  EXPECT_EQ(e.last_seen_us, now);
  EXPECT_EQ(idx.entries(), 1u);
}

TEST_F(PolicyIndex, TierNormalisation) {
  auto u = csu("r0");
  add(u, K1, 16, ic::CACHE_TIER_UNSPECIFIED);
  add(u, K2, 16, static_cast<ic::CacheTier>(7));
  add(u, K3, 16, static_cast<ic::CacheTier>(-2));
  idx.ingest(u);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1).at("r0").tier, 1);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K2).at("r0").tier, 7);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K3).at("r0").tier, coldest_tier);
}

TEST_F(PolicyIndex, ProbeTenantIsDropped) {
  auto u = csu("r0", "vllm", probe_tenant);
  add(u, K1, 16);
  u.mutable_stats()->set_hit_rate(0.5f);
  idx.ingest(u);
  EXPECT_EQ(idx.entries(), 0u);
  EXPECT_FALSE(idx.has_stats(probe_tenant, "m", "r0"));
  EXPECT_EQ(idx.counters().probe_dropped, 1u);
}

TEST_F(PolicyIndex, EmptySchemeDropsPrefixesButKeepsStats) {
  auto u = csu("r0", "");
  add(u, K1, 16);
  u.mutable_stats()->set_hit_rate(0.25f);
  idx.ingest(u);
  EXPECT_EQ(idx.entries(), 0u);
  EXPECT_TRUE(idx.has_stats("t", "m", "r0"));
  EXPECT_EQ(idx.counters().prefixes_dropped, 1u);
}

TEST_F(PolicyIndex, StatsNanAndInfBecomeZero) {
  auto u = csu("r0");
  u.mutable_stats()->set_hit_rate(std::numeric_limits<float>::quiet_NaN());
  u.mutable_stats()->set_pressure(std::numeric_limits<float>::infinity());
  u.mutable_stats()->set_cache_memory_bytes(1 << 20);
  u.mutable_stats()->set_replica_id("ignored");
  idx.ingest(u);
  ic::GetCacheStateRequest req;
  req.set_tenant_id("t");
  req.set_model_id("m");
  ic::GetCacheStateResponse resp;
  idx.cache_state(req, &resp);
  ASSERT_EQ(resp.replicas_size(), 1);
  EXPECT_EQ(resp.replicas(0).replica_id(), "r0");  // the top-level replica_id wins
  EXPECT_EQ(resp.replicas(0).hit_rate(), 0.0f);
  EXPECT_EQ(resp.replicas(0).pressure(), 0.0f);
  EXPECT_EQ(resp.replicas(0).cache_memory_bytes(), 1 << 20);
}

TEST_F(PolicyIndex, UnequalChainFieldsDropTheEntry) {
  auto u = csu("r0");
  add(u, K1, 16);
  u.mutable_prefixes(0)->add_block_hashes(K1);
  u.mutable_prefixes(0)->add_block_hashes(K2);
  u.mutable_prefixes(0)->add_block_token_counts(16);
  idx.ingest(u);
  EXPECT_EQ(idx.entries(), 0u);
}

TEST_F(PolicyIndex, CsuAdapterIsTheDefaultPartition) {
  auto u = csu("r0");
  u.set_adapter_id("chat-lora");
  add(u, K1, 16);
  add(u, K2, 16, ic::CACHE_TIER_T1, "sql-lora");
  idx.ingest(u);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "chat-lora", K1).size(), 1u);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "sql-lora", K2).size(), 1u);
}

TEST_F(PolicyIndex, EvictionSweepsSchemesAndAdaptersUnlessNarrowed) {
  for (const char* scheme : {"vllm", "sglang"}) {
    auto u = csu("r0", scheme);
    add(u, K1, 16);
    add(u, K1, 16, ic::CACHE_TIER_T1, "sql-lora");
    idx.ingest(u);
  }
  auto other = csu("r1");
  add(other, K1, 16);
  idx.ingest(other);
  ASSERT_EQ(idx.entries(), 5u);
  // Narrowed: only the sql-lora partition, in every scheme.
  idx.apply(event(ic::CacheEvent::PREFIX_EVICTED, "r0", K1, "sql-lora"));
  EXPECT_TRUE(idx.holders("t", "m", "vllm", "sql-lora", K1).empty());
  EXPECT_TRUE(idx.holders("t", "m", "sglang", "sql-lora", K1).empty());
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1).size(), 2u);
  // Empty adapter: every partition and scheme, this replica only.
  idx.apply(event(ic::CacheEvent::PREFIX_EVICTED, "r0", K1));
  EXPECT_EQ(idx.entries(), 1u);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1).count("r1"), 1u);
}

// inference-cache PR #164: adapter_scoped makes adapter_id authoritative, "" included. Without
// the option the index ignores the field, as the reference server does.
TEST_F(PolicyIndex, AdapterScopedNarrowsABaseModelEvictionOnlyWhenTheServerReadsIt) {
  for (const bool reads : {false, true}) {
    auto o = opts();
    o.adapter_scoped = reads;
    policy_index x{o};
    auto u = csu("r0");
    add(u, K1, 16);
    add(u, K1, 16, ic::CACHE_TIER_T1, "sql-lora");
    x.ingest(u);
    auto e = event(ic::CacheEvent::PREFIX_EVICTED, "r0", K1);
    e.set_adapter_scoped(true);
    x.apply(e);
    EXPECT_TRUE(x.holders("t", "m", "vllm", "", K1).empty()) << reads;
    EXPECT_EQ(x.holders("t", "m", "vllm", "sql-lora", K1).size(), reads ? 1u : 0u)
        << (reads ? "scoped: the LoRA entry stays" : "the reference sweeps every partition");
    // Unscoped with an empty adapter_id: the legacy sweep either way.
    x.apply(event(ic::CacheEvent::PREFIX_EVICTED, "r0", K1));
    EXPECT_EQ(x.entries(), 0u) << reads;
  }
}

TEST_F(PolicyIndex, AllClearedRemovesReplicaAndItsStats) {
  auto u = csu("r0");
  add(u, K1, 16);
  add(u, K2, 32, ic::CACHE_TIER_T1, "a");
  u.mutable_stats()->set_hit_rate(0.5f);
  idx.ingest(u);
  auto other = csu("r1");
  add(other, K1, 16);
  idx.ingest(other);
  idx.apply(event(ic::CacheEvent::ALL_CLEARED, "r0"));
  EXPECT_FALSE(idx.has_stats("t", "m", "r0"));
  EXPECT_EQ(idx.entries(), 1u);
  EXPECT_EQ(idx.total_prefixes("t", "m"), 1u);
}

TEST_F(PolicyIndex, AddedAndUnknownEventsAreIgnored) {
  auto u = csu("r0");
  add(u, K1, 16);
  idx.ingest(u);
  idx.apply(event(ic::CacheEvent::PREFIX_ADDED, "r0", K2));
  idx.apply(event(ic::CacheEvent::TYPE_UNSPECIFIED, "r0", K1));
  idx.apply(event(static_cast<ic::CacheEvent::Type>(42), "r0", K1));
  EXPECT_EQ(idx.entries(), 1u);
  EXPECT_EQ(idx.counters().ignored_events, 3u);
}

TEST_F(PolicyIndex, TtlExpiresEntriesForLookupAndSweep) {
  auto u = csu("r0");
  add(u, K1, 128);
  idx.ingest(u);
  now += idx.options().ttl_us + 1;
  auto resp = chain({K1}, 128);
  EXPECT_NE(resp.reason_code(), "PREFIX_MATCH");
  EXPECT_EQ(idx.sweep(), 1u);
  EXPECT_EQ(idx.entries(), 0u);
}

TEST_F(PolicyIndex, LongestLeadingRunPerReplica) {
  auto a = csu("a");
  add(a, K1, 128);
  add(a, K2, 256);
  idx.ingest(a);
  auto b = csu("b");
  add(b, K1, 128);
  add(b, K3, 384);  // holds block 3 but not block 2: its run stops at 1
  idx.ingest(b);
  const auto resp = chain({K1, K2, K3}, 128);
  EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores_size(), 2);
  EXPECT_EQ(resp.replica_scores(0).replica_id(), "a");
  EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 256);
  EXPECT_EQ(resp.replica_scores(1).replica_id(), "b");
  EXPECT_EQ(resp.replica_scores(1).matched_tokens(), 128);
  EXPECT_GT(resp.replica_scores(0).score(), resp.replica_scores(1).score());
}

TEST_F(PolicyIndex, BelowMinimumIsAffinityAndMismatchedLengthsNoHint) {
  auto a = csu("a");
  add(a, K1, 16);
  idx.ingest(a);
  auto resp = chain({K1}, 16);  // 16 < 64
  EXPECT_EQ(resp.reason_code(), "AFFINITY_HINT");
  ASSERT_EQ(resp.replica_scores_size(), 1);
  EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 16);
  ic::LookupRouteRequest bad;
  bad.set_model_id("m");
  bad.set_tenant_id("t");
  bad.add_block_hashes(K1);
  ic::LookupRouteResponse out;
  idx.lookup(bad, &out);
  EXPECT_EQ(out.reason_code(), "NO_HINT");
  EXPECT_EQ(out.replica_scores_size(), 0);
}

TEST_F(PolicyIndex, NegativeBlockTokenCountIsMalformed) {
  auto a = csu("a");
  add(a, K1, 128);
  idx.ingest(a);
  EXPECT_EQ(chain({K1}, -128).reason_code(), "NO_HINT");
}

TEST_F(PolicyIndex, AdapterPartitionsLookups) {
  auto a = csu("a");
  add(a, K1, 128, ic::CACHE_TIER_T1, "sql-lora");
  idx.ingest(a);
  EXPECT_EQ(chain({K1}, 128, "sql-lora").reason_code(), "PREFIX_MATCH");
  EXPECT_EQ(chain({K1}, 128).reason_code(), "AFFINITY_HINT");
}

TEST_F(PolicyIndex, ExactMatchOnPrefixHashWhenNoChain) {
  auto a = csu("a");
  add(a, K2, 256, ic::CACHE_TIER_T2);
  idx.ingest(a);
  const auto resp = exact(K2);
  EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores_size(), 1);
  EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 256);
  EXPECT_EQ(resp.replica_scores(0).tier(), ic::CACHE_TIER_T2);
}

TEST_F(PolicyIndex, NothingKnownIsNoHint) {
  EXPECT_EQ(chain({K1}, 128).reason_code(), "NO_HINT");
  EXPECT_EQ(chain({K1}, 128).replica_scores_size(), 0);
  EXPECT_EQ(idx.counters().no_hint, 2u);
}

TEST_F(PolicyIndex, GlobalCapDropsNewEntries) {
  index_options o = opts();
  o.max_entries = 2;
  policy_index small(o);
  auto u = csu("r0");
  add(u, K1, 16);
  add(u, K2, 16);
  add(u, K3, 16);
  small.ingest(u);
  EXPECT_EQ(small.entries(), 2u);
  EXPECT_EQ(small.counters().prefixes_dropped, 1u);
}

TEST_F(PolicyIndex, CountOnlyStoresNothingButCounts) {
  index_options o = opts();
  o.count_only = true;
  policy_index counting(o);
  auto u = csu("r0");
  add(u, K1, 16);
  add(u, K2, 32);
  u.mutable_stats()->set_hit_rate(0.5f);
  counting.ingest(u);
  EXPECT_EQ(counting.entries(), 0u);
  EXPECT_EQ(counting.counters().prefixes_upserted, 2u);
  EXPECT_TRUE(counting.has_stats("t", "m", "r0"));
}

TEST_F(PolicyIndex, JsonDumpHoldsTheIndex) {
  auto u = csu("r0");
  add(u, K1, 16);
  idx.ingest(u);
  const auto j = nlohmann::json::parse(idx.dump_json());
  EXPECT_EQ(j["entries"], 1);
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["prefixes"][0]["prefix_hash"], "0000000000000001");
  EXPECT_EQ(j["models"][0]["prefixes"][0]["replicas"]["r0"]["token_count"], 16);
  EXPECT_EQ(j["counters"]["updates"], 1);
}

// -- freshness: the reference's TTL rule, which kvrelay's expire mode relies on -----------------

// A wall clock in 2023, so that "1 µs after the epoch" is 53 years old, as it is in production.
struct Freshness : PolicyIndex {
  static constexpr int64_t k_now = 1'700'000'000'000'000;
  static constexpr int64_t k_expired = 1;  // what kvrelay's expire mode sends
  Freshness() { now = k_now; }

  int64_t ttl() { return idx.options().ttl_us; }
  // One entry for r0 in (vllm, adapter) at `ts`.
  void report(const std::string& key, int64_t ts, int32_t tokens = 128,
              const std::string& adapter = "", const std::string& scheme = "vllm",
              const std::string& replica = "r0") {
    auto u = csu(replica, scheme);
    u.set_timestamp_us(ts);
    add(u, key, tokens, ic::CACHE_TIER_T1, adapter);
    idx.ingest(u);
  }
  int64_t state_total() {
    ic::GetCacheStateRequest req;
    req.set_tenant_id("t");
    req.set_model_id("m");
    ic::GetCacheStateResponse resp;
    idx.cache_state(req, &resp);
    return resp.summary().total_prefixes();
  }
  size_t fresh_holders(const std::string& key, const std::string& adapter = "",
                       const std::string& scheme = "vllm") {
    return idx.holders("t", "m", scheme, adapter, key, view::fresh).size();
  }
};

TEST_F(Freshness, DefaultsAreTheReferences) {
  EXPECT_EQ(ttl(), 30LL * 60 * 1'000'000);
  index_options o;
  o.ttl_us = 0;
  EXPECT_EQ(policy_index(o).options().ttl_us, default_ttl_us);  // non-positive → default
  o.ttl_us = -5;
  EXPECT_EQ(policy_index(o).options().ttl_us, default_ttl_us);
}

TEST_F(Freshness, TimestampsAreLiteralAndZeroIsNow) {
  report(K1, 0);
  report(K2, k_now - 5'000'000);
  report(K3, -7);  // negative: literal, before the epoch
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1).at("r0").last_seen_us, k_now);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K2).at("r0").last_seen_us, k_now - 5'000'000);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K3).at("r0").last_seen_us, -7);
  EXPECT_EQ(fresh_holders(K1), 1u);
  EXPECT_EQ(fresh_holders(K2), 1u);
  EXPECT_EQ(fresh_holders(K3), 0u);
  EXPECT_EQ(idx.counters().prefixes_expired, 1u);
}

TEST_F(Freshness, ExtremeTimestampsDoNotOverflow) {
  report(K1, std::numeric_limits<int64_t>::min());
  report(K2, std::numeric_limits<int64_t>::max());  // in the future: age ≤ 0, fully fresh
  EXPECT_EQ(fresh_holders(K1), 0u);
  EXPECT_EQ(fresh_holders(K2), 1u);
  EXPECT_EQ(idx.sweep(), 1u);
  EXPECT_EQ(chain({K2}, 128).replica_scores(0).estimated_cache_hit_prob(), 1.0f);
}

TEST_F(Freshness, AnExpiredReReportIsInvisibleToLookupsAtOnce) {
  report(K1, 0);
  report(K2, 0, 256);
  ASSERT_EQ(chain({K1, K2}, 128).replica_scores(0).matched_tokens(), 256);
  report(K2, k_expired, 256);  // the eviction of block 2, expire mode
  const auto resp = chain({K1, K2}, 128);
  EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores_size(), 1);
  EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 128);  // the run stops at the stale block
  report(K1, k_expired);
  EXPECT_NE(chain({K1, K2}, 128).reason_code(), "PREFIX_MATCH");
  EXPECT_NE(exact(K1).reason_code(), "PREFIX_MATCH");  // the exact-match path skips it too
}

TEST_F(Freshness, StaleEntriesAreCountedUntilTheSweepDeletesThem) {
  report(K1, 0);
  report(K2, 0);
  report(K2, k_expired);
  EXPECT_EQ(idx.entries(), 2u);
  EXPECT_EQ(state_total(), 2);  // GetCacheState counts the stale key, as the reference does
  EXPECT_EQ(idx.total_prefixes("t", "m"), 2u);
  EXPECT_EQ(idx.total_prefixes("t", "m", view::fresh), 1u);
  EXPECT_EQ(idx.entries_of("t", "m", "r0").size(), 1u);
  EXPECT_EQ(idx.entries_of("t", "m", "r0", view::all).size(), 2u);
  EXPECT_EQ(idx.sweep(), 1u);
  EXPECT_EQ(idx.entries(), 1u);
  EXPECT_EQ(state_total(), 1);
  EXPECT_TRUE(idx.holders("t", "m", "vllm", "", K2).empty());
  EXPECT_EQ(idx.counters().swept, 1u);
}

TEST_F(Freshness, AnExpiredEntryForAnUnknownKeyIsStoredUntilSwept) {
  report(K3, k_expired);  // an eviction whose add the server never saw
  EXPECT_EQ(idx.entries(), 1u);
  EXPECT_EQ(state_total(), 1);
  EXPECT_EQ(fresh_holders(K3), 0u);
  EXPECT_EQ(idx.sweep(), 1u);
  EXPECT_EQ(state_total(), 0);
}

TEST_F(Freshness, ReReportRefreshes) {
  report(K1, k_expired);
  EXPECT_EQ(fresh_holders(K1), 0u);
  report(K1, 0);  // stored again before the sweep
  EXPECT_EQ(fresh_holders(K1), 1u);
  EXPECT_EQ(idx.sweep(), 0u);
  now += ttl() - 1;  // one µs short of the TTL: still usable
  EXPECT_EQ(chain({K1}, 128).reason_code(), "PREFIX_MATCH");
  report(K1, 0);  // refreshed at the new now
  now += ttl() - 1;
  EXPECT_EQ(idx.sweep(), 0u);
  EXPECT_EQ(fresh_holders(K1), 1u);
}

TEST_F(Freshness, AgeEqualToTheTtlIsStaleForLookupsAndSweep) {
  report(K1, k_now - ttl() + 1);
  report(K2, k_now - ttl());
  EXPECT_EQ(fresh_holders(K1), 1u);
  EXPECT_EQ(fresh_holders(K2), 0u);
  EXPECT_EQ(idx.sweep(), 1u);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1).size(), 1u);
}

TEST_F(Freshness, ExpiringOneKeyLeavesOtherAdaptersSchemesAndReplicas) {
  for (const char* scheme : {"vllm", "sglang"}) {
    report(K1, 0, 128, "", scheme);
    report(K1, 0, 128, "sql-lora", scheme);
  }
  report(K1, 0, 128, "", "vllm", "r1");
  report(K1, k_expired);  // (vllm, "", K1) of r0 only
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1, view::fresh).count("r0"), 0u);
  EXPECT_EQ(idx.holders("t", "m", "vllm", "", K1, view::fresh).count("r1"), 1u);
  EXPECT_EQ(fresh_holders(K1, "sql-lora"), 1u);
  EXPECT_EQ(fresh_holders(K1, "", "sglang"), 1u);
  EXPECT_EQ(fresh_holders(K1, "sql-lora", "sglang"), 1u);
  EXPECT_EQ(chain({K1}, 128, "sql-lora").replica_scores(0).replica_id(), "r0");
  EXPECT_EQ(idx.sweep(), 1u);
  EXPECT_EQ(idx.entries(), 4u);
  // The PublishEvent it replaces, with an empty adapter, would have dropped all four of r0's.
  idx.apply(event(ic::CacheEvent::PREFIX_EVICTED, "r0", K1));
  EXPECT_EQ(idx.entries(), 1u);
}

TEST_F(Freshness, ScoreIsMatchedTokensTimesTheRunsFreshness) {
  report(K1, k_now - ttl() / 2);    // half way: freshness 0.5
  report(K2, k_now - ttl() / 4, 256);
  auto resp = chain({K1, K2}, 128);
  ASSERT_EQ(resp.replica_scores_size(), 1);
  // The run's freshness is its oldest block's.
  EXPECT_NEAR(resp.replica_scores(0).estimated_cache_hit_prob(), 0.5f, 1e-6);
  EXPECT_NEAR(resp.replica_scores(0).score(), 256 * 0.5f, 1e-3);
  // A fresher replica with the same match ranks first; equal scores rank by replica id.
  report(K1, 0, 128, "", "vllm", "r2");
  report(K2, 0, 256, "", "vllm", "r2");
  report(K1, 0, 128, "", "vllm", "r1");
  report(K2, 0, 256, "", "vllm", "r1");
  resp = chain({K1, K2}, 128);
  ASSERT_EQ(resp.replica_scores_size(), 3);
  EXPECT_EQ(resp.replica_scores(0).replica_id(), "r1");
  EXPECT_EQ(resp.replica_scores(1).replica_id(), "r2");
  EXPECT_EQ(resp.replica_scores(2).replica_id(), "r0");
  EXPECT_EQ(resp.replica_scores(0).estimated_cache_hit_prob(), 1.0f);
}

TEST_F(Freshness, ARunReportsItsColdestTier) {
  auto u = csu("r0");
  add(u, K1, 128, ic::CACHE_TIER_T2);
  add(u, K2, 256, ic::CACHE_TIER_T1);
  idx.ingest(u);
  EXPECT_EQ(chain({K1, K2}, 128).replica_scores(0).tier(), ic::CACHE_TIER_T2);
}

TEST_F(Freshness, StatsAreSweptByAge) {
  auto u = csu("r0");
  u.set_timestamp_us(k_now - ttl());
  u.mutable_stats()->set_hit_rate(0.5f);
  idx.ingest(u);
  EXPECT_TRUE(idx.has_stats("t", "m", "r0"));
  idx.sweep();
  EXPECT_FALSE(idx.has_stats("t", "m", "r0"));
}

TEST_F(Freshness, CountOnlyCountsExpiredEntries) {
  index_options o = opts();
  o.count_only = true;
  policy_index counting(o);
  auto u = csu("r0");
  u.set_timestamp_us(k_expired);
  add(u, K1, 16);
  add(u, K2, 16);
  counting.ingest(u);
  EXPECT_EQ(counting.counters().prefixes_upserted, 2u);
  EXPECT_EQ(counting.counters().prefixes_expired, 2u);
  EXPECT_EQ(counting.entries(), 0u);
}

TEST_F(Freshness, TheDumpMarksStaleEntries) {
  report(K1, 0);
  report(K2, k_expired);
  const auto j = nlohmann::json::parse(idx.dump_json());
  const auto& p = j["models"][0]["prefixes"];
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0]["replicas"]["r0"]["fresh"], true);
  EXPECT_EQ(p[1]["replicas"]["r0"]["fresh"], false);
  EXPECT_EQ(j["counters"]["prefixes_expired"], 1);
}

}  // namespace
}  // namespace kvrelay::policy
