// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A C++ model of the reference policy server's index (cachebox-project/inference-cache,
// internal/index; the facts are in tools/policy-server/policy_index.hpp, no code was copied), for
// bench_server_model.cpp, which says what is measured.
//
// It keeps the reference's shape: one hash map (a Swiss table, as Go 1.24+ maps are) from a
// 5-string key (tenant, model, scheme, adapter, prefix) to a pointer to a per-key map replica →
// pointer to {token count, lastSeen, tier, LFU count}; the bookkeeping maps an upsert/remove keeps
// in step (distinct keys per tenant and per (tenant, model), replicas serving a scope); one
// reader-writer lock for the whole index, writer-preferring as Go's sync.RWMutex is (once a writer
// waits, new readers wait behind it). Strings are Go-like (pointer, length) headers whose bytes
// live in their own allocation: one per key for the prefix hash, one per decoded message for
// tenant, model, scheme, adapter and replica (protobuf-go gives every message its own copies,
// which all keys ingested from that message share).
//
// Not modelled: gRPC and protobuf decoding, Go's GC and write barriers, Prometheus, the policy
// store's resolvers (TTL, quota, eviction algorithm), the cap sweep (it only runs over the cap).
// So the figures are a model's, not the server's; the ratios between modes are the point.
#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>  // std::shared_lock
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvrelay::server_model {

using gostr = std::string_view;  // a Go string header; the bytes are owned by a byte_store

// sync.RWMutex's policy on a pthread rwlock: a waiting writer holds back new readers.
class go_rwmutex {
 public:
  go_rwmutex() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~go_rwmutex() { pthread_rwlock_destroy(&lock_); }
  go_rwmutex(const go_rwmutex&) = delete;
  go_rwmutex& operator=(const go_rwmutex&) = delete;
  void lock() { pthread_rwlock_wrlock(&lock_); }
  void unlock() { pthread_rwlock_unlock(&lock_); }
  void lock_shared() { pthread_rwlock_rdlock(&lock_); }
  bool try_lock_shared() { return pthread_rwlock_tryrdlock(&lock_) == 0; }
  void unlock_shared() { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

// Owns the bytes behind gostr headers, one allocation per copy as a Go decoder makes them.
class byte_store {
 public:
  gostr copy(std::string_view s) {
    auto buf = std::make_unique<char[]>(s.empty() ? 1 : s.size());
    if (!s.empty()) std::memcpy(buf.get(), s.data(), s.size());
    const gostr out(buf.get(), s.size());
    bufs_.push_back(std::move(buf));
    return out;
  }

 private:
  std::vector<std::unique_ptr<char[]>> bufs_;
};

struct prefix_key {
  gostr tenant, model, scheme, adapter, prefix;
  friend bool operator==(const prefix_key& a, const prefix_key& b) {
    return a.tenant == b.tenant && a.model == b.model && a.scheme == b.scheme &&
           a.adapter == b.adapter && a.prefix == b.prefix;
  }
  template <typename H>
  friend H AbslHashValue(H h, const prefix_key& k) {
    return H::combine(std::move(h), k.tenant, k.model, k.scheme, k.adapter, k.prefix);
  }
};

struct scope_key {
  gostr tenant, model, scheme;
  friend bool operator==(const scope_key& a, const scope_key& b) {
    return a.tenant == b.tenant && a.model == b.model && a.scheme == b.scheme;
  }
  template <typename H>
  friend H AbslHashValue(H h, const scope_key& k) {
    return H::combine(std::move(h), k.tenant, k.model, k.scheme);
  }
};

struct replica_entry {
  int32_t token_count = 0;
  int64_t last_seen_us = 0;
  int32_t tier = 1;
  std::atomic<int64_t> access_count{0};
};
using replica_map = absl::flat_hash_map<gostr, std::unique_ptr<replica_entry>>;

struct entry_in {
  gostr prefix, adapter;
  int32_t tokens = 0;
};
struct update_in {  // one CacheStateUpdate message
  gostr replica, model, tenant, scheme;
  int64_t ts_us = 0;
  std::vector<entry_in> entries;
};
struct event_in {  // one CacheEvent PREFIX_EVICTED
  gostr replica, model, tenant, prefix, adapter;
};

class reference_index {
 public:
  // Ingest: the keyed upserts under the write lock, then (gauge) the per-message key pass.
  void ingest(const update_in& u, bool gauge = true) {
    {
      std::unique_lock<go_rwmutex> lock(mu);
      for (const auto& e : u.entries) {
        upsert_locked({u.tenant, u.model, u.scheme, e.adapter, e.prefix}, u.replica, e.tokens,
                      u.ts_us);
      }
      // enforceCapLocked: an O(1) comparison; its sort only runs past the cap (1 M entries).
    }
    if (gauge) report_entries();
  }

  // ApplyEvent(PREFIX_EVICTED): every key visited under the write lock, then the key pass.
  void prefix_evicted(const event_in& e, bool gauge = true) {
    {
      std::unique_lock<go_rwmutex> lock(mu);
      evict_range_locked(e);
    }
    if (gauge) report_entries();
  }

  // The range itself; the caller holds the write lock.
  size_t evict_range_locked(const event_in& e) {
    victims_.clear();
    for (auto& [key, replicas] : prefixes_) {
      if (key.tenant != e.tenant || key.model != e.model || key.prefix != e.prefix) continue;
      if (!e.adapter.empty() && key.adapter != e.adapter) continue;
      if (replicas->contains(e.replica)) victims_.push_back(key);
    }
    // Go may delete during a range; a flat_hash_map may not, so removal waits for the end.
    for (const auto& key : victims_) remove_locked(key, e.replica);
    return victims_.size();
  }

  // reportEntries: EntryCountsByModel under the read lock, then one gauge per model.
  void report_entries() {
    std::lock_guard<std::mutex> report(report_mu_);
    absl::flat_hash_map<gostr, int> counts;
    {
      std::shared_lock<go_rwmutex> lock(mu);
      counts = count_by_model_locked();
    }
    for (const auto& [model, n] : counts) gauges_[std::string(model)] = n;
  }

  // EntryCountsByModel's walk; the caller holds the read lock.
  absl::flat_hash_map<gostr, int> count_by_model_locked() const {
    absl::flat_hash_map<gostr, int> counts;
    for (const auto& entry : prefixes_) {
      if (reserved_.contains(entry.first.tenant)) continue;
      ++counts[entry.first.model];
    }
    return counts;
  }

  // lookupExact's read side: the fresh holders' matched tokens (summed, so nothing is elided).
  int64_t lookup(const prefix_key& key, int64_t now_us, int64_t ttl_us) {
    std::shared_lock<go_rwmutex> lock(mu);
    const auto it = prefixes_.find(key);
    if (it == prefixes_.end()) return 0;
    int64_t tokens = 0;
    for (const auto& [replica, e] : *it->second) {
      if (now_us - e->last_seen_us >= ttl_us) continue;  // stale; will be swept
      tokens += e->token_count;
    }
    return tokens;
  }

  size_t keys() {
    std::shared_lock<go_rwmutex> lock(mu);
    return prefixes_.size();
  }

  go_rwmutex mu;  // the index's one lock (public: the lock-wait cases hold it)

 private:
  void upsert_locked(const prefix_key& key, gostr replica, int32_t tokens, int64_t ts_us) {
    auto& replicas = prefixes_[key];
    if (!replicas) {
      replicas = std::make_unique<replica_map>();
      ++by_tenant_[key.tenant];
      ++by_tenant_model_[{key.tenant, key.model}];
    }
    auto& e = (*replicas)[replica];
    if (!e) {
      e = std::make_unique<replica_entry>();
      ++total_entries_;
      ++serving_[{key.tenant, key.model, key.scheme}][replica];
    }
    e->token_count = tokens;
    e->last_seen_us = ts_us;
    e->tier = 1;
  }

  void remove_locked(const prefix_key& key, gostr replica) {
    const auto it = prefixes_.find(key);
    if (it == prefixes_.end() || it->second->erase(replica) == 0) return;
    --total_entries_;
    if (it->second->empty()) {
      prefixes_.erase(it);
      if (--by_tenant_[key.tenant] <= 0) by_tenant_.erase(key.tenant);
      if (--by_tenant_model_[{key.tenant, key.model}] <= 0) {
        by_tenant_model_.erase({key.tenant, key.model});
      }
    }
    auto scope = serving_.find({key.tenant, key.model, key.scheme});
    if (scope == serving_.end()) return;
    if (--scope->second[replica] <= 0) scope->second.erase(replica);
    if (scope->second.empty()) serving_.erase(scope);
  }

  absl::flat_hash_map<prefix_key, std::unique_ptr<replica_map>> prefixes_;
  absl::flat_hash_map<gostr, int> by_tenant_;
  absl::flat_hash_map<std::pair<gostr, gostr>, int> by_tenant_model_;
  absl::flat_hash_map<scope_key, absl::flat_hash_map<gostr, int>> serving_;
  absl::flat_hash_set<gostr> reserved_{"inferencecache.io/probe"};
  size_t total_entries_ = 0;
  std::vector<prefix_key> victims_;
  std::mutex report_mu_;
  std::map<std::string, int> gauges_;  // stands in for the Prometheus gauge vector
};

// -- the workload: one tenant and model, 4 replicas, 20 % of keys under one of 8 LoRA adapters --

inline constexpr int k_replicas = 4;
inline constexpr int64_t k_ttl_us = 30LL * 60 * 1'000'000;
inline constexpr int64_t k_now_us = 1'700'000'000'000'000;
inline constexpr size_t k_message = 256;  // entries per message when the index is filled

inline uint64_t mix(uint64_t x) {  // splitmix64: distinct, well-spread prefix hashes
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::string be8(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

inline std::string adapter_name(size_t key) {
  return key % 5 == 0 ? "lora-" + std::to_string(key / 5 % 8) : "";
}

// Key i belongs to replica i % 4 and has prefix be8(mix(i)).
struct model_world {
  byte_store bytes;
  reference_index index;
  size_t n = 0;

  // One decoded message's strings (its own copies, as protobuf-go makes them).
  update_in message(size_t replica, int64_t ts_us) {
    update_in u;
    u.replica = bytes.copy("vllm-llama-8b-" + std::to_string(replica));
    u.model = bytes.copy("meta-llama/Llama-3.1-8B-Instruct");
    u.tenant = bytes.copy("team-search-prod");
    u.scheme = bytes.copy("vllm");
    u.ts_us = ts_us;
    return u;
  }
  void add_entry(update_in& u, size_t key) {
    u.entries.push_back({bytes.copy(be8(mix(key))), bytes.copy(adapter_name(key)),
                         static_cast<int32_t>(16 * (key % 512 + 1))});
  }
  // The key's ingest as kvrelay sends an add (fresh) or an expire-mode eviction (ts 1).
  update_in report(const std::vector<size_t>& keys, int64_t ts_us) {
    auto u = message(keys.front() % k_replicas, ts_us);
    for (size_t k : keys) add_entry(u, k);
    return u;
  }
  event_in evicted(size_t key) {
    return {bytes.copy("vllm-llama-8b-" + std::to_string(key % k_replicas)),
            bytes.copy("meta-llama/Llama-3.1-8B-Instruct"), bytes.copy("team-search-prod"),
            bytes.copy(be8(mix(key))), bytes.copy(adapter_name(key))};
  }
  prefix_key lookup_key(size_t key) {
    return {bytes.copy("team-search-prod"), bytes.copy("meta-llama/Llama-3.1-8B-Instruct"),
            bytes.copy("vllm"), bytes.copy(adapter_name(key)), bytes.copy(be8(mix(key)))};
  }

  explicit model_world(size_t keys) : n(keys) {
    for (size_t r = 0; r < k_replicas; ++r) {
      for (size_t first = r; first < n; first += k_message * k_replicas) {
        auto u = message(r, k_now_us);
        for (size_t k = first; k < n && u.entries.size() < k_message; k += k_replicas) {
          add_entry(u, k);
        }
        index.ingest(u, /*gauge=*/false);
      }
    }
  }
};

inline model_world& world(size_t keys) {
  static std::map<size_t, std::unique_ptr<model_world>> worlds;
  auto& w = worlds[keys];
  if (!w) w = std::make_unique<model_world>(keys);
  return *w;
}

// Consecutive keys of one replica, wrapping inside the index: key i, i+4, i+8, …
inline std::vector<size_t> batch_of(size_t start, size_t k, size_t n) {
  std::vector<size_t> keys;
  for (size_t j = 0; j < k; ++j) keys.push_back((start + j * k_replicas) % n);
  return keys;
}

}  // namespace kvrelay::server_model
