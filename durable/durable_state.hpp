// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// One pipeline's durable index bookkeeping, owned by its supervisor: the restore
// step's outcome, the delta log's writer, the engine incarnation's evidence (RD7), when the next
// snapshot is due (RD8, RD9), what the writes came to, and the status, log lines and metrics of
// it all. No CAF: the supervisor's shell sends the messages (decoder snapshot requests, timers)
// and feeds the answers in here; the file work runs on the state_store's thread, the log's
// appends on the ingress' thread.
//
//  DS1. Every data-path spawn first closes the previous data path's log writer, then runs the
//       restore step (load, replay plan, prove: RD1-RD5, LR1-LR7); the data path starts from
//       what it names (a snapshot, the log's records, the ring from the log's end), or cold. A
//       plan of an older request is ignored.
//  DS2. Without a working delta log the first snapshot is due 5 s after the data path started
//       (to learn the batch rate), then every interval (RD8, or the configured one). With one,
//       snapshots are due 5 s after the data path started (once), then when the log outgrows
//       the size of the last snapshot (RD9; the writer calls back); a fixed interval, when
//       configured, still applies. One write at a time: a tick while one is outstanding does
//       nothing.
//  DS3. A cut whose position, epoch, incarnation and adapters equal the last written one's is
//       not written again (nothing changed).
//  DS4. A cut from another engine incarnation than the evidence held (the decoder saw a reset)
//       only establishes that incarnation's evidence (RD7); the next cut can be written. The
//       shutdown's last cut reads it and writes at once (the engine cannot have restarted
//       twice in the moment since).
//  DS5. A discarded snapshot is said once: a warn log line, the discard counter by reason, the
//       status, and — while the index is incomplete because of it — a degraded /readyz line.
//  DS6. A data path gets a log writer when the engine's evidence could be read (without it no
//       restart could prove the log, LR4): it begins warm where the restore left off, or cold
//       in a new generation. A cut's generation is the data path's first plus the engine
//       incarnations its decoder saw.
//  DS7. An engine incarnation reset (the ingress says so when it happens) reads the new
//       process' evidence at once and appends it to the log (LR4), without waiting for a cut.
//  DS8. A data path started from a plan asks the ring from where the plan's records end; when
//       it starts from a snapshot or a log, the index says what it then knows of the engine's
//       history: complete (from seq 0), skipped (from later) or lost (since). A cold plan
//       starts the ring cold and says nothing until the ingress learns it.
//  DS9. Cuts are asked for only while a data path runs whose restore step is done. The timer
//       carries a generation: a tick of an older timer is ignored and not re-armed. The log
//       writer's call that the log outgrew its threshold cuts at once unless a write is
//       outstanding (its report re-arms the threshold, which is then met).

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/ingress/ring_span.hpp"
#include "actors/ingress/sequence_tracker.hpp"
#include "base/counter_table.hpp"
#include "base/metrics_registry.hpp"
#include "base/status.hpp"
#include "durable/format/snapshot_log_io.hpp"
#include "durable/format/snapshot_policy.hpp"
#include "durable/state_store.hpp"
#include "messages/health.hpp"
#include "messages/pipeline_context.hpp"
#include "messages/state.hpp"

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
  /// RD9: with a working log the timer only looks whether the log still works.
  static constexpr ms log_check_delay{60000};
  /// RD9: the log is compacted when it outgrows the last snapshot's size, at least this.
  static constexpr uint64_t min_compaction_bytes = uint64_t{256} << 10;

  /// `ring`: where the ingress publishes the ring span it learns (RD8); may be null.
  durable_state(const pipeline_context& ctx, state_options o,
                std::shared_ptr<ingress::ring_gauge> ring);

  state_store& store() noexcept { return *store_; }

  /// DS1: a data path of incarnation `inc` is to start; the generation the plan must carry.
  uint64_t begin_restore(uint64_t datapath_incarnation);
  bool restore_pending() const noexcept { return pending_.has_value(); }
  uint64_t pending_incarnation() const noexcept { return pending_.value_or(0); }
  /// DS1, DS5: a plan arrived. Returns the snapshot to start from (null: none) when the plan
  /// answers the pending request; `current` says whether it did.
  std::shared_ptr<const snapshot::pipeline_snapshot> on_plan(const restore_plan& p,
                                                             bool& current);
  /// The request will never be answered usefully (teardown).
  void abandon_restore() { pending_.reset(); }

  /// DS6: the log writer of the data path about to start from `p` (null: no log);
  /// `compaction_due` runs on the appending thread when the log outgrew its threshold.
  std::shared_ptr<snapshot::log_writer> start_writer(const restore_plan& p,
                                                     std::function<void()> compaction_due);
  const std::shared_ptr<snapshot::log_writer>& writer() const noexcept { return writer_; }
  /// Whether the log is being written (RD9).
  bool log_working() const;

  /// RD6 (the tracker on the resume request): the restored state is discarded after all.
  void on_outside_ring();

  /// DS8: what the data path starting from `p` is told beside the plan's records.
  struct datapath_start {
    std::optional<ingress::resume_point> resume;  // unset: the ring from the start
    std::optional<health_fact> history;           // unset: nothing to say yet
  };
  static datapath_start start_of(const restore_plan& p);

  /// DS2: the delay before the next tick, and whether a tick takes a snapshot.
  ms next_delay() const;
  bool tick_takes_snapshot() const;
  bool write_outstanding() const noexcept { return outstanding_; }

  /// DS9: a new snapshot timer (older ones go stale): its delay and the generation its tick
  /// carries.
  struct timer {
    ms delay;
    uint64_t generation;
  };
  timer arm_timer() noexcept { return {next_delay(), ++timer_generation_}; }
  /// DS2, DS9: what a tick of the timer armed as `generation` does.
  enum class tick : uint8_t { stale, rearm, cut_and_rearm };
  tick on_tick(uint64_t generation) const;
  /// DS9: the log writer's call (RD9): whether to cut now.
  bool on_compaction_due() const noexcept { return !pending_ && !outstanding_; }
  /// DS9: whether a cut may be asked for now.
  bool may_cut() const noexcept { return !pending_; }

  /// DS7: the incarnation whose evidence to read now.
  uint64_t on_reset() noexcept { return ++resets_; }

  /// What to do with a cut (DS3, DS4); sets its generation (DS6).
  enum class decision : uint8_t { skip_unchanged, establish, write };
  decision judge(snapshot::pipeline_snapshot& s);
  const snapshot::evidence& incarnation_evidence() const noexcept { return engine_; }
  /// A cut is being asked for: the log's size now is what it will cover (RD9).
  void cut_requested();
  void submitted() noexcept { outstanding_ = true; }
  /// DS3, DS4: a cut's write: none (unchanged), or the mode to write it in (the shutdown's
  /// `final` cut of an incarnation not yet proved is proved and written at once); a write is
  /// outstanding from here until its report.
  std::optional<write_mode> submit(snapshot::pipeline_snapshot& s, bool final);

  /// A write's or an establish's outcome (counters, gauges, log lines, the evidence of a new
  /// incarnation, the next compaction threshold).
  void on_report(const write_report& r);

  /// DS5: the /readyz line while the index is incomplete ("" when none).
  const std::string& readyz_line() const noexcept { return readyz_line_; }
  void add_status(actor_status& j) const;
  const durable_counters& counters() const noexcept { return c_; }

 private:
  void publish();
  /// RD9: compaction is due once the log grew by `due_in` past the last cut (default: the
  /// snapshot's size, at least min_compaction_bytes).
  void arm_compaction(uint64_t snapshot_bytes, std::optional<uint64_t> due_in);
  /// RD9: the log grew past the threshold since the last cut (the writer's call may be lost).
  bool compaction_overdue() const;

  pipeline_context ctx_;
  std::unique_ptr<state_store> store_;
  std::shared_ptr<ingress::ring_gauge> ring_;
  uint64_t generation_ = 0;
  std::optional<uint64_t> pending_;  // the data-path incarnation waiting for its plan
  uint64_t timer_generation_ = 0;    // DS9: the current snapshot timer's
  // The engine incarnation the data path's cuts come from (RD7): the decoder's count and the
  // evidence read for it.
  uint64_t incarnation_ = 0;
  uint64_t resets_ = 0;  // incarnation resets the ingress told of (DS7)
  snapshot::evidence engine_;
  // The delta log (DS6): the writer, the generation the data path started in, what the
  // restore replayed, and the compaction's base and callback.
  std::shared_ptr<snapshot::log_writer> writer_;
  uint32_t base_generation_ = 0;
  size_t replayed_batches_ = 0;
  std::string log_detail_;
  uint64_t appended_at_cut_ = 0;  // the log's size at the last written cut
  uint64_t cut_appended_ = 0;     // ... at the cut being written
  uint64_t last_snapshot_bytes_ = 0;  // the compaction threshold's base (RD9)
  uint64_t log_at_start_ = 0;         // log bytes the restore replayed, not yet covered
  std::function<void()> compaction_due_;
  // What was restored (status).
  std::string restore_outcome_ = "not yet";  // restored | discarded | absent | not yet
  std::string restore_detail_;
  std::optional<snapshot::discard_reason> restore_discard_;
  std::string readyz_line_;
  // Writes.
  bool outstanding_ = false;
  bool written_since_start_ = false;  // by this data path (RD9's first snapshot)
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
  uint64_t state_bytes_ = 0;
  durable_counters c_;
  counter_table<durable_counters> counters_;
  // Series, resolved once.
  std::array<counter_series*, 11> discard_series_{};
  gauge_series* bytes_ = nullptr;
  gauge_series* blocks_ = nullptr;
  gauge_series* last_success_ = nullptr;
  gauge_series* write_seconds_ = nullptr;
  gauge_series* interval_ = nullptr;
  gauge_series* state_bytes_gauge_ = nullptr;
  gauge_series* dir_bytes_ = nullptr;
  counter_series* written_bytes_ = nullptr;
};

}  // namespace kvrelay
