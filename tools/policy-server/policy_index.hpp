// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The demo policy server's index, with the real server's ingest semantics
// (docs/spec/policy-contract.md §2), its freshness rule, and a longest-prefix LookupRoute (§1).
// Thread-safe: every call takes one mutex (the gRPC sync server calls it from many threads).
//
// Key (tenant, model, hash_scheme, adapter, prefix_hash) → per replica {token_count, lastSeen,
// tier}. Stats per (tenant, model, replica). Proto types are only forward-declared here.
//
// What the reference server does (read in cachebox-project/inference-cache at 77e7298,
// internal/index and internal/server; facts in our words), and what this index copies:
//
// - Shape (index.go). One map from the 5-part key above to a map replica → entry {tokenCount,
//   lastSeen, tier, LFU access count}, plus per-(tenant, model, replica) stats, all behind ONE
//   read-write lock for the whole index. Defaults: TTL 30 min, sweep every 1 min, global cap
//   1 000 000 (key, replica) entries; New() replaces a non-positive TTL or sweep interval by the
//   default. The server sets no TTL flag: a tenant's CachePolicy may override it (TTLResolver).
// - Timestamps (server/inferencecache_service.go, microsToTime). timestamp_us 0 becomes the zero
//   time, which Ingest/ApplyEvent replace by "now"; every other value, negative included, is
//   time.UnixMicro(us) taken literally (a negative one lies before the epoch, so it is stale).
// - Ingest (ingest.go, Ingest; accounting.go, upsertReplicaLocked). ReportCacheState ingests each
//   message as it arrives. Under the write lock every entry is a keyed upsert that creates the
//   key/replica if absent and overwrites token count, lastSeen (= the update's time) and tier.
//   No freshness check at ingest: an entry that arrives already older than the TTL is stored
//   like any other. Then the tenant quota (only with a CacheTenant), then the cap (only when over
//   it: every entry sorted by LFU count then oldest lastSeen, the first ones removed). After the
//   lock, reportEntries: with metrics wired (always, in server.go) it ranges over every key under
//   the read lock (EntryCountsByModel) — one O(keys) pass per CacheStateUpdate message.
// - PREFIX_EVICTED (ingest.go, ApplyEvent). Under the write lock it ranges over EVERY key of the
//   index, keeping those with the event's tenant, model and prefix (all schemes; one adapter only
//   when adapter_id is non-empty), and drops the replica from each; then reportEntries' pass.
//   PR #164 (branch cac-243-cacheevent-adapter-presence, index.go ApplyEvent) also narrows when
//   adapter_scoped is set, "" then meaning the base partition: index_options::adapter_scoped.
// - Freshness (ranking.go, freshnessAt): 0 when TTL ≤ 0; 1 when age = now − lastSeen ≤ 0; 0 when
//   age ≥ TTL; else 1 − age/TTL.
// - Lookups (lookup.go). lookupExact skips an entry whose freshness is ≤ 0 ("stale; will be
//   swept"); score = tokenCount × freshness × pressure factor × SLO bias × distinguishing power,
//   estimated_cache_hit_prob = freshness, ranked by score then replica id. lookupChain: a
//   replica's leading run goes on only through blocks it holds with freshness > 0; the run's
//   freshness is that of its oldest block, its tier the coldest of its blocks. LookupRoute
//   answers NO_HINT when tenant, model or scheme is empty.
// - TTL sweep (eviction.go, evictExpired, every sweep interval): under the write lock removes
//   every (key, replica) with now − lastSeen ≥ the tenant's TTL, and every stats entry as old.
// - Counting (snapshot.go). CacheState (GetCacheState) counts the distinct keys of (tenant,
//   model) and returns every replica's stats; /snapshot's TotalPrefixes and per-replica
//   PrefixCount count every key/entry. Neither looks at freshness: a stale entry is counted until
//   the sweep removes it. GetCacheState never sets hot_prefixes (0). The serving-replica set
//   (affinity, distinguishing power) also keeps stale entries until the sweep.
//
// This index copies: literal timestamps (0 = now), the freshness formula, stale entries skipped
// by lookups at once and removed by sweep() (policy_server runs it periodically), the run's
// oldest-block freshness and coldest tier, score = matched tokens × freshness and
// estimated_cache_hit_prob = freshness, stale entries counted by cache_state() until swept,
// hot_prefixes 0, a non-positive TTL replaced by the default. It does not model: pressure, SLO
// bias, distinguishing power, the routing floor per replica (sub-floor replicas stay in a
// PREFIX_MATCH), per-tenant TTL/quota, LFU; past the cap it drops new entries instead of evicting
// the oldest; an empty scheme in a lookup matches every scheme; an empty model_id in
// GetCacheState counts every model of the tenant; affinity lists every known replica.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

/// The reference's defaults (index.go).
inline constexpr int64_t default_ttl_us = 30LL * 60 * 1000 * 1000;       // 30 min
inline constexpr int64_t default_sweep_interval_us = 60LL * 1000 * 1000;  // 1 min

struct index_options {
  /// An entry whose age (now − lastSeen) reaches this is stale: lookups skip it, sweep() removes
  /// it. A non-positive value means the default (as the reference's New() does).
  int64_t ttl_us = default_ttl_us;
  int32_t min_matched_tokens = 64;           // PREFIX_MATCH threshold
  size_t max_entries = 1000000;              // global cap on (key, replica) entries
  std::function<int64_t()> now_us;           // clock; default: system_clock in µs
  /// Throughput benches: count prefixes (prefixes_upserted) but store nothing, so the server is
  /// never the bottleneck of a pipeline measurement. Lookups then find nothing.
  bool count_only = false;
  /// Read CacheEvent.adapter_scoped as inference-cache PR #164 does (not merged upstream): a
  /// PREFIX_EVICTED narrows to its adapter_id, "" included, when the flag is set. Off, the
  /// reference's behaviour: an empty adapter_id sweeps every adapter partition.
  bool adapter_scoped = false;
};

struct replica_entry {
  int32_t token_count = 0;
  int64_t last_seen_us = 0;
  int32_t tier = 1;
};

/// Which entries an accessor reports: every stored one (what GetCacheState counts), or only
/// those a lookup would use now (what a router sees).
enum class view { all, fresh };

/// One entry of a replica, for tests.
struct stored_entry {
  std::string hash_scheme;
  std::string adapter_id;
  std::string prefix_hash;  // raw bytes (BE8 for kvrelay)
  replica_entry entry;
};

struct index_counters {
  uint64_t updates = 0;             // CacheStateUpdate messages ingested (probe included)
  uint64_t prefixes_upserted = 0;
  uint64_t prefixes_expired = 0;    // of those, already stale on arrival (an expire-mode eviction)
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
  uint64_t swept = 0;               // entries removed by the TTL sweep
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

  /// The reference's TTL sweep: removes entries and stats whose age reached the TTL; returns how
  /// many entries went.
  size_t sweep();
  /// Forgets everything (counters stay).
  void clear();

  /// Who holds one key (tests); empty when nobody.
  std::map<std::string, replica_entry> holders(const std::string& tenant, const std::string& model,
                                               const std::string& scheme,
                                               const std::string& adapter,
                                               const std::string& prefix_hash,
                                               view v = view::all) const;
  /// Distinct keys of (tenant, model) with at least one holder (fresh: one a lookup would use).
  size_t total_prefixes(const std::string& tenant, const std::string& model,
                        view v = view::all) const;
  /// Every entry `replica` has in (tenant, model), any scheme and adapter, in no set order.
  std::vector<stored_entry> entries_of(const std::string& tenant, const std::string& model,
                                       const std::string& replica, view v = view::fresh) const;
  /// (key, replica) entries in the whole index, stale ones included until swept.
  size_t entries() const;
  /// Would a lookup use an entry seen at `last_seen_us`, now?
  bool fresh(int64_t last_seen_us) const;
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
