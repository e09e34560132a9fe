// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Longer than ~400 lines on purpose: one protocol, its rules numbered in the header; each input
// is short, and splitting them from the internals they share would scatter every rule.
#include "actors/debouncer/debouncer_protocol.hpp"

#include <algorithm>
#include <random>

namespace kvrelay::debounce {

const char* to_string(action_kind k) noexcept {
  switch (k) {
    case action_kind::send_unit: return "send_unit";
    case action_kind::arm_flush: return "arm_flush";
    case action_kind::arm_resync: return "arm_resync";
    case action_kind::arm_refresh: return "arm_refresh";
    case action_kind::report: return "report";
    case action_kind::answer_drains: return "answer_drains";
    case action_kind::health: return "health";
    case action_kind::listen: return "listen";
    case action_kind::log: return "log";
    case action_kind::trim_heap: return "trim_heap";
  }
  return "?";
}

namespace {

action make(action_kind k) {
  action a;
  a.kind = k;
  return a;
}

bool has_removal(const shard_ops& ops) {
  return std::any_of(ops.ops.begin(), ops.ops.end(),
                     [](const prefix_op& o) { return o.op == prefix_op::kind::evict; });
}

}  // namespace

protocol::protocol(options o)
    : opts_(o),
      pending_(pending_set::options{o.l2_mode, o.max_pending, o.max_adds_per_unit}),
      backoff_(o.resync_backoff_initial, o.resync_backoff_max,
               o.seed != 0 ? o.seed : std::random_device{}()) {
  if (opts_.max_units_in_flight == 0) opts_.max_units_in_flight = 1;
  if (opts_.flush_threshold == 0) opts_.flush_threshold = 1;
  if (opts_.merged) holders_.emplace();
  if (opts_.repair_base_sweeps) repair_.emplace(opts_.max_pending);
}

uint64_t protocol::epoch(uint32_t r) const {
  auto it = ranks_.find(r);
  return it == ranks_.end() ? 1 : it->second.epoch;
}

void protocol::log(actions& out, log::level l, std::string text, std::vector<log::field> f) {
  auto a = make(action_kind::log);
  a.line = log::record{l, std::move(text), std::move(f)};
  out.push_back(std::move(a));
}

// ---- inputs ------------------------------------------------------------------------------------

void protocol::start(moment now, actions& out) {
  if (opts_.refresh_interval.count() > 0) {
    auto a = make(action_kind::arm_refresh);
    a.delay = opts_.refresh_interval;
    out.push_back(std::move(a));
  }
  if (opts_.start_with_clear) {  // DB14
    pending_.clear(now.wall_us);
    due_ = true;
  }
  pump(now, out);
}

void protocol::on_emitter(moment now, actions& out) {
  has_emitter_ = true;
  out.push_back(make(action_kind::listen));
  if (!in_flight_.empty()) {  // DB10: whatever the old emitter had not finished is unknown
    in_flight_.clear();
    const bool had_probe = probe_unit_ != 0;
    if (final_ == final_clear::sent) final_ = final_clear::wanted;  // to the new emitter
    ++c_.units_failed;
    failed(had_probe, "emitter restarted with units in flight", now, out);
  }
  pump(now, out);
  check_drains(out);
}

void protocol::on_decoder(uint32_t r, moment now, actions& out) {
  rank(r).decoder = true;
  pump(now, out);
}

void protocol::on_rank_started(uint32_t r, moment now, actions& out) {
  if (ranks_.count(r) != 0 && holders_) clear_rank(r, now.wall_us, now, out);
  ranks_[r] = rank_state{};  // a new data path: its decoder starts at epoch 1 again
  pump(now, out);
  check_drains(out);
}

void protocol::on_ops(uint32_t r, const shard_ops& ops, moment now, actions& out) {
  if (final_ != final_clear::none) {  // DB16: the shutdown clear supersedes everything after it
    c_.after_final_clear += ops.ops.size();
    return;
  }
  auto& rs = rank(r);
  if (ops.epoch < rs.epoch) {  // DB1: stored before a clear; must never reach the server after it
    c_.stale_ops += ops.ops.size();
    return;
  }
  if (ops.epoch > rs.epoch) {  // DB1: the clear notice is behind this op: clear now
    rs.epoch = ops.epoch;
    clear_rank(r, ops.ts_us, now, out);
  }
  if (holders_)
    apply(filter_merged(r, ops), now, out);
  else
    apply(ops, now, out);
  pump(now, out);
  check_drains(out);
}

void protocol::on_clear(uint32_t r, uint64_t epoch, int64_t ts_us, moment now, actions& out) {
  if (final_ != final_clear::none) return;
  auto& rs = rank(r);
  if (epoch <= rs.epoch && epoch != 0) return;  // already cleared by a newer-epoch op
  rs.epoch = std::max(rs.epoch, epoch);
  clear_rank(r, ts_us, now, out);
  pump(now, out);
  check_drains(out);
}

void protocol::on_result(const emit_result& r, moment now, actions& out) {
  auto it = std::find(in_flight_.begin(), in_flight_.end(), r.id);
  if (it == in_flight_.end()) return;  // from before an emitter restart
  in_flight_.erase(it);
  if (r.id == final_unit_ && final_ == final_clear::sent) {
    final_ = r.ok ? final_clear::acked : final_clear::failed;
    tell_health(r.ok, out);
  } else if (!r.ok) {
    ++c_.units_failed;
    failed(r.id == probe_unit_, r.last_error, now, out);
  } else {
    tell_health(true, out);
    if (r.id == probe_unit_) probe_acked(now, out);
  }
  pump(now, out);
  check_drains(out);
}

void protocol::on_flush_timer(uint64_t gen, moment now, actions& out) {
  if (gen != flush_gen_) return;
  window_armed_ = false;
  if (pending_.pending_adds() > 0) due_ = true;
  pump(now, out);
  check_drains(out);
}

void protocol::on_resync_timer(uint64_t gen, moment now, actions& out) {
  if (gen != resync_gen_ || draining_) return;
  if (deferred_resync_) {
    deferred_resync_ = false;
    if (healthy_) start_resync("transport reconnected (deferred)", now, out);
  } else if (!healthy_ && probe_unit_ == 0) {
    probe_wanted_ = true;  // DB8
  }
  pump(now, out);
  check_drains(out);
}

void protocol::on_refresh_timer(moment, actions& out) {
  if (opts_.refresh_interval.count() > 0) {
    auto a = make(action_kind::arm_refresh);
    a.delay = opts_.refresh_interval;
    out.push_back(std::move(a));
  }
  if (!healthy_ || resync_in_progress() || draining_ || !reporting_.empty()) return;  // DB13
  for (const auto& [r, rs] : ranks_)
    if (rs.decoder) {
      auto a = make(action_kind::report);
      a.rank = r;
      out.push_back(std::move(a));
    }
}

void protocol::on_reported(uint32_t r, uint64_t gen, moment now, actions& out) {
  if (gen == 0 || gen != report_gen_) return;
  reporting_.erase(std::remove(reporting_.begin(), reporting_.end(), r), reporting_.end());
  if (reporting_.empty()) pending_.end_tracking();  // DB6 ends: every re-report has arrived
  pump(now, out);
  check_drains(out);
}

void protocol::on_reconnected(moment now, actions& out) {
  ++c_.reconnects;
  if (draining_) return;
  if (!healthy_) {
    // DB8: the transport is back; probe now instead of waiting for the backoff.
    if (probe_unit_ == 0 && !probe_wanted_) {
      probe_wanted_ = true;
      ++resync_gen_;  // the backoff timer is moot
    }
  } else if (probe_unit_ != 0 || probe_wanted_ ||
             (last_resync_ms_ &&
              now.steady_ms - *last_resync_ms_ < opts_.reconnect_resync_interval.count())) {
    // DB12: one deferred resync at the end of the interval (the probe in flight may have reached
    // the server before it restarted).
    if (!deferred_resync_) {
      deferred_resync_ = true;
      const int64_t since = last_resync_ms_ ? now.steady_ms - *last_resync_ms_ : 0;
      auto a = make(action_kind::arm_resync);
      a.delay = ms(std::max<int64_t>(opts_.reconnect_resync_interval.count() - since, 1));
      a.gen = ++resync_gen_;
      out.push_back(std::move(a));
    }
  } else {
    start_resync("transport reconnected", now, out);
  }
  pump(now, out);
  check_drains(out);
}

void protocol::on_drain(moment now, actions& out) {
  ++drains_waiting_;
  if (!draining_) {
    draining_ = true;
    due_ = true;
    probe_wanted_ = false;
    deferred_resync_ = false;
    ++resync_gen_;  // no more probes: the shutdown decides what the server keeps
    if (opts_.shutdown_clear) {  // DB16
      c_.superseded += pending_.size();
      pending_.reset();
      final_ = final_clear::wanted;
    } else if (!healthy_) {  // DB17: nothing can be delivered
      drain_failed_ = true;
      c_.superseded += pending_.size();
      pending_.reset();
      log(out, log::level::warn,
          "shutting down while the policy server is unreachable; it keeps what it last had "
          "for this replica until its TTL expires");
    }
  }
  pump(now, out);
  check_drains(out);
}

// ---- internals ---------------------------------------------------------------------------------

void protocol::clear_rank(uint32_t r, int64_t ts_us, moment now, actions& out) {
  if (!holders_) {  // DB14
    pending_.clear(ts_us);
    due_ = true;
    return;
  }
  // DB15: ALL_CLEARED would wipe every rank; evict what no other rank holds instead.
  std::map<std::string, shard_ops> by_adapter;
  holders_->clear_rank(r, [&](const std::string& adapter, uint64_t fp) {
    auto& o = by_adapter[adapter];
    o.adapter = adapter;
    o.ts_us = ts_us;
    o.ops.push_back(prefix_op{prefix_op::kind::evict, fp, 0, tier::t1});
  });
  for (auto& [adapter, o] : by_adapter) apply(o, now, out);
}

// DB15: an add when `r` is the key's first (or only) holder, an eviction when it was the last.
shard_ops protocol::filter_merged(uint32_t r, const shard_ops& in) {
  shard_ops out;
  out.adapter = in.adapter;
  out.epoch = in.epoch;
  out.ts_us = in.ts_us;
  out.had_store = in.had_store;
  out.resync = in.resync;
  out.ops.reserve(in.ops.size());
  const uint64_t me = r < holder_set::max_ranks ? uint64_t{1} << r : 0;
  for (const auto& op : in.ops) {
    if (op.op == prefix_op::kind::upsert) {
      const bool first = holders_->add(in.adapter, op.fingerprint, r);
      if (first || holders_->holders(in.adapter, op.fingerprint) == me) {
        out.ops.push_back(op);
        if (!first) out.ops.back().introduces = false;
      }
    } else if (holders_->remove(in.adapter, op.fingerprint, r)) {
      out.ops.push_back(op);
    }
  }
  return out;
}

void protocol::apply(const shard_ops& ops, moment now, actions& out) {
  if (superseded() && !opts_.l2_mode) {  // DB7: the re-report will bring the truth
    c_.superseded += ops.ops.size();
    return;
  }
  if (opts_.l2_mode && has_removal(ops) && pending_.pending_adds() > 0) {
    due_ = true;  // DB2, L08: the adds reach the server before their downgrades
    pump(now, out);
  }
  if (!pending_.apply(ops)) {  // DB11
    ++c_.overflows;
    uint64_t suppressed = 0;
    if (overflow_log_.allow(now.steady_ms, suppressed))
      log(out, log::level::error, "pending updates over their bound; will clear and resync",
          {{"max_pending", opts_.max_pending}, {"suppressed", suppressed}});
    pending_.reset_overflow();
    if (healthy_) start_resync("pending overflow", now, out);
    return;
  }
  if (pending_.pending_removals() > 0 || pending_.clear_pending() ||
      pending_.pending_adds() >= opts_.flush_threshold)
    due_ = true;
  if (pending_.pending_adds() > 0) arm_window(out);
}

void protocol::arm_window(actions& out) {
  if (window_armed_) return;
  window_armed_ = true;
  auto a = make(action_kind::arm_flush);
  a.delay = opts_.window;
  a.gen = ++flush_gen_;
  out.push_back(std::move(a));
}

void protocol::send(emit_unit u, actions& out) {
  if (repair_) {  // DB18
    repair_->on_unit(u);
    c_.sweep_restores = repair_->stats().restored;
    c_.sweep_repair_overflows = repair_->stats().overflows;
  }
  in_flight_.push_back(u.id);
  ++c_.units_sent;
  c_.entries_sent += u.entries();
  auto a = make(action_kind::send_unit);
  a.unit = std::make_shared<const emit_unit>(std::move(u));
  out.push_back(std::move(a));
}

void protocol::pump(moment now, actions& out) {
  while (has_emitter_ && in_flight_.size() < opts_.max_units_in_flight) {  // DB3, DB4
    if (draining_ && opts_.shutdown_clear) {  // DB16: only the final clear
      if (final_ != final_clear::wanted) break;
      emit_unit u;
      u.id = final_unit_ = next_unit_++;
      u.clear = true;
      u.clear_ts_us = now.wall_us;
      final_ = final_clear::sent;
      send(std::move(u), out);
      break;
    }
    if (probe_unit_ != 0) break;  // DB7: nothing until the probe answers
    if (probe_wanted_) {
      emit_unit u;
      u.id = probe_unit_ = next_unit_++;
      u.clear = true;
      u.clear_ts_us = now.wall_us;
      probe_wanted_ = false;
      send(std::move(u), out);
      break;
    }
    if (!healthy_ || !due_ || pending_.empty()) break;
    auto u = pending_.take(next_unit_++);
    due_ = draining_ || pending_.pending_removals() > 0 ||
           pending_.pending_adds() >= opts_.flush_threshold;
    send(std::move(*u), out);
    if (pending_.pending_adds() > 0) arm_window(out);
  }
  if (pending_.released_memory()) out.push_back(make(action_kind::trim_heap));
}

void protocol::start_resync(const char* why, moment now, actions& out) {
  if (draining_ || resync_in_progress()) return;
  log(out, log::level::info, "resyncing the policy server: ALL_CLEARED, then every resident block",
      {{"reason", why}, {"merged_dp", opts_.merged}});
  last_resync_ms_ = now.steady_ms;
  probe_wanted_ = true;
  if (!opts_.l2_mode) {  // DB7: superseded by the re-report
    c_.superseded += pending_.size();
    pending_.reset();
  }
}

void protocol::arm_probe(moment, actions& out) {
  deferred_resync_ = false;
  auto a = make(action_kind::arm_resync);
  a.delay = backoff_.next();
  a.gen = ++resync_gen_;
  out.push_back(std::move(a));
}

void protocol::failed(bool was_probe, const std::string& err, moment now, actions& out) {
  tell_health(false, out);
  if (was_probe) probe_unit_ = 0;
  if (draining_) {  // no resync while shutting down; the answer says it
    drain_failed_ = true;
    if (!opts_.shutdown_clear) pending_.reset();
    return;
  }
  if (healthy_) {  // DB7
    healthy_ = false;
    unhealthy_since_ms_ = now.steady_ms;
    failed_since_log_ = 0;
    log(out, log::level::warn,
        "policy server unreachable; only the resync's ALL_CLEARED goes out until it answers",
        {{"err", err}, {"units_in_flight", in_flight_.size()}});
    if (!opts_.l2_mode) {
      c_.superseded += pending_.size();
      pending_.reset();
    }
    arm_probe(now, out);
    return;
  }
  ++failed_since_log_;
  if (!was_probe) return;
  ++c_.probes_failed;
  arm_probe(now, out);
  uint64_t suppressed = 0;
  if (outage_log_.allow(now.steady_ms, suppressed)) {
    log(out, log::level::warn, "policy server still unreachable",
        {{"err", err},
         {"outage_s", (now.steady_ms - unhealthy_since_ms_) / 1000},
         {"probes_failed", c_.probes_failed},
         {"units_failed", failed_since_log_},
         {"next_probe_ms", static_cast<int64_t>(out.back().delay.count())},
         {"suppressed", suppressed}});
    failed_since_log_ = 0;
  }
}

void protocol::probe_acked(moment now, actions& out) {
  probe_unit_ = 0;
  ++c_.resyncs;
  if (!healthy_)
    log(out, log::level::info, "policy server reachable again; re-reporting every resident block",
        {{"outage_s", (now.steady_ms - unhealthy_since_ms_) / 1000},
         {"probes_failed", c_.probes_failed},
         {"dropped_superseded", c_.superseded}});
  healthy_ = true;
  backoff_.reset();
  last_resync_ms_ = now.steady_ms;  // DB12: this resync counts
  const size_t before = pending_.size();
  pending_.drop_for_resync();  // DB9
  c_.superseded += before - pending_.size();
  if (holders_) holders_->clear();
  if (draining_) {  // keep mode: the server is empty now and will not be re-reported
    pending_.end_tracking();
    drain_failed_ = true;
    return;
  }
  // Merged mode needs no DB6 window: the holder set, forgotten above, already drops a rank's
  // eviction of a key it has not re-reported (and the barrier would race the ports' forwarding).
  request_reports(holders_ ? 0 : ++report_gen_, out);
}

void protocol::request_reports(uint64_t gen, actions& out) {
  reporting_.clear();
  for (const auto& [r, rs] : ranks_) {
    if (!rs.decoder) continue;
    auto a = make(action_kind::report);
    a.rank = r;
    a.gen = gen;
    out.push_back(std::move(a));
    if (gen != 0) reporting_.push_back(r);
  }
  if (reporting_.empty()) pending_.end_tracking();
}

void protocol::tell_health(bool ok, actions& out) {
  if (told_ok_ == ok) return;
  told_ok_ = ok;
  auto a = make(action_kind::health);
  a.ok = ok;
  out.push_back(std::move(a));
}

void protocol::check_drains(actions& out) {
  if (drains_waiting_ == 0) return;
  bool done = false, ok = false;
  if (!has_emitter_) {
    done = true;
  } else if (opts_.shutdown_clear) {  // DB16
    done = final_ == final_clear::acked || final_ == final_clear::failed;
    ok = final_ == final_clear::acked;
  } else {  // DB17
    done = drain_failed_ || (in_flight_.empty() && pending_.empty() && reporting_.empty() &&
                             probe_unit_ == 0);
    ok = !drain_failed_;
  }
  if (!done) return;
  drains_waiting_ = 0;
  auto a = make(action_kind::answer_drains);
  a.ok = ok;
  out.push_back(std::move(a));
  log(out, ok ? log::level::info : log::level::warn,
      ok ? "shutdown: everything sent was acknowledged"
         : "shutdown: not everything was acknowledged; the server may keep stale entries for "
           "this replica until its TTL expires",
      {{"final_clear", opts_.shutdown_clear}, {"units_failed", c_.units_failed}});
}

}  // namespace kvrelay::debounce
