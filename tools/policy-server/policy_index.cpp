// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Over ~400 lines: ingest, events, lookup, the sweep, test accessors and the dump all work on the
// one private impl (interned names, partitions); split, they would need it in a shared header.
#include "tools/policy-server/policy_index.hpp"

#include <absl/container/flat_hash_map.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace kvrelay::policy {
namespace {

// Strings that repeat across millions of entries (replica, scheme, adapter) are interned to
// 32-bit ids; each prefix then holds a small vector, usually one partition with one holder.
using name_id = uint32_t;

struct holder {
  name_id replica;
  replica_entry entry;
};

struct partition {
  name_id scheme;
  name_id adapter;
  std::vector<holder> holders;
};

struct stats_entry {
  int64_t cache_memory_bytes = 0;
  float hit_rate = 0;
  float pressure = 0;
  std::string client_version;
  int64_t t2_hit_tokens = 0;
  int64_t t2_query_tokens = 0;
  int64_t last_seen_us = 0;
};

// One (tenant, model). Keyed by prefix hash first, so an eviction, which sweeps every scheme
// (CacheEvent has no hash_scheme), is one lookup.
struct model_index {
  absl::flat_hash_map<std::string, std::vector<partition>> prefixes;
  std::map<std::string, stats_entry> stats;
  std::map<name_id, size_t> replica_entries;  // replica → entries it holds
};

float finite_or_zero(float v) { return std::isfinite(v) ? v : 0.0f; }

int32_t normalize_tier(int32_t t) {
  if (t == 0) return 1;                 // UNSPECIFIED → T1
  if (t < 0) return coldest_tier;       // negative → coldest sentinel
  return t;                             // T1/T2/T3 and unknown positive (colder) kept
}

std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xf]);
  }
  return out;
}

// now − seen without overflow (a literal timestamp may be anywhere in int64), saturating as Go's
// time.Sub does.
int64_t age_us(int64_t now, int64_t seen) {
  constexpr int64_t hi = std::numeric_limits<int64_t>::max();
  constexpr int64_t lo = std::numeric_limits<int64_t>::min();
  if (seen < 0 && now > hi + seen) return hi;
  if (seen > 0 && now < lo + seen) return lo;
  return now - seen;
}

int64_t wall_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct policy_index::impl {
  index_options opt;
  mutable std::mutex mu;
  std::map<std::pair<std::string, std::string>, model_index> models;  // (tenant, model)
  size_t entries = 0;
  index_counters counters;

  int64_t now() const { return opt.now_us ? opt.now_us() : wall_now_us(); }
  // The reference's rule: an entry is usable while its age is below the TTL; at age ≥ TTL
  // lookups skip it and the sweep removes it.
  bool alive(int64_t last_seen, int64_t now_us) const {
    return age_us(now_us, last_seen) < opt.ttl_us;
  }
  // freshnessAt: 1 at age ≤ 0, falling linearly to 0 at the TTL.
  float freshness(int64_t last_seen, int64_t now_us) const {
    const int64_t age = age_us(now_us, last_seen);
    if (age <= 0) return 1.0f;
    if (age >= opt.ttl_us) return 0.0f;
    return static_cast<float>(1.0 - static_cast<double>(age) / static_cast<double>(opt.ttl_us));
  }

  std::vector<std::string> names;
  absl::flat_hash_map<std::string, name_id> ids;

  name_id intern(const std::string& name) {
    auto [it, inserted] = ids.emplace(name, static_cast<name_id>(names.size()));
    if (inserted) names.push_back(name);
    return it->second;
  }
  std::optional<name_id> find_id(const std::string& name) const {
    auto it = ids.find(name);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }

  void forget_entry(model_index& m, name_id replica) {
    auto rc = m.replica_entries.find(replica);
    if (rc != m.replica_entries.end() && --rc->second == 0) m.replica_entries.erase(rc);
    --entries;
  }

  // Removes the holders `drop` selects from one prefix's partitions, then empty partitions;
  // returns how many went. The caller erases the prefix when its vector is empty.
  template <typename Pred>
  size_t erase_holders(model_index& m, std::vector<partition>& parts, Pred drop) {
    size_t removed = 0;
    for (auto& part : parts) {
      auto& hs = part.holders;
      for (size_t i = 0; i < hs.size();) {
        if (drop(part, hs[i])) {
          forget_entry(m, hs[i].replica);
          hs[i] = hs.back();
          hs.pop_back();
          ++removed;
        } else {
          ++i;
        }
      }
    }
    parts.erase(std::remove_if(parts.begin(), parts.end(),
                               [](const partition& p) { return p.holders.empty(); }),
                parts.end());
    return removed;
  }

  // Applies `drop` to every prefix of a model, erasing prefixes left empty.
  template <typename Pred>
  size_t erase_everywhere(model_index& m, Pred drop) {
    size_t removed = 0;
    for (auto p = m.prefixes.begin(); p != m.prefixes.end();) {
      removed += erase_holders(m, p->second, drop);
      if (p->second.empty()) {
        m.prefixes.erase(p++);  // flat_hash_map::erase(iterator) returns void
      } else {
        ++p;
      }
    }
    return removed;
  }

  void upsert(model_index& m, name_id scheme, name_id adapter, const std::string& prefix,
              int32_t tokens, int64_t seen, int32_t tier, name_id replica) {
    auto slot = m.prefixes.find(prefix);
    if (slot == m.prefixes.end()) {
      if (entries >= opt.max_entries) {
        ++counters.prefixes_dropped;
        return;
      }
      slot = m.prefixes.emplace(prefix, std::vector<partition>{}).first;
    }
    auto& parts = slot->second;
    auto part = std::find_if(parts.begin(), parts.end(), [&](const partition& p) {
      return p.scheme == scheme && p.adapter == adapter;
    });
    holder* h = nullptr;
    if (part != parts.end()) {
      for (auto& x : part->holders) {
        if (x.replica == replica) h = &x;
      }
    }
    if (h == nullptr) {
      if (entries >= opt.max_entries) {
        ++counters.prefixes_dropped;
        if (parts.empty()) m.prefixes.erase(slot);
        return;
      }
      if (part == parts.end()) {
        parts.push_back(partition{scheme, adapter, {}});
        part = std::prev(parts.end());
      }
      part->holders.push_back(holder{replica, {}});
      h = &part->holders.back();
      ++m.replica_entries[replica];
      ++entries;
    }
    h->entry = replica_entry{tokens, seen, tier};  // last write wins
    ++counters.prefixes_upserted;
  }

  // Everything `replica` holds in one model, filtered by `v`; `each` gets (prefix, partition,
  // entry).
  template <typename F>
  void for_each_entry(const model_index& m, name_id replica, view v, int64_t now_us,
                      F each) const {
    for (const auto& [prefix, parts] : m.prefixes) {
      for (const auto& part : parts) {
        for (const auto& h : part.holders) {
          if (h.replica != replica) continue;
          if (v == view::fresh && !alive(h.entry.last_seen_us, now_us)) continue;
          each(prefix, part, h.entry);
        }
      }
    }
  }

  // Replicas holding `prefix` for the lookup's scheme (any, if empty) and adapter.
  std::map<name_id, const replica_entry*> holders_for(const model_index& m,
                                                      const std::string& prefix,
                                                      const std::string& scheme,
                                                      const std::string& adapter,
                                                      int64_t now_us) const {
    std::map<name_id, const replica_entry*> out;
    auto p = m.prefixes.find(prefix);
    if (p == m.prefixes.end()) return out;
    const auto scheme_id = find_id(scheme);
    const auto adapter_id = find_id(adapter);
    if (!adapter_id || (!scheme.empty() && !scheme_id)) return out;
    for (const auto& part : p->second) {
      if ((!scheme.empty() && part.scheme != *scheme_id) || part.adapter != *adapter_id) continue;
      for (const auto& h : part.holders) {
        if (!alive(h.entry.last_seen_us, now_us)) continue;
        auto [it, inserted] = out.emplace(h.replica, &h.entry);
        // Two schemes may hold the same prefix for one replica: keep the larger count.
        if (!inserted && h.entry.token_count > it->second->token_count) it->second = &h.entry;
      }
    }
    return out;
  }
};

policy_index::policy_index(index_options opt) : impl_(std::make_unique<impl>()) {
  impl_->opt = std::move(opt);
  if (impl_->opt.ttl_us <= 0) impl_->opt.ttl_us = default_ttl_us;
}
policy_index::~policy_index() = default;

const index_options& policy_index::options() const noexcept { return impl_->opt; }

void policy_index::ingest(const ic::CacheStateUpdate& u) {
  auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  ++d.counters.updates;
  if (u.tenant_id() == probe_tenant) {
    ++d.counters.probe_dropped;
    return;
  }
  const int64_t now_us = d.now();
  const int64_t seen = u.timestamp_us() == 0 ? now_us : u.timestamp_us();
  // Stored like any other entry (the reference checks nothing at ingest); counted apart because
  // kvrelay's expire mode sends evictions this way.
  const bool expired = !d.alive(seen, now_us);
  auto& m = d.models[{u.tenant_id(), u.model_id()}];
  if (u.has_stats()) {
    const auto& s = u.stats();
    auto& st = m.stats[u.replica_id()];  // the top-level replica_id is authoritative
    st.cache_memory_bytes = s.cache_memory_bytes();
    st.hit_rate = finite_or_zero(s.hit_rate());
    st.pressure = finite_or_zero(s.pressure());
    st.client_version = s.client_version();
    st.t2_hit_tokens = s.t2_hit_tokens();
    st.t2_query_tokens = s.t2_query_tokens();
    st.last_seen_us = seen;
    ++d.counters.stats_updates;
  }
  if (d.opt.count_only) {
    d.counters.prefixes_upserted += static_cast<uint64_t>(u.prefixes_size());
    if (expired) d.counters.prefixes_expired += static_cast<uint64_t>(u.prefixes_size());
    return;
  }
  if (u.hash_scheme().empty()) {
    // Fail-open: prefixes under an unknown (empty) scheme could never be looked up correctly.
    d.counters.prefixes_dropped += static_cast<uint64_t>(u.prefixes_size());
    return;
  }
  const name_id scheme = d.intern(u.hash_scheme());
  const name_id replica = d.intern(u.replica_id());
  for (const auto& p : u.prefixes()) {
    const bool chain_bad = p.block_hashes_size() > 0 && p.block_token_counts_size() > 0 &&
                           p.block_hashes_size() != p.block_token_counts_size();
    if (chain_bad || p.prefix_hash().empty()) {
      ++d.counters.prefixes_dropped;
      continue;
    }
    const std::string& adapter = p.adapter_id().empty() ? u.adapter_id() : p.adapter_id();
    const uint64_t before = d.counters.prefixes_upserted;
    d.upsert(m, scheme, d.intern(adapter), p.prefix_hash(), p.token_count(), seen,
             normalize_tier(static_cast<int32_t>(p.tier())), replica);
    if (expired) d.counters.prefixes_expired += d.counters.prefixes_upserted - before;
  }
}

void policy_index::apply(const ic::CacheEvent& e) {
  auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  ++d.counters.events;
  if (e.tenant_id() == probe_tenant) {
    ++d.counters.probe_dropped;
    return;
  }
  auto mit = d.models.find({e.tenant_id(), e.model_id()});
  switch (e.type()) {
    case ic::CacheEvent::PREFIX_EVICTED: {
      ++d.counters.evicted_events;
      if (mit == d.models.end()) return;
      auto& m = mit->second;
      auto p = m.prefixes.find(e.prefix_hash());
      const auto replica = d.find_id(e.replica_id());
      if (p == m.prefixes.end() || !replica) return;
      // Across every hash scheme; narrowed to one adapter when adapter_id is non-empty, or, as
      // PR #164 reads it, when adapter_scoped is set ("" then is the base partition).
      const auto adapter = d.find_id(e.adapter_id());
      const bool narrowed = !e.adapter_id().empty() || (d.opt.adapter_scoped && e.adapter_scoped());
      if (narrowed && !adapter) return;
      d.erase_holders(m, p->second, [&](const partition& part, const holder& h) {
        return h.replica == *replica && (!narrowed || part.adapter == *adapter);
      });
      if (p->second.empty()) m.prefixes.erase(p);
      return;
    }
    case ic::CacheEvent::ALL_CLEARED: {
      ++d.counters.cleared_events;
      if (mit == d.models.end()) return;
      auto& m = mit->second;
      if (const auto replica = d.find_id(e.replica_id())) {
        d.erase_everywhere(m, [&](const partition&, const holder& h) {
          return h.replica == *replica;
        });
      }
      m.stats.erase(e.replica_id());
      return;
    }
    case ic::CacheEvent::REPLICA_UPDATED: {
      if (mit == d.models.end()) return;
      auto st = mit->second.stats.find(e.replica_id());
      if (st != mit->second.stats.end()) {
        st->second.last_seen_us = e.timestamp_us() == 0 ? d.now() : e.timestamp_us();
      }
      return;
    }
    default:
      ++d.counters.ignored_events;  // PREFIX_ADDED does nothing; UNSPECIFIED/unknown ignored
      return;
  }
}

void policy_index::lookup(const ic::LookupRouteRequest& req, ic::LookupRouteResponse* resp) {
  auto& d = *impl_;
  const auto started = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(d.mu);
  ++d.counters.lookups;
  resp->Clear();
  resp->set_adapter_id(req.adapter_id());
  auto finish = [&](const char* reason) {
    resp->set_reason_code(reason);
    if (resp->reason_code() == "PREFIX_MATCH") ++d.counters.prefix_match;
    else if (resp->reason_code() == "AFFINITY_HINT") ++d.counters.affinity_hint;
    else ++d.counters.no_hint;
    resp->set_lookup_latency_us(std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::steady_clock::now() - started)
                                    .count());
  };
  auto mit = d.models.find({req.tenant_id(), req.model_id()});
  if (mit == d.models.end()) return finish("NO_HINT");
  const auto& m = mit->second;
  const int64_t now_us = d.now();

  struct match {
    int64_t tokens = 0;
    int32_t tier = 0;                                      // the coldest block of the run
    int64_t oldest = std::numeric_limits<int64_t>::max();  // lastSeen of its oldest block
  };
  std::map<std::string, match> matched;
  if (req.block_hashes_size() > 0) {
    if (req.block_hashes_size() != req.block_token_counts_size()) return finish("NO_HINT");
    for (int32_t c : req.block_token_counts()) {
      if (c < 0) return finish("NO_HINT");  // malformed: a block cannot hold negative tokens
    }
    // Longest leading run per replica: a replica stays in the run while it holds every block.
    std::set<name_id> running;
    for (int i = 0; i < req.block_hashes_size(); ++i) {
      const auto held = d.holders_for(m, req.block_hashes(i), req.hash_scheme(),
                                      req.adapter_id(), now_us);
      std::set<name_id> next;
      for (const auto& [replica, e] : held) {
        if (i > 0 && running.count(replica) == 0) continue;
        next.insert(replica);
        auto& mt = matched[d.names[replica]];
        mt.tokens += req.block_token_counts(i);
        mt.tier = std::max(mt.tier, e->tier);
        mt.oldest = std::min(mt.oldest, e->last_seen_us);
      }
      running = std::move(next);
      if (running.empty()) break;
    }
  } else if (!req.prefix_hash().empty()) {
    // Legacy exact match: the stored cumulative token count is the match.
    for (const auto& [replica, e] :
         d.holders_for(m, req.prefix_hash(), req.hash_scheme(), req.adapter_id(), now_us)) {
      matched[d.names[replica]] = match{e->token_count, e->tier, e->last_seen_us};
    }
  } else {
    return finish("NO_HINT");
  }

  int64_t best = 0;
  for (const auto& [replica, mt] : matched) best = std::max(best, mt.tokens);
  if (best > 0 && best >= d.opt.min_matched_tokens) {
    // The reference's baseline score (no pressure, SLO or distinguishing-power factor): matched
    // tokens × the run's freshness; ties by replica id (`matched` iterates in id order).
    struct ranked_match {
      const std::string* replica;
      const match* mt;
      float fresh;
      float score;
    };
    std::vector<ranked_match> ranked;
    for (const auto& [replica, mt] : matched) {
      const float fresh = d.freshness(mt.oldest, now_us);
      ranked.push_back({&replica, &mt, fresh, static_cast<float>(mt.tokens) * fresh});
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const ranked_match& a, const ranked_match& b) {
      return a.score > b.score;
    });
    for (const auto& r : ranked) {
      const match& mt = *r.mt;
      auto* s = resp->add_replica_scores();
      s->set_replica_id(*r.replica);
      s->set_matched_tokens(static_cast<int32_t>(std::min<int64_t>(mt.tokens, INT32_MAX)));
      s->set_score(r.score);
      s->set_estimated_cache_hit_prob(r.fresh);
      s->set_tier(mt.tier >= 1 && mt.tier <= 3 ? static_cast<ic::CacheTier>(mt.tier)
                                               : ic::CACHE_TIER_T3);
    }
    return finish("PREFIX_MATCH");
  }
  // No usable match: an affinity hint over every replica known for the model, if any.
  std::set<std::string> known;
  for (const auto& [replica, n] : m.replica_entries) known.insert(d.names[replica]);
  for (const auto& [replica, st] : m.stats) known.insert(replica);
  if (known.empty()) return finish("NO_HINT");
  for (const auto& replica : known) {
    auto* s = resp->add_replica_scores();
    s->set_replica_id(replica);
    auto it = matched.find(replica);
    s->set_matched_tokens(
        it == matched.end() ? 0 : static_cast<int32_t>(std::min<int64_t>(it->second.tokens, INT32_MAX)));
    s->set_score(0.0f);
  }
  finish("AFFINITY_HINT");
}

void policy_index::cache_state(const ic::GetCacheStateRequest& req,
                               ic::GetCacheStateResponse* resp) {
  auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  ++d.counters.state_queries;
  resp->Clear();
  // Like the reference's CacheState: every stored key counts, stale or not, until the sweep.
  int64_t total = 0;
  for (const auto& [key, m] : d.models) {
    if (key.first != req.tenant_id()) continue;
    if (!req.model_id().empty() && key.second != req.model_id()) continue;
    for (const auto& [prefix, parts] : m.prefixes) {
      for (const auto& part : parts) {
        if (part.holders.empty()) continue;
        ++total;
      }
    }
    for (const auto& [replica, st] : m.stats) {
      auto* r = resp->add_replicas();
      r->set_replica_id(replica);
      r->set_cache_memory_bytes(st.cache_memory_bytes);
      r->set_hit_rate(st.hit_rate);
      r->set_pressure(st.pressure);
      r->set_client_version(st.client_version);
      r->set_t2_hit_tokens(st.t2_hit_tokens);
      r->set_t2_query_tokens(st.t2_query_tokens);
    }
  }
  resp->mutable_summary()->set_total_prefixes(total);
  resp->mutable_summary()->set_hot_prefixes(0);  // the reference never sets it
}

size_t policy_index::sweep() {
  auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  const int64_t now_us = d.now();
  size_t removed = 0;
  for (auto& [key, m] : d.models) {
    removed += d.erase_everywhere(m, [&](const partition&, const holder& h) {
      return !d.alive(h.entry.last_seen_us, now_us);
    });
    for (auto st = m.stats.begin(); st != m.stats.end();) {
      st = d.alive(st->second.last_seen_us, now_us) ? std::next(st) : m.stats.erase(st);
    }
  }
  d.counters.swept += removed;
  return removed;
}

void policy_index::clear() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->models.clear();
  impl_->entries = 0;
}

std::map<std::string, replica_entry> policy_index::holders(const std::string& tenant,
                                                           const std::string& model,
                                                           const std::string& scheme,
                                                           const std::string& adapter,
                                                           const std::string& prefix,
                                                           view v) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const int64_t now_us = impl_->now();
  auto mit = impl_->models.find({tenant, model});
  if (mit == impl_->models.end()) return {};
  auto p = mit->second.prefixes.find(prefix);
  if (p == mit->second.prefixes.end()) return {};
  std::map<std::string, replica_entry> out;
  const auto scheme_id = impl_->find_id(scheme), adapter_id = impl_->find_id(adapter);
  if (!scheme_id || !adapter_id) return out;
  for (const auto& part : p->second) {
    if (part.scheme != *scheme_id || part.adapter != *adapter_id) continue;
    for (const auto& h : part.holders) {
      if (v == view::fresh && !impl_->alive(h.entry.last_seen_us, now_us)) continue;
      out.emplace(impl_->names[h.replica], h.entry);
    }
  }
  return out;
}

size_t policy_index::total_prefixes(const std::string& tenant, const std::string& model,
                                    view v) const {
  const auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  auto mit = d.models.find({tenant, model});
  if (mit == d.models.end()) return 0;
  const int64_t now_us = d.now();
  size_t n = 0;
  for (const auto& [prefix, parts] : mit->second.prefixes) {
    for (const auto& part : parts) {
      n += std::any_of(part.holders.begin(), part.holders.end(), [&](const holder& h) {
        return v == view::all || d.alive(h.entry.last_seen_us, now_us);
      });
    }
  }
  return n;
}

std::vector<stored_entry> policy_index::entries_of(const std::string& tenant,
                                                   const std::string& model,
                                                   const std::string& replica, view v) const {
  const auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  std::vector<stored_entry> out;
  auto mit = d.models.find({tenant, model});
  const auto id = d.find_id(replica);
  if (mit == d.models.end() || !id) return out;
  d.for_each_entry(mit->second, *id, v, d.now(),
                   [&](const std::string& prefix, const partition& part, const replica_entry& e) {
                     out.push_back({d.names[part.scheme], d.names[part.adapter], prefix, e});
                   });
  return out;
}

bool policy_index::fresh(int64_t last_seen_us) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->alive(last_seen_us, impl_->now());
}

size_t policy_index::entries() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->entries;
}

bool policy_index::has_stats(const std::string& tenant, const std::string& model,
                             const std::string& replica) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto mit = impl_->models.find({tenant, model});
  return mit != impl_->models.end() && mit->second.stats.count(replica) != 0;
}

index_counters policy_index::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

std::string policy_index::dump_json() const {
  using nlohmann::json;
  std::lock_guard<std::mutex> lock(impl_->mu);
  const int64_t now_us = impl_->now();
  json models = json::array();
  for (const auto& [key, m] : impl_->models) {
    // Sorted output so two dumps of the same state are byte-identical.
    std::map<std::string, const std::vector<partition>*> sorted;
    for (const auto& [prefix, parts] : m.prefixes) sorted.emplace(prefix, &parts);
    json prefixes = json::array();
    for (const auto& [prefix, parts] : sorted) {
      std::map<std::pair<std::string, std::string>, json> by_partition;
      for (const auto& part : *parts) {
        json replicas = json::object();  // a json object keeps its keys sorted
        for (const auto& h : part.holders) {
          const bool fresh = impl_->alive(h.entry.last_seen_us, now_us);
          replicas[impl_->names[h.replica]] = {{"token_count", h.entry.token_count},
                                               {"last_seen_us", h.entry.last_seen_us},
                                               {"tier", h.entry.tier},
                                               {"fresh", fresh}};
        }
        by_partition[{impl_->names[part.scheme], impl_->names[part.adapter]}] = replicas;
      }
      for (const auto& [part, replicas] : by_partition) {
        prefixes.push_back({{"prefix_hash", hex(prefix)},
                            {"hash_scheme", part.first},
                            {"adapter_id", part.second},
                            {"replicas", replicas}});
      }
    }
    json stats = json::object();
    for (const auto& [replica, st] : m.stats) {
      stats[replica] = {{"cache_memory_bytes", st.cache_memory_bytes},
                        {"hit_rate", st.hit_rate},
                        {"pressure", st.pressure},
                        {"client_version", st.client_version},
                        {"t2_hit_tokens", st.t2_hit_tokens},
                        {"t2_query_tokens", st.t2_query_tokens},
                        {"last_seen_us", st.last_seen_us}};
    }
    models.push_back({{"tenant_id", key.first},
                      {"model_id", key.second},
                      {"prefixes", prefixes},
                      {"stats", stats}});
  }
  const auto& c = impl_->counters;
  json counters = {{"updates", c.updates},
                   {"prefixes_upserted", c.prefixes_upserted},
                   {"prefixes_expired", c.prefixes_expired},
                   {"prefixes_dropped", c.prefixes_dropped},
                   {"probe_dropped", c.probe_dropped},
                   {"stats_updates", c.stats_updates},
                   {"events", c.events},
                   {"evicted_events", c.evicted_events},
                   {"cleared_events", c.cleared_events},
                   {"ignored_events", c.ignored_events},
                   {"lookups", c.lookups},
                   {"prefix_match", c.prefix_match},
                   {"affinity_hint", c.affinity_hint},
                   {"no_hint", c.no_hint},
                   {"state_queries", c.state_queries},
                   {"swept", c.swept}};
  json out = {{"entries", impl_->entries}, {"models", models}, {"counters", counters}};
  return out.dump(2) + "\n";
}

}  // namespace kvrelay::policy
