#pragma once
// The debouncer's pure core: pending index changes coalesced to their final state per
// (adapter, fingerprint). Order between different keys never matters to the server, so memory
// during a slow or absent server is bounded by the keys that changed, not by the event count
// (DESIGN.md, ordering rule 2). Past a bound, it gives up and asks for a resync instead of
// growing: the caller then sends ALL_CLEARED and re-reports what is resident.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "messages/pipeline.hpp"

namespace kvrelay {

class pending_set {
 public:
  struct options {
    bool l2_mode = false;             // --ignore-block-removed: an eviction is a T2 downgrade
    size_t max_entries = 2'000'000;   // bound on distinct pending keys
    size_t max_adds_per_unit = 16384; // keeps one CacheStateUpdate well under gRPC's 4 MiB
  };

  pending_set() : pending_set(options{}) {}
  explicit pending_set(options opts) : opts_(opts) {}

  /// Folds a shard's ops in, in order. Returns false if the bound was crossed: everything
  /// pending was dropped and overflowed() is set.
  bool apply(const shard_ops& ops);

  /// AllBlocksCleared: whatever is pending is superseded; the next unit starts with a clear.
  void clear(int64_t ts_us);

  size_t size() const { return entries_.size(); }
  size_t pending_adds() const { return adds_; }
  size_t pending_removals() const { return entries_.size() - adds_; }
  bool clear_pending() const { return clear_; }
  bool empty() const { return entries_.empty() && !clear_; }
  bool overflowed() const { return overflowed_; }
  void reset_overflow() { overflowed_ = false; }

  /// Seals what is pending into one ordered unit (clear, adds, downgrades, evictions), up to
  /// max_adds_per_unit adds; nullopt when nothing is pending.
  std::optional<emit_unit> take(uint64_t id);

  /// Drops everything (used when a resync will re-report the truth anyway).
  void reset();

 private:
  enum class state : uint8_t { add, evict, downgrade };
  struct entry {
    state s = state::add;
    tier t = tier::t1;
    uint32_t token_count = 0;
    int64_t ts_us = 0;  // eviction/downgrade time
  };
  using key = std::pair<uint32_t, uint64_t>;  // (adapter index, fingerprint)

  uint32_t adapter_index(const std::string& name);
  void set(const key& k, const entry& e);

  options opts_;
  std::vector<std::string> adapters_;
  absl::flat_hash_map<std::string, uint32_t> adapter_ids_;
  absl::flat_hash_map<key, entry> entries_;
  size_t adds_ = 0;
  int64_t adds_ts_us_ = 0;  // latest batch time with a store since the last take (R12)
  bool clear_ = false;
  int64_t clear_ts_us_ = 0;
  bool overflowed_ = false;
};

}  // namespace kvrelay
