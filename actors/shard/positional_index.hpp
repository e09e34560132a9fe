// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The reverse map of one (pipeline, adapter) partition: engine block hash → our prefix
// fingerprint, cumulative token count and, per tier, how many physical copies the engine holds.
// It turns decoded BlockStored / BlockRemoved / AllBlocksCleared events into upsert/evict ops
// for the debouncer. Behaviour: docs/spec/reference-behaviour.md §1.3 (P01–P09) plus docs/spec/design-rules.md
// "Beyond the reference" (unknown parent policy, tiers from medium, salted/multimodal taint,
// resident cap) and these rules of its own:
//
//  IX1. Copies. vLLM does not deduplicate cached blocks: one hash can be held by several physical
//      blocks, each stored and removed on its own (#48933, #55092). The index counts copies per
//      (hash, tier). A store at a tier adds a copy; a removal takes one away; only the removal
//      of the last copy of a tier downgrades (another tier still holds the block) or evicts.
//  IX2. Re-announcements. A store of a held hash whose `origin` is REUSED (vLLM #51699, sent for
//      prefix-cache hits under kv_cache_report_mode="full", #45261) refreshes the entry (it is
//      re-reported) but adds no copy, except that a tier that held none gets one. A store
//      without `origin`, or with NEW, is a new copy: an engine in "full" mode that does not send
//      `origin` makes the count too high (see IX4 for what corrects it). Counted as
//      `reannounced` and `copy_added`.
//  IX3. Saturation. Counts live in spare bits of the entry: at most 7 GPU copies and 3 at each
//      other tier. A copy beyond that is not counted (`copies_saturated`), so the block is
//      evicted after that many removals while the engine may still hold more: a missed hit,
//      never a hint the engine cannot serve.
//  IX4. A BlockRemoved that carries `remaining_copy_counts` (vLLM #48933) is authoritative: the
//      tier's count becomes that value (saturated), 0 removes the tier. A list whose length is
//      not the number of hashes is ignored (`copy_counts_ignored`) and the removal counts down.
//  IX5. AllBlocksCleared, a new engine incarnation and lost history clear the index, counts
//      included.
//  IX6. A block whose medium is unknown is never indexed, and a removal at an unknown medium
//      changes nothing (the decoder filters both first; this is the index's own guard).
//  IX7. `index_op::introduces` is set on the upsert of a key new to the partition: a new block,
//      a re-store under another fingerprint, or a formerly tainted block indexed now.
//  IX8. Bounded tiers. With max_t2_blocks / max_t3_blocks set, at most that many blocks hold a
//      copy at T2 / T3. They are kept in store order, a store of a block the tier already holds
//      moving it to the back (least recently stored goes first: kvrelay never sees a hit). Over
//      the bound, the front block loses the tier: when another tier holds it, it downgrades (an
//      upsert if its warmest tier changed), else it is evicted and forgotten; counted in
//      t2_cap_drops / t3_cap_drops. For sources that store and never remove (LMCache's
//      multi-process mode, LMCache #5076: BlockStored "CPU", no BlockRemoved, no clear): a tier
//      that sends removals stays under a bound above its real capacity and never meets it.
//  IX9. Inside the budget. A block the index does not hold yet is taken only while the memory
//      budget has room at its tier (memory_budget IB3); refused, it and the rest of its chain in
//      the event are not indexed and not reported (counted in refused_blocks), so the server
//      never holds an entry the index could not evict; a later block chained to it has an
//      unknown parent. Blocks already held are always updated.
//
// Pure logic: no CAF, no I/O; untrusted input never throws and never crashes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/index_op.hpp"
#include "base/kv_events.hpp"
#include "base/memory_budget.hpp"
#include "base/probe_table.hpp"
#include "durable/format/snapshot_format.hpp"

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
  /// IX8: at most this many blocks with a copy at T2 / T3 (0 = unbounded). ~8 bytes per block
  /// held at the tier, only when set.
  size_t max_t2_blocks = 0;
  size_t max_t3_blocks = 0;
  /// IX9: the budget that says whether a block not held yet may be taken (memory_budget IB3);
  /// null: always.
  std::shared_ptr<const memory_budget> budget;
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
  uint64_t copy_added = 0;               // store of a held hash at a held tier: one more copy (IX1)
  uint64_t reannounced = 0;              // REUSED store of a held hash: refreshed, no copy (IX2)
  uint64_t copies_saturated = 0;         // a copy not counted: the tier's count is at its max (IX3)
  uint64_t copy_removed = 0;             // a removal that left copies at its tier: no op (IX1)
  uint64_t authoritative_counts = 0;     // hashes whose count came from remaining_copy_counts
  uint64_t copy_counts_ignored = 0;      // removal events whose remaining_copy_counts was unusable
  uint64_t unknown_medium_events = 0;    // events at a medium we do not know: ignored (IX6)
  uint64_t downgrades = 0;               // removals that left a colder tier (upsert emitted)
  uint64_t evictions = 0;                // evict ops from removals
  uint64_t l2_downgrades = 0;            // ignore_block_removed: removals turned into T2 upserts
  uint64_t cap_evictions = 0;            // blocks forgotten because of max_resident
  uint64_t t2_cap_drops = 0;             // T2 copies dropped by max_t2_blocks (IX8)
  uint64_t t3_cap_drops = 0;             // T3 copies dropped by max_t3_blocks (IX8)
  uint64_t refused_blocks = 0;           // blocks the memory budget had no room for (IX9)
  uint64_t clears = 0;
};

/// Told when a key (index_key of an engine hash) becomes resident in an index and when it leaves
/// (removal, cap), so that something outside (the removal router's directory) can follow
/// membership exactly. Not told on clear(): whoever clears knows.
class residency_observer {
 public:
  virtual ~residency_observer() = default;
  virtual void added(uint64_t key) = 0;
  virtual void forgotten(uint64_t key) = 0;
};

class positional_index {
 public:
  /// Cumulative token counts above this are rejected (event not indexed, token_overflow++):
  /// the count shares a 32-bit word with the copy counts and the taint bit to keep an entry at
  /// 20 bytes. 16 Mi tokens is above every context length served today.
  static constexpr uint32_t max_token_count = (1u << 24) - 1;
  /// Most copies counted per tier (IX3).
  static constexpr uint32_t max_copies_t1 = 7;
  static constexpr uint32_t max_copies_other = 3;

  /// What one hash of a removal did.
  enum class removal : uint8_t {
    unknown,     // not in the map (P09)
    tier_absent, // the block was not known at that tier
    copy_left,   // copies remain at the tier: nothing emitted
    downgraded,  // the tier went, a colder one holds it (an upsert, or nothing if not warmer)
    forgotten,   // the last tier went: evicted (or an L2 downgrade) and forgotten
    ignored,     // unknown medium
  };

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

  /// One hash of a removal, for a router that splits an event across partitions. `remaining`
  /// is the engine's authoritative count for it (IX4), or nullptr. A hash not held returns
  /// `unknown` and counts nothing here (unknown_removals counts removed()'s): the router knows
  /// whether another partition held it.
  removal remove_hash(const engine_hash& h, const medium_info& m, const uint32_t* remaining,
                      std::vector<index_op>& out);

  /// The remaining_copy_counts of `ev` when they can be used (one per hash), else nullptr;
  /// counts an unusable list in stats.
  const uint32_t* usable_counts(const block_removed& ev);

  /// AllBlocksCleared (P05): forget everything. Emits nothing: the caller sends ALL_CLEARED.
  void clear();

  /// Remembered blocks, tainted ones included (what max_resident bounds).
  size_t size() const noexcept;
  /// Blocks holding a copy at `t`, counted only for a bounded tier (IX8); 0 otherwise.
  size_t tier_blocks(tier t) const noexcept;
  bool contains(const engine_hash& h) const;
  /// Asks the cache for the slot of `key` (an index_key), ahead of a removal or store of it: a
  /// big index is cold at every key, and misses asked for together overlap.
  void prefetch(uint64_t key) const noexcept;
  /// Copies counted for `h` at tier `t` (0 when absent).
  uint32_t copies(const engine_hash& h, tier t) const;

  /// Every remembered block's key (index_key), tainted ones included. Order is unspecified.
  void for_each_key(const std::function<void(uint64_t key)>& fn) const;

  /// Who to tell about membership changes (nullptr: nobody). Not owned.
  void set_observer(residency_observer* o) noexcept;

  /// Every indexed (not tainted) block with its warmest tier, for resync. Order is unspecified.
  void for_each_resident(const std::function<void(uint64_t fingerprint, uint32_t token_count,
                                                  tier warmest)>& fn) const;

  /// A resumable walk of every indexed block (probe_table PT9): appends an upsert per indexed
  /// block positioned in [from, returned next), at least `max` blocks' slots unless the walk
  /// ends. Any number of changes may happen between two calls: a block resident throughout is
  /// reported exactly once, one stored or forgotten meanwhile at most once.
  walk_cursor walk(uint64_t from, size_t max, std::vector<index_op>& out) const;

  /// Room for `blocks` without growing (an engine that says what it can hold).
  void reserve(size_t blocks);

  /// Durable index: every remembered block as the index holds it (tainted ones included),
  /// appended to `out`. Order is unspecified; with max_resident it is the table's, not the
  /// cap's (a restored partition forgets blocks in that order, a cap being a memory bound, not
  /// what the engine holds).
  void export_blocks(snapshot::partition_image& out) const;
  /// Into an empty index: the blocks export_blocks gave, told to the observer. Past
  /// max_resident, the rest is not taken. Emits nothing: the server learns them by a walk.
  /// Returns the blocks taken.
  size_t import_blocks(const snapshot::partition_image& in);

  /// Heap bytes held by the table and the cap queues (the memory budget's charge, /metrics).
  size_t heap_bytes() const noexcept;

  const index_stats& stats() const noexcept;
  const index_options& options() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay
