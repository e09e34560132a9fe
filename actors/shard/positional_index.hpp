#pragma once
// The reverse map of one (pipeline, adapter partition): engine block hash → our prefix
// fingerprint, cumulative token count and the tiers that hold the block. It turns decoded
// BlockStored / BlockRemoved / AllBlocksCleared events into upsert/evict ops for the debouncer.
// Behaviour: shared/spec/reference-behaviour.md §1.3 (P01–P09) plus DESIGN.md "Beyond the
// reference" (unknown parent policy, tiers from medium, salted/multimodal taint, resident cap).
// Pure logic: no CAF, no I/O; untrusted input never throws and never crashes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/index_op.hpp"
#include "base/kv_events.hpp"

namespace kvrelay {

/// What to do with a BlockStored whose non-nil parent hash is not in the map.
enum class unknown_parent_policy : uint8_t {
  drop,  // index nothing (default): a re-rooted chain would alias a real root prefix
  root,  // the reference's behaviour (P03): treat the event as a fresh sequence
};

struct index_options {
  unknown_parent_policy unknown_parent = unknown_parent_policy::drop;
  /// Index salted / multimodal blocks and EAGLE bigram events under the token-only fingerprint
  /// (EAGLE: the first id of each pair). Off by default: such a hint can point one tenant at
  /// another's cache or alias two images.
  bool index_salted = false;
  /// The reference's --ignore-block-removed (L2 mode): a GPU removal that leaves no known tier
  /// becomes a downgrade to T2 and the block is forgotten, instead of an eviction.
  bool ignore_block_removed = false;
  /// At most this many remembered blocks (0 = unlimited). Over it, the blocks stored first are
  /// forgotten first and evicted. Costs ~8 bytes per block, only when set.
  size_t max_resident = 0;
};

/// Counters since construction (clear() does not reset them). "events" count BlockStored or
/// BlockRemoved events, "blocks"/"hashes" count individual block hashes.
struct index_stats {
  uint64_t stored_events = 0;            // BlockStored events seen
  uint64_t stored_blocks = 0;            // blocks indexed (an upsert emitted for each)
  uint64_t empty_events = 0;             // no hashes, or block_size <= 0 (P07)
  uint64_t mismatches = 0;               // full-block count != hash count (P06)
  uint64_t token_overflow = 0;           // events rejected: cumulative count > max_token_count
  uint64_t unknown_parent_dropped = 0;   // events dropped by unknown_parent_policy::drop
  uint64_t unknown_parent_rerooted = 0;  // events re-rooted by unknown_parent_policy::root
  uint64_t tainted_blocks = 0;           // blocks remembered but not indexed (salt, MM, EAGLE)
  uint64_t fingerprint_changes = 0;      // re-store of a known hash under another fingerprint
  uint64_t location_updates = 0;         // empty-token stores that added a tier to a known hash
  uint64_t location_unknown = 0;         // empty-token stores for unknown hashes (ignored)
  uint64_t removed_events = 0;           // BlockRemoved events seen
  uint64_t unknown_removals = 0;         // removed hashes not in the map (P09)
  uint64_t removal_tier_absent = 0;      // removed from a tier the block was not known at
  uint64_t downgrades = 0;               // removals that left a colder tier (upsert emitted)
  uint64_t evictions = 0;                // evict ops from removals
  uint64_t l2_downgrades = 0;            // ignore_block_removed: removals turned into T2 upserts
  uint64_t cap_evictions = 0;            // blocks forgotten because of max_resident
  uint64_t clears = 0;
};

class positional_index {
 public:
  /// Cumulative token counts above this are rejected (event not indexed, token_overflow++):
  /// the count shares a 32-bit word with the tier bits to keep an entry at 20 bytes.
  static constexpr uint32_t max_token_count = (1u << 28) - 1;

  explicit positional_index(index_options opts = {});
  ~positional_index();
  positional_index(positional_index&&) noexcept;
  positional_index& operator=(positional_index&&) noexcept;
  positional_index(const positional_index&) = delete;
  positional_index& operator=(const positional_index&) = delete;

  /// Applies a BlockStored; appends an upsert per indexed block (and an evict for a fingerprint
  /// a re-store replaced, and evicts for blocks pushed out by max_resident).
  void stored(const block_stored& ev, std::vector<index_op>& out);

  /// Applies a BlockRemoved at ev.medium's tier; appends downgrade upserts and evicts.
  void removed(const block_removed& ev, std::vector<index_op>& out);

  /// AllBlocksCleared (P05): forget everything. Emits nothing: the caller sends ALL_CLEARED.
  void clear();

  /// Remembered blocks, tainted ones included (what max_resident bounds).
  size_t size() const noexcept;

  /// Every indexed (not tainted) block with its warmest tier, for resync. Order is unspecified.
  void for_each_resident(const std::function<void(uint64_t fingerprint, uint32_t token_count,
                                                  tier warmest)>& fn) const;

  /// Approximate heap bytes held by the maps and the cap queue (for /metrics).
  size_t heap_bytes() const noexcept;

  const index_stats& stats() const noexcept;
  const index_options& options() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay
