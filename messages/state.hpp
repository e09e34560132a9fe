// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The durable index's messages: a snapshot on its way through the data path, what a
// data path's restore step decided, and what a write came to. CAF-free plain data.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "durable/format/snapshot_format.hpp"
#include "durable/format/snapshot_log_io.hpp"
#include "durable/format/snapshot_policy.hpp"

namespace kvrelay {

/// A pipeline's snapshot being taken: the decoder fills its part and hands it to the shard,
/// which adds the partitions and answers; then it goes to the supervisor and the writer. One
/// owner at a time (a hand-off, never shared).
using snapshot_ptr = std::shared_ptr<snapshot::pipeline_snapshot>;

/// What a data path starts from (the restore step's answer, durable/format/snapshot_policy.hpp
/// RD1-RD5).
struct restore_plan {
  uint64_t generation = 0;  // the supervisor's request it answers
  /// The snapshot to continue from; null: the cold start.
  std::shared_ptr<const snapshot::pipeline_snapshot> snapshot;
  bool found = false;  // a file was there
  std::optional<snapshot::discard_reason> discarded;
  std::string detail;  // one line: what was decided and why
  /// The engine's evidence read before the data path starts: its incarnation's (RD7).
  snapshot::evidence engine;
  std::string evidence_error;  // why none could be read ("" when read)
  double load_seconds = 0;     // reading, decoding and proving
  // The delta log (durable/format/snapshot_log.hpp LR1-LR7).
  /// The log's records to replay before anything else (null: none).
  snapshot::log_replay_ptr log;
  /// Where the ring is asked from afterwards (unset: the cold start).
  std::optional<uint64_t> resume_next;
  uint64_t history_from = 0;  // with resume_next: the history the index then holds
  bool history_known = false; // history_from is the engine's (false: lost since)
  /// The delta log's generation the data path starts in, and whether its writer opens it.
  uint32_t log_generation = 0;
  bool cold = true;
  uint64_t next_segment = 0;  // the number the new writer's first segment gets
  size_t snapshot_bytes = 0;  // of the file used (the compaction threshold starts from it)
  std::string log_detail;     // what LR1 dropped, or "" (said in the log and the status)
  uint64_t state_bytes = 0;   // the pipeline's snapshot and log on disk after the step
};
using restore_plan_ptr = std::shared_ptr<const restore_plan>;

/// What one write came to.
struct write_report {
  enum class outcome : uint8_t {
    written,      // the file now holds this snapshot
    established,  // RD7: a new incarnation's evidence read; nothing written this time
    skipped,      // RD7 failed, no evidence, or nothing changed since the last one
    failed,       // I/O error (the previous file stays)
  };
  outcome what = outcome::skipped;
  bool final = false;  // the shutdown's last write
  bool cut = true;     // answers a cut (false: an incarnation's evidence read alone, DS7)
  std::string detail;
  snapshot::evidence engine;  // read after the cut
  uint64_t next_seq = 0;
  uint64_t incarnation = 0;
  size_t blocks = 0;
  size_t bytes = 0;
  double evidence_seconds = 0;  // reading the engine's evidence after the cut
  double seconds = 0;           // that, then encode + write + fsync + rename
  uint64_t log_released = 0;    // delta log bytes the snapshot made removable (LR8)
  uint64_t stale_removed = 0;   // files of this pipeline's older endpoints removed
  uint64_t state_bytes = 0;     // the pipeline's snapshot and log on disk after the write
  uint64_t dir_bytes = 0;       // every kvrelay file in the state dir
};
const char* to_string(write_report::outcome o) noexcept;

}  // namespace kvrelay
