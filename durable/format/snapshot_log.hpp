// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The durable index's delta log: every batch the ingress delivers (after the sequence
// tracker, so in order and without duplicates) and every notice that clears the pipeline, in the
// order the decoder receives them, appended beside the snapshot. A restart loads the snapshot,
// replays the log's batches through the same decoder path as live ones, and asks the engine's
// ring only for what followed the log's last batch: exact whatever the ring's length. Pure: bytes
// in, records out, and the restore's decision; durable/format/snapshot_log_io.hpp has the files.
//
// Format (LF = log format)
//  LF1. A log is a series of segment files, numbered. A segment starts with a 32-byte header:
//       the magic "KVRLOG\0\0", a format version, the pipeline's key (a hash of its identity,
//       snapshot_format.hpp RD1) and its number. Another magic, version or key: not this
//       pipeline's log (never read).
//  LF2. A record is a 20-byte head {u32 body length, u8 kind, u8 reason, u16 0, u32 generation,
//       u64 seq}, its body, and the XXH3-64 of head and body. A record that runs past the end
//       of the file is a torn tail; a checksum mismatch, an unknown kind or a body length beyond
//       `max_body` is corruption. Either ends the segment's valid prefix (LR1).
//  LF3. Every length is checked against the bytes left before it is used, so a corrupt length
//       costs an error, never memory or a crash.
//  LF4. What is logged: a `batch` (seq, the engine's payload as received) for every delivered
//       batch; `first_batch` (ST7: the engine process' first batch here), `history_lost`,
//       `reset` (a new engine incarnation), `asleep` (the engine discarded its cache) in the
//       order the decoder receives them; `begin` (a data path starts writing: cold or warm, with
//       the engine's evidence) and `evidence` (a new incarnation's proof, once read).
//  LF5. Positions: every record carries (generation, seq). A `reset` and a cold `begin` open a
//       new generation (one engine process' history as this pipeline saw it); within one, seq
//       is the batch's, or for other records the seq of the next batch expected. Positions never
//       decrease along the log.
//  LF6. Little-endian, fixed widths; the same record gives the same bytes.
//
// Restore (LR = log restore)
//  LR1. Valid prefix: segments are read in number order up to the first torn or corrupt record;
//       it and everything after it (later segments too) is dropped, and said (what, how much).
//  LR2. The state is that of the last generation G (the snapshot's or the log's, the greater):
//       a snapshot of an earlier generation is superseded by the log.
//  LR3. Base: the snapshot when it is of G; else the record that opened G (a cold `begin` or a
//       `reset`), which the valid log holds; else nothing (the cold start).
//  LR4. Proof: the evidence of G (the last one a `begin` or `evidence` record of G carries, else
//       the snapshot's) must name the engine process read now (snapshot_policy.hpp RD2-RD4);
//       otherwise the base is discarded and the pipeline starts cold.
//  LR5. Replay: every record of G after the base that changes the index (batches, first batch,
//       losses, sleeps), in order; from a snapshot, those at or past its next seq. A batch must
//       follow the one before it (seq + 1, or a loss's first available seq): where one does not,
//       the replay ends, and the ring is asked from there (LR6): a hole is never skipped.
//  LR6. Resume: the ring is asked from one past the last batch replayed (the snapshot's next seq
//       when none), with the history the replay leaves. A base of G with no batch at all after a
//       cold opening is the cold start.
//  LR7. A new writer continues G in a new segment (a warm `begin`); a cold start opens G + 1
//       (after removing the older segments and the snapshot: they describe another history).
//  LR8. A segment is removed once a written snapshot's position is past every record in it (the
//       segment being written to never is): the log holds what followed the snapshot, bounded
//       by compaction (a snapshot when the log outgrows the last one).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "durable/format/snapshot_format.hpp"
#include "durable/format/snapshot_policy.hpp"

namespace kvrelay::snapshot {

inline constexpr uint32_t log_format_version = 1;
inline constexpr size_t log_header_bytes = 32;
inline constexpr size_t record_head_bytes = 20;
inline constexpr size_t record_trailer_bytes = 8;
/// LF2: a body longer than this is corruption (an engine batch is far smaller).
inline constexpr uint32_t max_body = uint32_t{256} << 20;

enum class record_kind : uint8_t {
  begin = 1,
  batch = 2,
  first_batch = 3,
  history_lost = 4,
  reset = 5,
  asleep = 6,
  evidence = 7,
};
const char* to_string(record_kind k) noexcept;
/// Whether replaying the record changes the index (LR5).
bool changes_index(record_kind k) noexcept;

/// A (generation, seq) position (LF5), ordered.
struct log_position {
  uint32_t generation = 0;
  uint64_t seq = 0;
  bool operator<(const log_position& o) const noexcept {
    return generation != o.generation ? generation < o.generation : seq < o.seq;
  }
  bool operator==(const log_position& o) const noexcept {
    return generation == o.generation && seq == o.seq;
  }
  bool operator<=(const log_position& o) const noexcept { return !(o < *this); }
};

/// One record, decoded (the payload points into the bytes it was decoded from).
struct log_record {
  record_kind kind = record_kind::batch;
  uint32_t generation = 0;
  uint64_t seq = 0;
  uint8_t reason = 0;             // history_lost: the tracker's loss_reason
  bool cold = false;              // begin
  evidence engine;                // begin, evidence
  uint64_t first_available = 0;   // history_lost: [seq, first_available) will never arrive
  uint64_t previous_seq = 0;      // reset
  std::string_view payload;       // batch
  log_position position() const noexcept { return {generation, seq}; }
};

/// LF1.
struct segment_header {
  uint64_t pipeline_key = 0;
  uint64_t number = 0;
};
std::string encode_header(const segment_header& h);

/// A pipeline's key for LF1: a hash of everything RD1 compares.
uint64_t pipeline_key(const identity& who) noexcept;

/// LF2, LF6: a record in its parts, in the order they go to disk: head, body (the fixed fields
/// of records other than batches), payload (a batch's), trailer. A batch allocates nothing.
struct encoded_record {
  char head[record_head_bytes] = {};
  std::string body;
  std::string_view payload;
  char trailer[record_trailer_bytes] = {};
  size_t size() const noexcept {
    return record_head_bytes + body.size() + payload.size() + record_trailer_bytes;
  }
};
encoded_record encode(const log_record& r);
/// All of it in one string (tests, small records).
std::string encode_bytes(const log_record& r);

/// Why a segment's valid prefix ended (LR1).
enum class log_fault : uint8_t { none, not_a_log, other_pipeline, torn, corrupt };
const char* to_string(log_fault f) noexcept;

/// One segment's bytes, read up to the first bad record (LF1-LF3).
struct segment_scan {
  log_fault fault = log_fault::none;
  std::string detail;             // one line for the log when fault != none
  segment_header header;
  size_t valid_bytes = 0;         // header and whole records before the fault
  struct entry {
    log_record record;            // payload points into the scanned bytes
    size_t offset = 0;            // of the record's head
    size_t end = 0;               // one past its trailer
  };
  std::vector<entry> records;
};
segment_scan scan_segment(std::string_view bytes, uint64_t expected_key);

/// A record as the restore decision sees it: where it is, and what it says.
struct log_entry {
  log_record record;              // payload not kept (empty)
  size_t segment = 0;             // index into the caller's list of segments
  size_t offset = 0;
  size_t end = 0;
};

/// What the restore step decided (LR2-LR7), for the files the caller scanned.
struct log_decision {
  /// Use the snapshot as the base (else the data path starts empty).
  bool use_snapshot = false;
  /// Why the snapshot is not used when there was one (unset: used, or superseded by the log).
  std::optional<discard_reason> snapshot_discard;
  bool snapshot_superseded = false;  // LR2: the log holds a later generation
  /// Why nothing could be restored at all (the cold start), when the log or snapshot was there.
  std::optional<discard_reason> discard;
  std::string detail;
  /// LR5: the records to replay, [from, to) in the caller's entries.
  size_t replay_from = 0, replay_to = 0;
  size_t replay_batches = 0;
  /// Where the replay stopped short of the log's end (LR5: a hole), "" when it did not.
  std::string hole;
  /// LR6: warm (resume from here) or cold (unset).
  std::optional<uint64_t> resume_next;
  std::optional<uint64_t> history_from;  // the history the replay leaves (unset: lost)
  /// LR7: the generation the data path starts in, and whether it opens a new one.
  uint32_t generation = 0;
  bool cold = true;
  evidence engine;                // the proved evidence of the generation (warm)
};

/// LR2-LR7. `snap` is the decoded snapshot when there is one and it passed RD1 (the caller
/// checks identity and format); `snap_generation` its generation. `log` is the valid prefix of
/// every segment in order (LR1). `now` is the engine's evidence read now.
log_decision decide_restore(const pipeline_snapshot* snap, const std::vector<log_entry>& log,
                            const evidence& now);

/// LR8: whether a segment whose successor's first record is at `next_first` holds nothing a
/// restore from a snapshot at `snap` needs.
bool segment_covered(const log_position& next_first, const log_position& snap) noexcept;

}  // namespace kvrelay::snapshot
