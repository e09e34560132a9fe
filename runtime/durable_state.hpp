// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// One pipeline's durable index bookkeeping (issue 22), owned by its supervisor: the restore
// step's outcome, the engine incarnation's evidence (RD7), when the next snapshot is due (RD8),
// what the writes came to, and the status, log lines and metrics of it all. No CAF: the
// supervisor's shell sends the messages (decoder snapshot requests, timers) and feeds the
// answers in here; the file work runs on the state_store's thread.
//
//  DS1. Every data-path spawn first runs the restore step (load, prove, decide: RD1-RD5); the
//       data path starts from a used snapshot, or cold. A plan of an older request is ignored.
//  DS2. The first snapshot is due 5 s after the data path started (to learn the batch rate),
//       then every interval (RD8, or the configured one). One write at a time: a tick while one
//       is outstanding does nothing.
//  DS3. A cut whose position, epoch, incarnation and adapters equal the last written one's is
//       not written again (nothing changed).
//  DS4. A cut from another engine incarnation than the evidence held (the decoder saw a reset)
//       only establishes that incarnation's evidence (RD7); the next cut can be written.
//  DS5. A discarded snapshot is said once: a warn log line, the discard counter by reason, the
//       status, and — while the index is incomplete because of it — a degraded /readyz line.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/metrics_registry.hpp"
#include "base/snapshot_policy.hpp"
#include "base/status.hpp"
#include "messages/pipeline_context.hpp"
#include "messages/state.hpp"
#include "runtime/state_store.hpp"

namespace kvrelay {

struct durable_counters {
  uint64_t written = 0;
  uint64_t established = 0;
  uint64_t skipped = 0;
  uint64_t failed = 0;
  uint64_t restored = 0;
  uint64_t discarded = 0;
  uint64_t absent = 0;
};

class durable_state {
 public:
  using ms = std::chrono::milliseconds;
  static constexpr ms first_delay{5000};

  durable_state(const pipeline_context& ctx, state_options o);

  state_store& store() noexcept { return *store_; }

  /// DS1: a data path of incarnation `inc` is to start; the generation the plan must carry.
  uint64_t begin_restore(uint64_t datapath_incarnation);
  bool restore_pending() const noexcept { return pending_.has_value(); }
  uint64_t pending_incarnation() const noexcept { return pending_.value_or(0); }
  /// DS1, DS5: a plan arrived. Returns the snapshot to start from (null: cold) when the plan
  /// answers the pending request; `current` says whether it did.
  std::shared_ptr<const snapshot::pipeline_snapshot> on_plan(const restore_plan& p,
                                                             bool& current);
  /// The request will never be answered usefully (teardown).
  void abandon_restore() { pending_.reset(); }

  /// RD6 (the tracker on the resume request): the restored snapshot is discarded after all.
  void on_outside_ring();

  /// DS2: the delay before the next snapshot.
  ms next_delay() const;
  bool write_outstanding() const noexcept { return outstanding_; }

  /// What to do with a cut (DS3, DS4); on submit, the write's arguments.
  enum class decision : uint8_t { skip_unchanged, establish, write };
  decision judge(const snapshot::pipeline_snapshot& s);
  const snapshot::evidence& incarnation_evidence() const noexcept { return engine_; }
  void submitted() noexcept { outstanding_ = true; }

  /// A write's outcome (counters, gauges, log lines, the evidence of a new incarnation).
  void on_report(const write_report& r);

  /// DS5: the /readyz line while the index is incomplete ("" when none).
  const std::string& readyz_line() const noexcept { return readyz_line_; }
  void add_status(actor_status& j) const;
  const durable_counters& counters() const noexcept { return c_; }

 private:
  void publish();

  pipeline_context ctx_;
  std::unique_ptr<state_store> store_;
  uint64_t generation_ = 0;
  std::optional<uint64_t> pending_;  // the data-path incarnation waiting for its plan
  // The engine incarnation the data path's cuts come from (RD7): the decoder's count and the
  // evidence read for it.
  uint64_t incarnation_ = 0;
  snapshot::evidence engine_;
  // What was restored (status).
  std::string restore_outcome_ = "not yet";  // restored | discarded | absent | not yet
  std::string restore_detail_;
  std::optional<snapshot::discard_reason> restore_discard_;
  std::string readyz_line_;
  // Writes.
  bool outstanding_ = false;
  struct cut {
    uint64_t next_seq = 0;
    uint64_t epoch = 0;
    uint64_t incarnation = 0;
    size_t adapters = 0;
  };
  std::optional<cut> last_written_;
  std::optional<cut> submitting_;
  std::optional<std::pair<uint64_t, std::chrono::steady_clock::time_point>> last_cut_;
  double rate_ = 0;  // batches per second between the last two cuts of one incarnation
  std::string last_write_;  // status line of the last write
  durable_counters c_;
  durable_counters published_;
  // Series, resolved once.
  std::array<counter_series*, 7> counter_series_{};
  std::array<counter_series*, 10> discard_series_{};
  gauge_series* bytes_ = nullptr;
  gauge_series* blocks_ = nullptr;
  gauge_series* last_success_ = nullptr;
  gauge_series* write_seconds_ = nullptr;
  gauge_series* interval_ = nullptr;
};

}  // namespace kvrelay
