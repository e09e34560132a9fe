#pragma once
// The demo policy server's index, with the real server's ingest semantics
// (shared/spec/policy-contract.md §2) and a longest-prefix LookupRoute (§1). Thread-safe: every
// call takes one mutex (the gRPC sync server calls it from many threads).
//
// Key (tenant, model, hash_scheme, adapter, prefix_hash) → per replica {token_count, lastSeen,
// tier}. Stats per (tenant, model, replica). Proto types are only forward-declared here.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace inferencecache::v1alpha1 {
class CacheStateUpdate;
class CacheEvent;
class LookupRouteRequest;
class LookupRouteResponse;
class GetCacheStateRequest;
class GetCacheStateResponse;
}  // namespace inferencecache::v1alpha1

namespace kvrelay::policy {

namespace ic = inferencecache::v1alpha1;

/// Tenant the real server silently drops (health probes).
inline constexpr const char* probe_tenant = "inferencecache.io/probe";
/// Tier stored for a negative CacheTier: colder than anything real.
inline constexpr int32_t coldest_tier = 0x7fffffff;

struct index_options {
  int64_t ttl_us = 30LL * 60 * 1000 * 1000;  // entries unseen this long expire (30 min)
  int32_t min_matched_tokens = 64;           // PREFIX_MATCH threshold
  size_t max_entries = 1000000;              // global cap on (key, replica) entries
  std::function<int64_t()> now_us;           // clock; default: system_clock in µs
  /// Throughput benches: count prefixes (prefixes_upserted) but store nothing, so the server is
  /// never the bottleneck of a pipeline measurement. Lookups then find nothing.
  bool count_only = false;
};

struct replica_entry {
  int32_t token_count = 0;
  int64_t last_seen_us = 0;
  int32_t tier = 1;
};

struct index_counters {
  uint64_t updates = 0;             // CacheStateUpdate messages ingested (probe included)
  uint64_t prefixes_upserted = 0;
  uint64_t prefixes_dropped = 0;    // empty scheme, empty hash, bad chain, over the cap
  uint64_t probe_dropped = 0;       // updates and events from the probe tenant
  uint64_t stats_updates = 0;
  uint64_t events = 0;
  uint64_t evicted_events = 0;
  uint64_t cleared_events = 0;
  uint64_t ignored_events = 0;      // PREFIX_ADDED, UNSPECIFIED, unknown
  uint64_t lookups = 0;
  uint64_t prefix_match = 0;
  uint64_t affinity_hint = 0;
  uint64_t no_hint = 0;
  uint64_t state_queries = 0;
  uint64_t swept = 0;               // entries expired by the TTL sweep
};

class policy_index {
 public:
  explicit policy_index(index_options opt = {});
  ~policy_index();
  policy_index(const policy_index&) = delete;
  policy_index& operator=(const policy_index&) = delete;

  /// ReportCacheState, one message.
  void ingest(const ic::CacheStateUpdate& update);
  /// PublishEvent.
  void apply(const ic::CacheEvent& event);
  /// LookupRoute.
  void lookup(const ic::LookupRouteRequest& req, ic::LookupRouteResponse* resp);
  /// GetCacheState: the replicas' stats and the number of prefixes of (tenant, model); an empty
  /// model_id counts every model of the tenant.
  void cache_state(const ic::GetCacheStateRequest& req, ic::GetCacheStateResponse* resp);

  /// Removes entries and stats whose lastSeen is older than the TTL; returns how many went.
  size_t sweep();
  /// Forgets everything (counters stay).
  void clear();

  /// Who holds one key (tests); empty when nobody.
  std::map<std::string, replica_entry> holders(const std::string& tenant, const std::string& model,
                                               const std::string& scheme,
                                               const std::string& adapter,
                                               const std::string& prefix_hash) const;
  /// Distinct keys of (tenant, model) with at least one holder.
  size_t total_prefixes(const std::string& tenant, const std::string& model) const;
  /// (key, replica) entries in the whole index.
  size_t entries() const;
  bool has_stats(const std::string& tenant, const std::string& model,
                 const std::string& replica) const;

  /// The whole index as JSON (hashes in hex), for tests and the demo's --dump-file.
  std::string dump_json() const;
  index_counters counters() const;
  const index_options& options() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay::policy
