// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "runtime/durable_state.hpp"

#include <algorithm>

#include "base/log.hpp"

namespace kvrelay {

namespace {

// kvrelay_snapshot_{writes,restores}_total{outcome}: one row per counter, declared once.
struct counter_row {
  const char* name;
  const char* help;
  const char* outcome;
  uint64_t durable_counters::*field;
};
constexpr const char* writes_help =
    "Durable index snapshots by outcome: written, established (a new engine incarnation's "
    "evidence read), skipped (unchanged, or the engine could not be proved), failed";
constexpr const char* restores_help =
    "Durable index restore steps by outcome: restored, discarded (see "
    "kvrelay_snapshot_discards_total), absent (no file)";
constexpr counter_row counter_rows[] = {
    {"kvrelay_snapshot_writes_total", writes_help, "written", &durable_counters::written},
    {"kvrelay_snapshot_writes_total", writes_help, "established", &durable_counters::established},
    {"kvrelay_snapshot_writes_total", writes_help, "skipped", &durable_counters::skipped},
    {"kvrelay_snapshot_writes_total", writes_help, "failed", &durable_counters::failed},
    {"kvrelay_snapshot_restores_total", restores_help, "restored", &durable_counters::restored},
    {"kvrelay_snapshot_restores_total", restores_help, "discarded",
     &durable_counters::discarded},
    {"kvrelay_snapshot_restores_total", restores_help, "absent", &durable_counters::absent},
};
static_assert(sizeof counter_rows / sizeof counter_rows[0] == 7, "counter_series_ size");

constexpr snapshot::discard_reason all_reasons[] = {
    snapshot::discard_reason::unreadable,     snapshot::discard_reason::not_a_snapshot,
    snapshot::discard_reason::other_version,  snapshot::discard_reason::truncated,
    snapshot::discard_reason::corrupt,        snapshot::discard_reason::other_pipeline,
    snapshot::discard_reason::engine_restarted, snapshot::discard_reason::no_evidence,
    snapshot::discard_reason::proof_missing,  snapshot::discard_reason::ring_moved_on,
};
static_assert(sizeof all_reasons / sizeof all_reasons[0] == 10, "discard_series_ size");

int64_t now_unix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

durable_state::durable_state(const pipeline_context& ctx, state_options o)
    : ctx_(ctx), store_(std::make_unique<state_store>(std::move(o))) {
  for (size_t i = 0; i < counter_series_.size(); ++i)
    counter_series_[i] = &ctx_.counter(counter_rows[i].name, counter_rows[i].help,
                                       {{"outcome", counter_rows[i].outcome}});
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
                          "and the batch rate unless state.interval is set)");
  interval_->set(static_cast<double>(next_delay().count()) / 1000.0);
}

uint64_t durable_state::begin_restore(uint64_t datapath_incarnation) {
  pending_ = datapath_incarnation;
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
  engine_ = p.engine;
  restore_discard_ = p.discarded;
  restore_detail_ = p.detail;
  readyz_line_.clear();
  const std::string& file = store_->options().file;
  if (engine_.empty())
    log::warn("engine process not identified: snapshots of the durable index will not be "
              "written",
              {{"replica", ctx_.name}, {"err", p.evidence_error}});
  if (p.snapshot) {
    ++c_.restored;
    restore_outcome_ = "restored";
    log::info("durable index restored",
              {{"replica", ctx_.name}, {"file", file}, {"blocks", p.snapshot->blocks()},
               {"next_seq", p.snapshot->next_seq}, {"seconds", p.load_seconds}});
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
  if (rate_ <= 0) return last_cut_ ? snapshot::interval(o.ring_batches, 0) : first_delay;
  return snapshot::interval(o.ring_batches, rate_);
}

durable_state::decision durable_state::judge(const snapshot::pipeline_snapshot& s) {
  const auto now = std::chrono::steady_clock::now();
  if (last_cut_ && s.next_seq > last_cut_->first) {
    const double secs = std::chrono::duration<double>(now - last_cut_->second).count();
    if (secs > 0.1) rate_ = static_cast<double>(s.next_seq - last_cut_->first) / secs;
  }
  last_cut_ = std::make_pair(s.next_seq, now);
  interval_->set(static_cast<double>(next_delay().count()) / 1000.0);
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
  outstanding_ = false;
  log::debug("durable index write", {{"replica", ctx_.name}, {"outcome", to_string(r.what)},
                                     {"detail", r.detail}, {"next_seq", r.next_seq},
                                     {"final", r.final},
                                     {"evidence_s", r.evidence_seconds}, {"s", r.seconds}});
  switch (r.what) {
    case write_report::outcome::written:
      ++c_.written;
      if (submitting_ && submitting_->next_seq == r.next_seq) last_written_ = submitting_;
      bytes_->set(static_cast<double>(r.bytes));
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
      incarnation_ = r.incarnation;
      engine_ = r.engine;
      last_write_ = "established: " + r.detail;
      log::info("durable index: a new engine incarnation; its next snapshot can be written",
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
  publish();
}

void durable_state::publish() {
  for (size_t i = 0; i < counter_series_.size(); ++i)
    counter_series_[i]->advance(c_.*(counter_rows[i].field),
                                published_.*(counter_rows[i].field));
}

void durable_state::add_status(actor_status& j) const {
  j.add("state_file", store_->options().file);
  j.add("restore", restore_outcome_);
  j.add("restore_reason", restore_discard_ ? to_string(*restore_discard_) : "");
  j.add("restore_detail", restore_detail_);
  j.add("snapshot_interval_s", static_cast<double>(next_delay().count()) / 1000.0);
  j.add("snapshots_written", c_.written);
  j.add("last_snapshot", last_write_);
}

}  // namespace kvrelay
