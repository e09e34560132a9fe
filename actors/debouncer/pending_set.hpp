// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The debouncer's store: pending index changes coalesced to their final state per
// (adapter, fingerprint). Order between different keys never matters to the server, so memory
// during a slow or absent server is bounded by the keys that changed, not by the event count.
// Past a bound it sheds its adds, which are only copies of what the index holds (the caller
// walks the index again instead). Evictions and downgrades cannot be re-derived: past the bound
// with those alone it says so (`full`), and the caller stops what flows in.
//
// What the server never saw is never sent:
//  - A pending add is *fresh* when the server cannot hold its key: the op said so
//    (`index_op::introduces`), a clear is pending (nothing went out since it, so the server
//    holds no key after it), or the key has not gone out since the server was cleared while
//    tracking (below). An eviction of a key whose pending add is fresh drops both. An add that
//    replaces a pending eviction is never fresh: the server may hold the key until that eviction
//    goes.
//  - Tracking (between a resync's clear and the end of its re-report): the keys whose adds went
//    out since the clear are remembered; an eviction of any other key is dropped. Bounded by
//    `max_entries`: past it tracking stops and evictions are sent again (safe, just wasted).
//  - L2 mode turns evictions into T2 downgrades, which are upserts: never dropped.
//
// Adds that introduce their key arrive as a log: while an adapter has no add in its map, an
// add marked `introduces` (the shard's index had no such key, so no add of it can be pending
// unless an eviction came between) is appended, with no lookup, and a take sends the log in
// arrival order. A blast or a paced engine that only stores never builds a map: the window is
// appended and read back in order, instead of each key hashed into a table that grows with the
// backlog. The first op that needs a lookup (an eviction, an add that does not introduce its
// key, a walk's `note_sent`) moves the adapter's log into its map, sized once for it, and from
// there on the adapter is coalesced by key until its adds are all taken. Two adds of one
// fingerprint can both be in a log only if two engine hashes of one adapter have one
// fingerprint (a prefix under two cache salts): both go out, the same upsert twice.
//
// Memory: a map or log that grew past `shrink_above` entries is released once it empties, so a
// burst does not leave its peak allocated (`take` and `reset` report it; the caller may trim the
// heap).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "base/huge_pages.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay {

class pending_set {
 public:
  struct options {
    bool l2_mode = false;             // --ignore-block-removed: an eviction is a T2 downgrade
    size_t max_entries = 2'000'000;   // bound on distinct pending keys (and on tracked keys)
    size_t max_adds_per_unit = 16384; // keeps one CacheStateUpdate well under gRPC's 4 MiB
    size_t shrink_above = 65536;      // release the maps' memory when they empty after this
    bool log_adds = true;             // adds that introduce their key are logged (header)
  };

  /// What never went on the wire, cumulative.
  struct drop_stats {
    uint64_t unsent_pairs = 0;       // a fresh add and its eviction, both dropped
    uint64_t unreported = 0;         // evictions of keys not sent since the clear (tracking)
    uint64_t superseded = 0;         // entries dropped by drop_for_resync
    uint64_t shed = 0;               // adds dropped over the bound (a walk re-reports them)
  };

  enum class apply_result : uint8_t {
    ok,
    shed_adds,  // over the bound: every pending add was dropped; a walk must re-report them
    full,       // and evictions and downgrades alone are over it: stop what flows in
  };

  pending_set() : pending_set(options{}) {}
  explicit pending_set(options opts) : opts_(opts) {}

  /// Folds a shard's ops in, in order, then keeps the bound (apply_result).
  apply_result apply(const shard_ops& ops);

  /// A walk sent these upserts of `adapter` to a server: their keys can be held now (a pending
  /// add of one is fresh no more), and tracking counts them as re-reported.
  void note_sent(const std::string& adapter, const std::vector<prefix_op>& ops);

  /// AllBlocksCleared: whatever is pending is superseded; the next unit starts with a clear.
  void clear(int64_t ts_us);

  size_t size() const { return adds_ + removals_; }
  size_t pending_adds() const { return adds_; }
  size_t pending_removals() const { return removals_; }
  bool clear_pending() const { return clear_; }
  bool empty() const { return size() == 0 && !clear_; }
  /// What the entries hold in memory, about (the memory budget's charge): 0 when empty. A log
  /// is charged its whole array (what went out of it and its room to grow included).
  size_t heap_bytes() const noexcept;
  /// What the maps' and logs' arrays hold allocated, empty room included (a release shows here).
  size_t allocated_bytes() const noexcept;
  const drop_stats& drops() const { return drops_; }

  /// Seals what is pending into one ordered unit (clear, adds, downgrades, evictions), up to
  /// max_adds_per_unit adds; nullopt when nothing is pending.
  std::optional<emit_unit> take(uint64_t id);

  /// Drops everything (used when a resync will re-report the truth anyway).
  void reset();

  /// A resync's clear was acknowledged: the server holds nothing, the re-report brings the
  /// truth. Drops every entry but T2 downgrades (L2 copies the re-report cannot know of) and
  /// the pending clear; starts tracking (see the header comment).
  void drop_for_resync();

  /// Tracking: on from drop_for_resync until end_tracking (the re-report has arrived).
  void end_tracking();
  bool tracking() const { return tracking_; }
  size_t tracked() const { return reported_.size(); }

  /// True once after the maps were released (they had grown past shrink_above and emptied).
  bool released_memory() { return std::exchange(released_, false); }

 private:
  // Every key is pending in at most one of its adapter's two maps. Adds, the bulk of a blast's
  // backlog (10^5-10^6 keys), take 16-byte slots; evictions and downgrades carry their batch time
  // and take 24. Keyed by fingerprint alone, one pair of maps per adapter.
  struct add_entry {
    uint32_t token_count = 0;
    tier t = tier::t1;
    bool fresh = false;  // the server cannot hold the key
  };
  struct removal_entry {
    int64_t ts_us = 0;  // the eviction's batch time
    uint32_t token_count = 0;
    tier t = tier::t1;
    bool downgrade = false;  // L2: a T2 upsert, else an eviction
  };
  struct logged_add {  // 16 bytes: a blast's backlog is 10^6 of them
    uint64_t fp = 0;
    uint32_t token_count = 0;
    tier t = tier::t1;
    bool fresh = false;
  };
  using key = std::pair<uint32_t, uint64_t>;  // (adapter index, fingerprint): tracking's keys
  // A blast's backlog: arrays of tens of MB, probed at random (HP1).
  template <class V>
  using fp_map = absl::flat_hash_map<uint64_t, V, absl::Hash<uint64_t>, std::equal_to<uint64_t>,
                                     huge_page_allocator<std::pair<const uint64_t, V>>>;
  struct adapter_maps {
    fp_map<add_entry> adds;
    fp_map<removal_entry> removals;
    // The add a capped take stopped at: the next take starts there. From begin() every take of
    // a big backlog walked again over the slots the takes before it had emptied (a 10^6-add
    // blast's takes cost ~2.5x one pass over the map).
    std::optional<uint64_t> resume;
    // Adds in arrival order while `adds` is empty (the header comment); [0, log_head) went out.
    std::vector<logged_add, huge_page_allocator<logged_add>> log;
    size_t log_head = 0;
    size_t logged() const { return log.size() - log_head; }
    void clear_log(bool release) {  // release: give its array back too
      if (release) {
        decltype(log)().swap(log);
      } else {
        log.clear();
      }
      log_head = 0;
    }
  };
  using key_set = absl::flat_hash_set<key, absl::Hash<key>, std::equal_to<key>,
                                      huge_page_allocator<key>>;

  uint32_t adapter_index(const std::string& name);
  bool fresh_key(const key& k, bool introduces) const;
  void upsert(adapter_maps& m, const key& k, const prefix_op& op);
  void remove(adapter_maps& m, const key& k, const prefix_op& op, int64_t ts_us);
  void set_removal(adapter_maps& m, uint64_t fp, const removal_entry& r);
  bool replaces_removal(adapter_maps& m, uint64_t fp);
  void log_to_map(adapter_maps& m);
  void take_logged(adapter_maps& m, uint32_t a, emit_unit& u);
  void drop_adds(uint64_t& counter);
  void note_size();
  void maybe_release();

  options opts_;
  std::vector<std::string> adapters_;
  absl::flat_hash_map<std::string, uint32_t> adapter_ids_;
  std::vector<adapter_maps> maps_;  // by adapter index
  uint32_t next_adapter_ = 0;       // where the next capped take starts (fair between adapters)
  size_t peak_ = 0;                 // largest size since the last release
  size_t adds_ = 0;
  size_t removals_ = 0;
  int64_t adds_ts_us_ = 0;  // latest batch time with a store since the last take (R12)
  bool clear_ = false;
  int64_t clear_ts_us_ = 0;
  bool tracking_ = false;
  key_set reported_;  // tracking: keys whose add went out since the clear
  drop_stats drops_;
  bool released_ = false;
};

}  // namespace kvrelay
