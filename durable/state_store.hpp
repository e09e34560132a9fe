// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The durable index's files: per pipeline, in `state.dir`, a snapshot and its
// delta log's segments. A worker thread per pipeline reads (the restore step before a data path
// starts) and writes (snapshots, and the reading of a new engine process' evidence), so no actor
// ever waits on a disk or on the engine's /metrics. The decisions are
// durable/format/snapshot_policy.hpp's (RD rules) and durable/format/snapshot_log.hpp's (LR rules);
// the formats are durable/format/snapshot_format.hpp's and durable/format/snapshot_log.hpp's. The
// log itself is appended by the ingress' thread (durable/format/snapshot_log_io.hpp).
//
// Writes are atomic: the bytes go to a temporary file in the same directory, which is fsynced,
// renamed over the pipeline's file, and the directory fsynced. A SIGKILL at any instant leaves
// the previous snapshot or the new one, never a torn file (a leftover temporary file is removed
// by the next restore step).
//
// After a snapshot is written, what it covers is removed: the log's segments before it (LR8),
// and the files of this pipeline's earlier endpoints (an engine restarted on other ports gets
// another file name), so the directory holds one snapshot and one log per pipeline served.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "base/worker_bridge.hpp"
#include "durable/format/state_dir.hpp"
#include "durable/format/snapshot_format.hpp"
#include "durable/format/snapshot_policy.hpp"
#include "messages/state.hpp"

namespace kvrelay {

/// Reads the engine's evidence now (RD2, RD3); on failure the evidence is empty and `error` says
/// why.
using evidence_reader = std::function<snapshot::evidence(std::string& error)>;

/// `process_start_time_seconds` from the engine's /metrics (actors/scraper/metric_profile.hpp).
evidence_reader metrics_evidence(std::string metrics_url, std::chrono::milliseconds timeout);

struct state_options {
  std::string file;  // the pipeline's snapshot file (snapshot_file())
  std::string pipeline;  // the pipeline's name (its older endpoints' files are removed)
  snapshot::identity who;
  std::chrono::milliseconds interval{0};  // 0: derived from the ring and the batch rate (RD8)
  uint64_t ring_batches = 10000;          // the engine's replay ring (vLLM's buffer_steps)
  evidence_reader evidence;               // null: nothing can prove the engine (RD4)
  /// The delta log's segment size; 0: derived from the compaction threshold (a quarter of it,
  /// 64 KiB to 8 MiB).
  size_t segment_bytes = 0;
  /// Whether a delta log is kept (RD9); off, snapshots alone (RD8).
  bool log = true;
};

/// What a write does (RD7, DS4).
enum class write_mode : uint8_t {
  write,                // the evidence read after the cut must be the incarnation's
  establish,            // a new incarnation: only read its evidence (the next cut is written)
  establish_and_write,  // the shutdown's last one: read the evidence now and write with it
};

/// The pipeline's own files on disk (snapshot, its temporary files, log segments), in bytes.
uint64_t pipeline_state_bytes(const std::string& snapshot_file);

/// Removes the files of `pipeline`'s other endpoints (another identity hash than `own_file`'s)
/// from the directory; returns the bytes removed.
uint64_t remove_other_endpoints(const std::string& own_file);

/// `<dir>/<pipeline name, [A-Za-z0-9._-] kept>-<8 hex digits of the identity's hash>.kvsnap`: two
/// replicas, engines, models or ranks never share a file even when their names sanitize alike.
std::string snapshot_file(const std::string& dir, const std::string& pipeline,
                          const snapshot::identity& who);

/// A file's bytes, handed piece by piece to the writer's sink.
using file_producer = std::function<void(const std::function<void(std::string_view)>& sink)>;

/// The produced bytes to `path` atomically (temporary file, fsync, rename, fsync of the
/// directory); the size written in `written`.
outcome<void> write_atomically(const std::string& path, const file_producer& produce,
                               size_t* written = nullptr);
outcome<void> write_atomically(const std::string& path, std::string_view bytes);

class state_store {
 public:
  explicit state_store(state_options o);
  /// Finishes the job in progress, drops queued ones, joins the thread.
  ~state_store();
  state_store(const state_store&) = delete;
  state_store& operator=(const state_store&) = delete;

  /// The restore step: read and decode the file, read the engine's evidence, decide (RD1-RD5);
  /// `done` runs on the store's thread.
  void restore(uint64_t generation, std::function<void(restore_plan_ptr)> done);

  /// One write (RD7): the evidence read now must name the same process as `incarnation`; with
  /// `establish` it is only read and reported (a new incarnation). A write queued behind another
  /// replaces a queued one that is not final (the newest cut wins). Written, the delta log's
  /// segments it covers are removed (LR8). `done` runs on the store's thread.
  void write(snapshot_ptr s, snapshot::evidence incarnation, write_mode mode, bool final,
             std::shared_ptr<snapshot::log_writer> log, std::function<void(write_report)> done);

  /// A new engine incarnation (the ingress saw its sequence restart): read its evidence and
  /// append it to the delta log (LR4), so a restart can prove the log's new generation.
  void establish(uint64_t incarnation, std::shared_ptr<snapshot::log_writer> log,
                 std::function<void(write_report)> done);

  const state_options& options() const noexcept { return opts_; }

 private:
  restore_plan_ptr do_restore(uint64_t generation);
  write_report do_write(const snapshot_ptr& s, const snapshot::evidence& incarnation,
                        write_mode mode, bool final,
                        const std::shared_ptr<snapshot::log_writer>& log);

  state_options opts_;
  // The store's thread (base/worker_bridge.hpp): each job returns the completion that calls
  // its `done`, which runs there too.
  worker_bridge<std::function<void()>> worker_;
};

}  // namespace kvrelay
