// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// One walk of a replica's index to one policy server target: where it stands, what it asked the
// shards for, and (for the periodic refresh) how fast it may go. Pure logic: no CAF, no clock of
// its own. The debouncer (debouncer_protocol.hpp, rules WK1-WK6) owns one per target at most and
// feeds it the shards' answers; the shards read each chunk at the cursor it gives
// (partition_set PS7, probe_table PT9), so a walk holds one chunk at a time whatever the index's
// size, and survives any change of the index between two chunks.
//
//  IW1. A walk visits its ranks in order (one, or every rank of a merged replica), each from
//       partition 0, position 0, until the shard says the rank is done.
//  IW2. One request at a time: ask() hands out a request with a new id and the walk waits for the
//       answer with that id; an answer with another id (a data path that restarted answered an
//       older request, or a chunk that crossed a restart) changes nothing.
//  IW3. A rank that restarts (its data path was replaced) is asked again at the same cursor; a
//       rank that cleared (AllBlocksCleared, lost history) is done: from the clear on, every
//       block reaches the server as a live add.
//  IW4. restart() starts over from the first rank (what a catch-up needs after adds were shed).
//  IW5. Pacing of a refresh: `interval` is the time one pass may take; at `now` the walk may have
//       sent (now - started) / interval of the blocks the replica holds (the shards say how many
//       with each answer; before a rank's first answer, one block of it is asked to learn its
//       count: a small rank ahead of a large one must not pace the large one as if it were all),
//       so each block is re-reported once per interval, spread evenly. Other walks are paced by
//       credits alone.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace kvrelay::debounce {

enum class walk_kind : uint8_t {
  start,    // the data path restored an index: after the start clear, to every target (WK4)
  resync,   // after this target's probe (ALL_CLEARED) was acknowledged (WK4)
  catchup,  // pending shed adds (DB11): everything again, no clear (WK4)
  refresh,  // the periodic re-report, paced over refresh_interval (WK5)
};
const char* to_string(walk_kind k) noexcept;

/// What to ask a rank's shard for.
struct walk_ask {
  uint64_t id = 0;
  uint32_t rank = 0;
  uint32_t partition = 0;
  uint64_t key = 0;
  uint32_t max = 0;
};

class index_walk {
 public:
  index_walk(walk_kind k, std::vector<uint32_t> ranks, int64_t now_ms, int64_t interval_ms = 0);

  walk_kind kind() const noexcept { return kind_; }
  bool done() const noexcept { return at_ >= ranks_.size(); }
  bool waiting() const noexcept { return asked_ != 0; }
  uint64_t blocks_sent() const noexcept { return sent_; }
  int64_t started_ms() const noexcept { return started_ms_; }
  /// The rank the cursor is in (done(): none).
  std::optional<uint32_t> rank() const noexcept;

  /// IW2: the next request, `max` blocks at most; the walk waits for its answer.
  walk_ask ask(uint64_t id, uint32_t max);
  /// IW2: the last message of the answer to `id` (the chunk's ops counted in `blocks`);
  /// `resident` is what the rank's shard holds now. False when `id` is not the one awaited.
  bool answered(uint64_t id, uint32_t next_partition, uint64_t next_key, bool rank_done,
                uint64_t blocks, uint64_t resident);
  /// Part of an answer (a chunk spread over several partitions): counted, cursor unchanged.
  bool partial(uint64_t id, uint64_t blocks) noexcept;
  bool expects(uint64_t id) const noexcept { return asked_ != 0 && asked_ == id; }
  /// IW3.
  void rank_restarted(uint32_t rank) noexcept;
  void rank_cleared(uint32_t rank) noexcept;
  /// IW4.
  void restart(walk_kind k, int64_t now_ms) noexcept;

  /// IW5: how many more blocks a refresh may ask for at `now_ms` (other kinds: `max`).
  uint32_t allowance(int64_t now_ms, uint32_t max) const noexcept;
  /// What the shards last said they hold, summed over the ranks visited (IW5's estimate).
  uint64_t resident() const noexcept;
  /// IW5: the rank at the cursor has not said yet how much it holds.
  bool learning() const noexcept { return !done() && !resident_[at_]; }

 private:
  walk_kind kind_;
  std::vector<uint32_t> ranks_;
  std::vector<std::optional<uint64_t>> resident_;  // per rank, as last answered (IW5)
  size_t at_ = 0;                   // index into ranks_
  uint32_t partition_ = 0;
  uint64_t key_ = 0;
  uint64_t asked_ = 0;  // the request awaited (0: none)
  uint64_t sent_ = 0;   // blocks this pass
  int64_t started_ms_ = 0;
  int64_t interval_ms_ = 0;
};

}  // namespace kvrelay::debounce
