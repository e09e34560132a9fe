// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "durable/durable_state.hpp"

#include <algorithm>

#include "actors/ingress/ingress_actor.hpp"
#include "base/log.hpp"

namespace kvrelay {

namespace {

// kvrelay_snapshot_{writes,restores}_total{outcome}: one row per counter (base/counter_table.hpp).
constexpr const char* writes_help =
    "Durable index snapshots by outcome: written, established (a new engine incarnation's "
    "evidence read), skipped (unchanged, or the engine could not be proved), failed";
constexpr const char* restores_help =
    "Durable index restore steps by outcome: restored, discarded (see "
    "kvrelay_snapshot_discards_total), absent (no file)";
constexpr counter_row<durable_counters> counter_rows[] = {
    {"kvrelay_snapshot_writes_total", writes_help, "outcome", "written",
     &durable_counters::written},
    {"kvrelay_snapshot_writes_total", writes_help, "outcome", "established",
     &durable_counters::established},
    {"kvrelay_snapshot_writes_total", writes_help, "outcome", "skipped",
     &durable_counters::skipped},
    {"kvrelay_snapshot_writes_total", writes_help, "outcome", "failed", &durable_counters::failed},
    {"kvrelay_snapshot_restores_total", restores_help, "outcome", "restored",
     &durable_counters::restored},
    {"kvrelay_snapshot_restores_total", restores_help, "outcome", "discarded",
     &durable_counters::discarded},
    {"kvrelay_snapshot_restores_total", restores_help, "outcome", "absent",
     &durable_counters::absent},
};

constexpr snapshot::discard_reason all_reasons[] = {
    snapshot::discard_reason::unreadable,     snapshot::discard_reason::not_a_snapshot,
    snapshot::discard_reason::other_version,  snapshot::discard_reason::truncated,
    snapshot::discard_reason::corrupt,        snapshot::discard_reason::other_pipeline,
    snapshot::discard_reason::engine_restarted, snapshot::discard_reason::no_evidence,
    snapshot::discard_reason::proof_missing,  snapshot::discard_reason::ring_moved_on,
    snapshot::discard_reason::log_incomplete,
};
static_assert(sizeof all_reasons / sizeof all_reasons[0] == 11, "discard_series_ size");

int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

durable_state::durable_state(const pipeline_context& ctx, state_options o,
                             std::shared_ptr<ingress::ring_gauge> ring)
    : ctx_(ctx),
      store_(std::make_unique<state_store>(std::move(o))),
      ring_(std::move(ring)),
      counters_(counter_rows, ctx_.metrics, ctx_.labels()) {
  for (size_t i = 0; i < discard_series_.size(); ++i)
    discard_series_[i] = &ctx_.counter(
        "kvrelay_snapshot_discards_total",
        "Durable index snapshots not used, by reason (the pipeline started cold instead)",
        {{"reason", to_string(all_reasons[i])}});
  bytes_ = &ctx_.gauge("kvrelay_snapshot_bytes", "Size of the last snapshot written");
  blocks_ = &ctx_.gauge("kvrelay_snapshot_blocks", "Resident blocks in the last snapshot written");
  last_success_ = &ctx_.gauge("kvrelay_snapshot_last_success_timestamp_seconds",
                              "Unix time of the last snapshot written (0: none yet)");
  write_seconds_ = &ctx_.gauge("kvrelay_snapshot_write_seconds",
                               "Time the last snapshot took to encode, write, fsync and rename");
  interval_ = &ctx_.gauge("kvrelay_snapshot_interval_seconds",
                          "Current interval between snapshots (derived from the replay ring "
                          "and the batch rate unless state.interval is set; 0 while the delta "
                          "log is written: snapshots then compact it)");
  state_bytes_gauge_ = &ctx_.gauge(
      "kvrelay_state_bytes", "The pipeline's durable index on disk: its snapshot and delta log");
  // The delta log's series exist from the start (0 without a log); the ingress that writes one
  // advances them (actors/ingress/ingress_actor.cpp, the same help texts).
  ctx_.counter("kvrelay_state_log_bytes_total", ingress_log_bytes_help);
  ctx_.gauge("kvrelay_state_log_writing", ingress_log_writing_help);
  written_bytes_ = &ctx_.counter("kvrelay_snapshot_written_bytes_total",
                                 "Bytes of durable index snapshots written (the disk cost, with "
                                 "kvrelay_state_log_bytes_total)");
  dir_bytes_ = &ctx_.metrics->gauge(
      "kvrelay_state_dir_bytes",
      "Every kvrelay file in state.dir (snapshots, delta logs, writes in progress)", {});
  interval_->set(tick_takes_snapshot() ? static_cast<double>(next_delay().count()) / 1000.0 : 0);
}

uint64_t durable_state::begin_restore(uint64_t datapath_incarnation) {
  // DS1: nothing more is appended by the old data path while the log is read.
  if (writer_) writer_->close();
  writer_.reset();
  pending_ = datapath_incarnation;
  written_since_start_ = false;
  outstanding_ = false;  // a new data path: whatever was in flight is of the old one
  last_cut_.reset();
  return ++generation_;
}

std::shared_ptr<const snapshot::pipeline_snapshot> durable_state::on_plan(const restore_plan& p,
                                                                         bool& current) {
  current = pending_ && p.generation == generation_;
  if (!current) return nullptr;
  pending_.reset();
  incarnation_ = 0;
  resets_ = 0;
  engine_ = p.engine;
  restore_discard_ = p.discarded;
  restore_detail_ = p.detail;
  readyz_line_.clear();
  base_generation_ = p.log_generation;
  replayed_batches_ = p.log ? p.log->batches : 0;
  log_detail_ = p.log_detail;
  state_bytes_ = p.state_bytes;
  state_bytes_gauge_->set(static_cast<double>(state_bytes_));
  const std::string& file = store_->options().file;
  if (!p.log_detail.empty())
    log::warn("durable index: the delta log's tail was torn or corrupt; its valid prefix is used",
              {{"replica", ctx_.name}, {"detail", p.log_detail}});
  if (engine_.empty())
    log::warn("engine process not identified: snapshots of the durable index will not be "
              "written",
              {{"replica", ctx_.name}, {"err", p.evidence_error}});
  if (!p.cold) {
    ++c_.restored;
    restore_outcome_ = "restored";
    if (p.discarded) {
      // The snapshot could not be used, and the delta log held the whole history without it.
      const size_t i = static_cast<size_t>(*p.discarded);
      if (i < discard_series_.size()) discard_series_[i]->inc();
      log::warn("durable index snapshot discarded; restored from the delta log alone",
                {{"replica", ctx_.name}, {"file", file}, {"reason", to_string(*p.discarded)},
                 {"detail", p.detail}});
    }
    log::info("durable index restored",
              {{"replica", ctx_.name}, {"file", file},
               {"blocks", p.snapshot ? p.snapshot->blocks() : size_t{0}},
               {"snapshot_seq", p.snapshot ? p.snapshot->next_seq : uint64_t{0}},
               {"log_batches", replayed_batches_}, {"next_seq", p.resume_next.value_or(0)},
               {"seconds", p.load_seconds}});
  } else if (p.discarded) {
    ++c_.discarded;
    restore_outcome_ = "discarded";
    const size_t i = static_cast<size_t>(*p.discarded);
    if (i < discard_series_.size()) discard_series_[i]->inc();
    readyz_line_ = std::string("degraded (still ready): durable index not restored: ") +
                   describe(*p.discarded);
    log::warn("durable index snapshot discarded; starting cold",
              {{"replica", ctx_.name}, {"file", file}, {"reason", to_string(*p.discarded)},
               {"detail", p.detail}});
  } else {
    ++c_.absent;
    restore_outcome_ = "absent";
    log::info("no durable index snapshot yet; starting cold",
              {{"replica", ctx_.name}, {"file", file}});
  }
  publish();
  return p.snapshot;
}

std::shared_ptr<snapshot::log_writer> durable_state::start_writer(
    const restore_plan& p, std::function<void()> compaction_due) {
  const auto& o = store_->options();
  writer_.reset();
  compaction_due_ = std::move(compaction_due);
  if (!o.log || engine_.empty()) return nullptr;  // DS6: nothing could prove it
  snapshot::writer_options w;
  w.stem = snapshot::log_stem(o.file);
  w.pipeline_key = snapshot::pipeline_key(o.who);
  w.first_segment = p.next_segment;
  w.generation = p.log_generation;
  const size_t threshold =
      std::max<size_t>(min_compaction_bytes, p.snapshot_bytes);
  w.segment_bytes = o.segment_bytes > 0
                        ? o.segment_bytes
                        : std::clamp<size_t>(threshold / 4, size_t{64} << 10, size_t{8} << 20);
  writer_ = std::make_shared<snapshot::log_writer>(w);
  // LR7: where this writer's records continue from.
  writer_->begin(p.cold, p.cold ? 0 : p.resume_next.value_or(0), engine_);
  // The log the restore replays counts toward the threshold: a kvrelay that is killed again and
  // again before it compacts must not grow its log without end.
  const uint64_t replayed = p.log ? p.log->bytes : 0;
  appended_at_cut_ = 0;
  cut_appended_ = 0;
  last_snapshot_bytes_ = p.snapshot_bytes;
  log_at_start_ = replayed;
  arm_compaction(p.snapshot_bytes, replayed < threshold ? threshold - replayed : 0);
  return writer_;
}

bool durable_state::compaction_overdue() const {
  if (!writer_) return false;
  const uint64_t threshold = std::max<uint64_t>(min_compaction_bytes, last_snapshot_bytes_);
  const uint64_t grown = log_at_start_ + writer_->read().appended_bytes - appended_at_cut_;
  return grown >= threshold;
}

bool durable_state::log_working() const { return writer_ && writer_->read().writing; }

void durable_state::arm_compaction(uint64_t snapshot_bytes, std::optional<uint64_t> due_in) {
  if (!writer_ || !compaction_due_) return;
  const uint64_t threshold = std::max<uint64_t>(min_compaction_bytes, snapshot_bytes);
  writer_->notify_at(appended_at_cut_ + due_in.value_or(threshold), compaction_due_);
}

void durable_state::cut_requested() {
  if (writer_) cut_appended_ = writer_->read().appended_bytes;
}

void durable_state::on_outside_ring() {
  if (restore_outcome_ != "restored") return;
  ++c_.discarded;  // (restored stays counted: it was restored, then given up)
  restore_outcome_ = "discarded";
  restore_discard_ = snapshot::discard_reason::ring_moved_on;
  discard_series_[static_cast<size_t>(snapshot::discard_reason::ring_moved_on)]->inc();
  readyz_line_ = std::string("degraded (still ready): durable index not restored: ") +
                 describe(snapshot::discard_reason::ring_moved_on);
  log::warn("durable index snapshot discarded; the pipeline cleared",
            {{"replica", ctx_.name}, {"reason", "ring_moved_on"}});
  publish();
}

durable_state::ms durable_state::next_delay() const {
  const auto& o = store_->options();
  if (o.interval.count() > 0) return o.interval;
  // RD9: the log covers; compaction snapshots it. One snapshot soon after the start all the
  // same: it makes the next start's replay short, and it removes the files of this pipeline's
  // earlier endpoints (an engine restarted on new ports).
  if (log_working()) return written_since_start_ ? log_check_delay : first_delay;
  // RD8: the ring's span as learnt from the engine (ring_span.hpp RS6), the configured one
  // until then; the rate the ingress measures, else the one between cuts.
  const auto ring = ring_ ? ring_->load() : ingress::ring_estimate{};
  const uint64_t batches = ring.used(o.ring_batches);
  const double rate = ring.batches_per_second > 0 ? ring.batches_per_second : rate_;
  if (rate <= 0) return last_cut_ ? snapshot::interval(batches, 0) : first_delay;
  return snapshot::interval(batches, rate);
}

bool durable_state::tick_takes_snapshot() const {
  // compaction_overdue: the writer's call was lost (a cut not taken while a restore was pending,
  // a write skipped); the timer catches it within a minute.
  return store_->options().interval.count() > 0 || !log_working() || !written_since_start_ ||
         compaction_overdue();
}

durable_state::datapath_start durable_state::start_of(const restore_plan& p) {
  datapath_start d;
  if (p.cold || !p.resume_next) return d;
  d.resume = ingress::resume_point{*p.resume_next, p.history_from};
  // What the restored index knows of the engine's cache is what it knew when the log ends (a
  // replayed first batch or loss tells it again on its way).
  if (p.snapshot || p.log)
    d.history = !p.history_known      ? health_fact::history_lost
                : p.history_from == 0 ? health_fact::history_complete
                                      : health_fact::history_skipped;
  return d;
}

durable_state::tick durable_state::on_tick(uint64_t generation) const {
  if (generation != timer_generation_) return tick::stale;
  return !pending_ && !outstanding_ && tick_takes_snapshot() ? tick::cut_and_rearm : tick::rearm;
}

std::optional<write_mode> durable_state::submit(snapshot::pipeline_snapshot& s, bool final) {
  const decision d = judge(s);
  if (d == decision::skip_unchanged) return std::nullopt;
  outstanding_ = true;
  if (d == decision::write) return write_mode::write;
  return final ? write_mode::establish_and_write : write_mode::establish;  // DS4
}

durable_state::decision durable_state::judge(snapshot::pipeline_snapshot& s) {
  s.generation = base_generation_ + static_cast<uint32_t>(s.incarnation);  // DS6
  const auto now = std::chrono::steady_clock::now();
  if (last_cut_ && s.next_seq > last_cut_->first) {
    const double secs = std::chrono::duration<double>(now - last_cut_->second).count();
    if (secs > 0.1) rate_ = static_cast<double>(s.next_seq - last_cut_->first) / secs;
  }
  last_cut_ = std::make_pair(s.next_seq, now);
  interval_->set(tick_takes_snapshot() ? static_cast<double>(next_delay().count()) / 1000.0 : 0);
  if (s.incarnation != incarnation_) return decision::establish;  // DS4
  const cut c{s.next_seq, s.epoch, s.incarnation, s.adapters.size()};
  if (last_written_ && last_written_->next_seq == c.next_seq && last_written_->epoch == c.epoch &&
      last_written_->incarnation == c.incarnation && last_written_->adapters == c.adapters) {
    ++c_.skipped;  // DS3
    publish();
    return decision::skip_unchanged;
  }
  submitting_ = c;
  return decision::write;
}

void durable_state::on_report(const write_report& r) {
  if (r.cut) outstanding_ = false;
  log::debug("durable index write", {{"replica", ctx_.name}, {"outcome", to_string(r.what)},
                                     {"detail", r.detail}, {"next_seq", r.next_seq},
                                     {"final", r.final},
                                     {"evidence_s", r.evidence_seconds}, {"s", r.seconds}});
  switch (r.what) {
    case write_report::outcome::written:
      ++c_.written;
      written_since_start_ = true;
      if (submitting_ && submitting_->next_seq == r.next_seq) last_written_ = submitting_;
      // A final write with the evidence read now (DS4) proved the incarnation.
      if (r.incarnation != incarnation_ && !r.engine.empty()) {
        incarnation_ = r.incarnation;
        engine_ = r.engine;
      }
      // What the log held before this cut is covered now (RD9 counts from here).
      last_snapshot_bytes_ = r.bytes;
      appended_at_cut_ = cut_appended_;
      log_at_start_ = 0;
      state_bytes_ = r.state_bytes;
      state_bytes_gauge_->set(static_cast<double>(r.state_bytes));
      dir_bytes_->set(static_cast<double>(r.dir_bytes));
      if (r.stale_removed > 0)
        log::info("durable index: files of this pipeline's earlier endpoints removed",
                  {{"replica", ctx_.name}, {"bytes", r.stale_removed}});
      bytes_->set(static_cast<double>(r.bytes));
      written_bytes_->inc(r.bytes);
      blocks_->set(static_cast<double>(r.blocks));
      last_success_->set(static_cast<double>(now_unix()));
      write_seconds_->set(r.seconds);
      last_write_ = "written: " + std::to_string(r.blocks) + " blocks, " +
                    std::to_string(r.bytes) + " bytes, next seq " + std::to_string(r.next_seq);
      if (r.final)
        log::info("durable index snapshot written at shutdown",
                  {{"replica", ctx_.name}, {"file", store_->options().file},
                   {"blocks", r.blocks}, {"bytes", r.bytes}, {"next_seq", r.next_seq}});
      break;
    case write_report::outcome::established:
      ++c_.established;
      if (r.incarnation < incarnation_) break;  // an older reset's answer, overtaken
      incarnation_ = r.incarnation;
      engine_ = r.engine;
      last_write_ = "established: " + r.detail;
      log::info("durable index: a new engine incarnation proved (its evidence is in the delta log)",
                {{"replica", ctx_.name}, {"detail", r.detail}});
      break;
    case write_report::outcome::skipped:
      ++c_.skipped;
      last_write_ = "skipped: " + r.detail;
      break;
    case write_report::outcome::failed:
      ++c_.failed;
      last_write_ = "failed: " + r.detail;
      log::error("durable index snapshot not written; the previous one stays",
                 {{"replica", ctx_.name}, {"err", r.detail}});
      break;
  }
  // RD9: the next compaction is due when the log has grown by the last snapshot's size since this
  // cut, whatever the cut came to (a skipped or failed write must not leave it unarmed).
  if (r.cut && r.what != write_report::outcome::established)
    arm_compaction(last_snapshot_bytes_, std::nullopt);
  // SIGTERM leaves a usable state, or says why it could not (and what the next start has).
  if (r.final && r.what != write_report::outcome::written)
    log::warn("durable index: no snapshot written at shutdown",
              {{"replica", ctx_.name}, {"outcome", to_string(r.what)}, {"detail", r.detail},
               {"next_start", log_working() ? "the last snapshot and the delta log"
                                            : "the last snapshot and the replay ring"}});
  publish();
}

void durable_state::publish() { counters_.publish(c_); }

void durable_state::add_status(actor_status& j) const {
  j.add("state_file", store_->options().file);
  j.add("restore", restore_outcome_);
  j.add("restore_reason", restore_discard_ ? to_string(*restore_discard_) : "");
  j.add("restore_detail", restore_detail_);
  j.add("snapshot_interval_s",
        tick_takes_snapshot() ? static_cast<double>(next_delay().count()) / 1000.0 : 0.0);
  j.add("snapshots_written", c_.written);
  j.add("last_snapshot", last_write_);
  // The delta log (durable/format/snapshot_log.hpp).
  j.add("state_bytes", state_bytes_);
  j.add("log_replayed_batches", static_cast<uint64_t>(replayed_batches_));
  j.add("log_restore_detail", log_detail_);
  if (writer_) {
    const auto w = writer_->read();
    j.add("log", w.writing ? std::string("writing")
                           : "stopped: " + (w.stopped.empty() ? std::string("closed") : w.stopped));
    j.add("log_generation", static_cast<uint64_t>(w.generation));
    j.add("log_bytes", w.disk_bytes);
    j.add("log_segments", w.segments);
    j.add("log_appended_bytes", w.appended_bytes);
  } else {
    j.add("log", store_->options().log ? std::string("off: the engine's process cannot be proved")
                                       : std::string("off"));
  }
}

}  // namespace kvrelay
