// The demo policy server's index against the real server's ingest semantics
// (shared/spec/policy-contract.md §2) and the longest-prefix LookupRoute (§1).
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
  ic::LookupRouteRequest r;
  r.set_model_id("m");
  r.set_tenant_id("t");
  r.set_hash_scheme("vllm");
  r.set_prefix_hash(K2);
  ic::LookupRouteResponse resp;
  idx.lookup(r, &resp);
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

}  // namespace
}  // namespace kvrelay::policy
