// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// When a snapshot of the durable index may be used, when one may be written, and how often
//. Pure functions of what was read: no files, no sockets, no clock of their own.
//
// Using a snapshot (at a data path's start)
//  RD1. A snapshot is used only by the pipeline that wrote it: same replica, model, tenant, hash
//       scheme, engine endpoint, topic and DP rank (`other_pipeline` otherwise).
//  RD2. It is used only for the engine process it was taken from, and only on proof. A publisher
//       lifetime id on both sides decides alone: equal is the same process, different is
//       another (`engine_restarted`).
//  RD3. Otherwise the engine's process start time on both sides decides: equal (within 5 ms; the
//       kernel keeps it in 10 ms ticks, and one process always shows the same value) is the same
//       process, different is another.
//  RD4. No proof is no use: a snapshot that recorded no evidence (`no_evidence`), or an engine
//       whose evidence cannot be read now (`proof_missing`: no metrics URL, /metrics down, no
//       process_start_time_seconds, as with vLLM's multi-API-server mode and SGLang, whose
//       /metrics come from prometheus_client's multiprocess collector), is discarded.
//  RD5. A file that is not a readable snapshot of this release is discarded for that reason
//       (snapshot_format.hpp SF1-SF4). Whatever the reason, a discard falls back to the cold
//       start, and the reason is said (log, counter, /readyz, /debug/engines).
//  RD6. The replay ring decides last: a used snapshot resumes from its next seq, and a ring that
//       no longer reaches back to it (sequence tracker ST8 on the resume request) discards it
//       then (`ring_moved_on`): the pipeline clears and continues from what the ring has.
// Writing one
//  RD7. A snapshot carries the evidence of the engine process its events came from: the
//       evidence read before the data path asked for its first batch (its incarnation's), and
//       it is written only if the evidence read after the cut is the same process (a restart in
//       between would pair one process's events with another's proof). After an engine
//       incarnation reset the next snapshot only establishes the new incarnation's evidence
//       (read after a cut that follows the reset); the one after it can be written.
// How often
//  RD8. Without a working delta log (snapshot_log.hpp) the interval keeps the time since the
//       last snapshot within the engine's replay ring: a quarter of the ring's span at the
//       observed batch rate (ring batches ÷ rate ÷ 4), at least 1 s, at most 60 s; 60 s while
//       no rate is known. The ring's span is the one learnt from the engine's replies
//       (actors/ingress/ring_span.hpp), the configured `ring_batches` only until one is. A
//       fixed interval overrides it.
//  RD9. With a working delta log the log, not the ring, covers the time since the last
//       snapshot: a snapshot is taken once soon after a data path starts, then when the log
//       outgrew the last one's size (compaction, at least 256 KiB of log), at shutdown, and at
//       RD8's interval only while the log is off or broken.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "durable/format/snapshot_format.hpp"

namespace kvrelay::snapshot {

/// Why a snapshot was not used. Stable names (logs, metric labels, /readyz).
enum class discard_reason : uint8_t {
  unreadable,       // the file exists but cannot be read
  not_a_snapshot,   // SF1
  other_version,    // SF1
  truncated,        // SF2
  corrupt,          // SF2, SF3, SF4
  other_pipeline,   // RD1
  engine_restarted, // RD2, RD3
  no_evidence,      // RD4
  proof_missing,    // RD4
  ring_moved_on,    // RD6
  log_incomplete,   // snapshot_log.hpp LR3: the log does not hold its generation's start
};
const char* to_string(discard_reason r) noexcept;
/// The sentence /readyz and the log use.
const char* describe(discard_reason r) noexcept;
discard_reason from_fault(fault f) noexcept;

/// Whether two pieces of evidence name the same engine process (RD2, RD3).
enum class sameness : uint8_t { same, different, unknown };
sameness compare(const evidence& a, const evidence& b) noexcept;

struct verdict {
  std::optional<discard_reason> discard;  // unset: use it
  std::string detail;                     // one line: what differed
  bool use() const { return !discard; }
};

/// RD1-RD4 for a decoded snapshot, against this pipeline's identity and the engine's evidence
/// read now.
verdict decide(const pipeline_snapshot& s, const identity& expected, const evidence& now);

/// RD7: may a snapshot taken with `incarnation`'s evidence be written, `now` read after its cut?
bool may_write(const evidence& incarnation, const evidence& now) noexcept;

/// RD8.
std::chrono::milliseconds interval(uint64_t ring_batches, double batches_per_second);

}  // namespace kvrelay::snapshot
