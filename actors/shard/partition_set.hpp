// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The shard's protocol: every adapter partition of one pipeline (one positional_index each) and
// the directory that routes removals, which name no adapter, to the partitions holding their
// hashes. Pure logic (no CAF); the shard actor only unpacks work and sends what comes out.
//
//  PS1. Partitions are declared by the work that first uses them, with dense ids in declaration
//       order (the decoder assigns them); a declaration is applied even when its work is stale.
//  PS2. A work's events are applied in batch order across partitions, so a removal sees every store
//       before it in its batch, including the store that created its partition.
//  PS3. Removals: with one partition, it gets them all. With more, one partition is *home*: the
//       base model's (adapter "") once it is declared, until then the first one declared. Home's
//       index is asked for every removed hash; for the others, a directory hash → partition says
//       which one holds it, and only that one sees it; a hash no partition holds is skipped
//       (`unrouted_hashes`). The directory follows the other indexes exactly: it is told by each
//       when a hash becomes resident and when it leaves (removal or cap), so it never routes a
//       removal away from a partition that holds the hash and never grows past what they hold. It
//       costs ~11 bytes per slot, only for blocks outside home: in a fleet whose traffic is mostly
//       the base model's, most blocks cost no slot and their store no second table insert. When the
//       base model's partition is declared after another became home, the old home's hashes enter
//       the directory then (at most once per pipeline).
//  PS4. A hash held by several partitions (an engine whose hashes do not depend on the adapter) is
//       removed from each of them.
//  PS5. clear() forgets every partition's blocks and the directory; partitions and ids stay.
//  PS6. Per work, every partition that emitted ops or saw a store yields one result (its ops,
//       whether it saw a store: the R12 timestamp rule), in the order the work first touched it.
//  PS7. Walks (below): every partition in id order, each by its index's resumable walk.
//  PS8. Sized from the engine: an engine that says how many blocks its cache holds has the base
//       model's partition (where its blocks go unless an adapter names another) made room for
//       that many at once (probe_table::reserve), so the add path never grows, rehashes or
//       faults a table in. Only within the index's share of the memory budget: at most a
//       quarter of the room it has left (reserve_target), the rest for other pipelines and the
//       adapters' partitions. A capacity that grows (an engine restarted with a larger cache)
//       reserves again; one that shrinks keeps what was made (a table shrinks as blocks leave,
//       probe_table PT7). The room can be made before the base model's partition is declared
//       (prepare_base: the shard does it while the engine is quiet, so the first batches do not
//       pay for faulting the table in): a standby table then becomes that partition's index when
//       it is declared, and is given back by drop_standby (an engine whose traffic names only
//       adapters). A clear keeps it: it holds no blocks, and the engine's size is unchanged.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/shard/positional_index.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay {

class partition_set {
 public:
  /// Most partitions one pipeline can hold (the directory stores ids in 16 bits).
  static constexpr uint32_t max_partitions = 0xfffe;

  explicit partition_set(index_options opts = {});
  ~partition_set();
  partition_set(partition_set&&) noexcept;
  partition_set& operator=(partition_set&&) noexcept;
  partition_set(const partition_set&) = delete;
  partition_set& operator=(const partition_set&) = delete;

  /// One partition's share of a work.
  struct result {
    uint32_t partition = 0;
    bool had_store = false;
    std::vector<index_op> ops;
  };

  /// Applies `w` (PS1, PS2) and returns the touched partitions' results (PS6). A work whose
  /// declarations do not continue the ids held (a decoder bug) declares nothing: events for
  /// partitions that do not exist are skipped and counted.
  std::vector<result> apply(const shard_work& w);

  /// Only the declarations of `w` (PS1): for a work the shard drops as stale.
  void declare(const shard_work& w);

  /// PS5.
  void clear();

  /// PS8: makes room for `blocks` in the base model's partition (adapter ""); false (nothing
  /// done) while it is not declared.
  bool reserve_base(size_t blocks);
  /// PS8: reserve_base, or, while the base partition is not declared, room in a standby table
  /// that becomes its index when it is (counted in heap_bytes). True when room was made.
  bool prepare_base(size_t blocks);
  /// PS8: gives the standby table back, if there is one (true then).
  bool drop_standby() noexcept;
  /// PS8: the blocks to reserve for an engine that holds `capacity` blocks, with `room_bytes`
  /// of the index's budget share left (no budget: the capacity), given `reserved` already:
  /// 0 when nothing more is to be done.
  static size_t reserve_target(double capacity, uint64_t room_bytes, bool budgeted,
                               size_t reserved) noexcept;

  size_t size() const noexcept;
  const std::string& name(uint32_t partition) const;
  const positional_index& index(uint32_t partition) const;

  /// Every resident block of every partition, for a resync.
  void for_each_resident(
      const std::function<void(uint32_t partition, uint64_t fingerprint, uint32_t token_count,
                               tier warmest)>& fn) const;

  /// Where a walk of every partition stands: partitions in id order, then the index's cursor.
  struct walk_position {
    uint32_t partition = 0;
    uint64_t key = 0;
  };
  /// PS7. A walk visits every partition in id order (one declared during the walk too), each by
  /// its index's resumable walk; `at` moves on. Appends one result per partition that gave
  /// upserts: at least `max` blocks in all unless the walk ends (the returned cursor is done).
  walk_cursor walk(walk_position& at, size_t max, std::vector<result>& out) const;

  /// Durable index: every partition's blocks, in id order (names included).
  void export_partitions(std::vector<snapshot::partition_image>& out) const;
  /// Into an empty set: declares the partitions in order (PS1, so home and the directory come out
  /// as they were) and imports their blocks, emitting nothing (a walk tells the server). Returns
  /// the blocks taken.
  size_t import_partitions(const std::vector<snapshot::partition_image>& in);

  struct counters {
    uint64_t unrouted_hashes = 0;      // removed hashes no partition holds (PS3)
    uint64_t shared_hashes = 0;        // removed hashes several partitions held (PS4)
    uint64_t copy_counts_ignored = 0;  // routed removals whose remaining_copy_counts was unusable
    uint64_t bad_partition_events = 0; // events naming a partition that was never declared
  };
  const counters& stats() const noexcept;

  bool directory_active() const noexcept;
  /// Hashes in the directory: those held by partitions other than home (PS3).
  size_t directory_size() const noexcept;
  /// The partition the directory leaves out (PS3).
  uint32_t home() const noexcept;
  /// Heap of the indexes and the directory.
  size_t heap_bytes() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay
