// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The delta log's files (durable/format/snapshot_log.hpp has the format and the rules): the writer
// the ingress' ZMQ thread appends to, the reader a restore replays from, and the segment names.
//
// Writes go to the page cache (write(2), one call per record, never fsync per record): a process
// crash (SIGKILL, OOM kill, a bug) keeps every record written; a node crash keeps what the kernel
// had flushed (dirty pages are written back within ~30 s by default), and a torn or zero-filled
// tail is cut off by the restore (LR1). Each writer starts a segment of its own, so a torn tail
// can only be the last thing a dead writer wrote.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "durable/format/snapshot_log.hpp"

namespace kvrelay::snapshot {

/// The snapshot file without its ".kvsnap": what every segment name starts with.
std::string log_stem(const std::string& snapshot_file);
/// `<stem>.<number as 16 hex digits>.kvlog`.
std::string segment_path(const std::string& stem, uint64_t number);

struct segment_file {
  std::string path;
  uint64_t number = 0;
  uint64_t bytes = 0;
};
/// The stem's segments on disk, by number.
std::vector<segment_file> list_segments(const std::string& stem);

/// What a restore replays (LR5): byte ranges of segment files, in order.
struct replay_range {
  std::string path;
  size_t begin = 0;  // the first record's offset
  size_t end = 0;    // one past the last record
};
struct log_replay {
  uint64_t pipeline_key = 0;
  std::vector<replay_range> ranges;
  size_t records = 0;
  size_t batches = 0;
  uint64_t bytes = 0;
};
using log_replay_ptr = std::shared_ptr<const log_replay>;

/// Reads a replay's records in order, one segment in memory at a time (the ingress' thread).
class replay_reader {
 public:
  struct item {
    log_record record;                          // a batch's payload points into `owner`
    std::shared_ptr<const std::string> owner;   // the segment's bytes
  };
  explicit replay_reader(log_replay_ptr replay);
  /// The next record that changes the index (LR5); nullopt at the end, or with `error` set when
  /// a segment can no longer be read or no longer checks (it changed since the restore step).
  std::optional<item> next(std::string& error);

 private:
  bool load(size_t range, std::string& error);
  log_replay_ptr replay_;
  size_t range_ = 0;
  size_t at_ = 0;  // next entry of the loaded segment
  std::shared_ptr<const std::string> bytes_;
  std::vector<segment_scan::entry> entries_;
  bool loaded_ = false;
};

struct writer_options {
  std::string stem;
  uint64_t pipeline_key = 0;
  uint64_t first_segment = 0;  // the number of the first segment this writer makes
  uint32_t generation = 0;     // the generation it starts in (LR7)
  size_t segment_bytes = size_t{4} << 20;
  /// On-disk bound: past it the writer stops (said): without a snapshot to compact into (the
  /// engine cannot be proved, the disk refuses) the log must not grow without end.
  uint64_t max_bytes = uint64_t{1} << 30;
};

/// Appends the log's records. Every call takes one mutex: the ingress' thread appends batches
/// and notices; the pipeline's supervisor an engine's evidence or sleep and, after a snapshot,
/// the removal of what it covers (LR8). An I/O error stops it for good (the log then ends at its
/// last whole record, and the restore asks the ring from there).
class log_writer {
 public:
  explicit log_writer(writer_options o);
  ~log_writer();
  log_writer(const log_writer&) = delete;
  log_writer& operator=(const log_writer&) = delete;

  void begin(bool cold, uint64_t seq, const evidence& e);
  void batch(uint64_t seq, std::string_view payload);
  void first_batch(uint64_t seq);
  void history_lost(uint64_t first_missing, uint64_t first_available, uint8_t reason);
  /// A new engine incarnation: a new generation starts with this record (LF5).
  void reset(uint64_t previous_seq, uint64_t new_seq);
  void asleep();
  void evidence(const snapshot::evidence& e);
  /// No more appends: another data path's writer takes over the log.
  void close();

  /// LR8: removes the closed segments whose records all precede a snapshot at `snap`; returns
  /// the bytes removed.
  uint64_t release(const log_position& snap);
  /// Runs `f` once, on the appending thread, when the bytes appended reach `at` (compaction).
  void notify_at(uint64_t at, std::function<void()> f);

  struct stats {
    uint64_t appended_bytes = 0;  // since this writer started
    uint64_t records = 0;
    uint64_t batches = 0;
    uint64_t disk_bytes = 0;      // every segment this writer knows that is still on disk
    uint64_t segments = 0;
    uint32_t generation = 0;
    log_position last;            // of the last record written
    bool writing = true;          // false once stopped, failed or closed
    std::string stopped;          // why it stopped ("" while writing, or after close())
  };
  stats read() const;
  const writer_options& options() const noexcept { return o_; }

 private:
  void append(const log_record& r);  // under mu_
  bool open_segment(const log_position& first);
  void stop(std::string why);

  writer_options o_;
  mutable std::mutex mu_;
  int fd_ = -1;
  uint64_t next_number_ = 0;
  struct segment {
    std::string path;
    uint64_t number = 0;
    uint64_t bytes = 0;
    log_position first;
  };
  std::vector<segment> segments_;  // this writer's, oldest first; the last one is open
  uint32_t generation_ = 0;
  uint64_t next_seq_ = 0;
  stats s_;
  bool closed_ = false;
  uint64_t notify_at_ = 0;
  std::function<void()> notify_;
};

}  // namespace kvrelay::snapshot
