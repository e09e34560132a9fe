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

const char* to_string(readiness_policy p) noexcept {
  switch (p) {
    case readiness_policy::any: return "any";
    case readiness_policy::all: return "all";
    case readiness_policy::quorum: return "quorum";
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
      lane_pending_(pending_set::options{false, o.max_pending, o.max_adds_per_unit}) {
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

counters protocol::stats() const {
  counters c = c_;
  auto add = [&](const target_counters& t) {
    c.units_failed += t.units_failed;
    c.resyncs += t.resyncs;
    c.probes_failed += t.probes_failed;
    c.reconnects += t.reconnects;
    c.superseded += t.entries_superseded;
  };
  add(departed_);
  for (const auto& [name, t] : targets_) add(t.stats());
  return c;
}

size_t protocol::units_in_flight() const {
  size_t n = 0;
  for (const auto& [name, t] : targets_) n += t.in_flight();
  return n;
}

bool protocol::healthy() const {
  if (targets_.empty()) return true;
  return std::any_of(targets_.begin(), targets_.end(),
                     [](const auto& kv) { return kv.second.healthy(); });
}

bool protocol::resync_in_progress() const {
  return std::any_of(targets_.begin(), targets_.end(),
                     [](const auto& kv) { return kv.second.resync_in_progress(); });
}

bool protocol::any_live() const {
  return std::any_of(targets_.begin(), targets_.end(),
                     [](const auto& kv) { return kv.second.live(); });
}

target_options protocol::target_opts() const {
  target_options t = opts_.target;
  t.seed = opts_.seed != 0 ? opts_.seed + next_serial_ : 0;
  return t;
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
  for (auto& [name, t] : targets_) t.on_emitter_replaced(now, out);  // TD7
  tell_health(out);
  pump(now, out);
  check_drains(out);
}

void protocol::on_targets(const std::vector<std::string>& names, moment now, actions& out) {
  const std::set<std::string> want(names.begin(), names.end());
  for (auto it = targets_.begin(); it != targets_.end();) {
    if (want.count(it->first) != 0) {
      ++it;
      continue;
    }
    const auto& c = it->second.stats();  // DB7: gone; its counts stay in the totals
    departed_.units_failed += c.units_failed;
    departed_.resyncs += c.resyncs;
    departed_.probes_failed += c.probes_failed;
    departed_.reconnects += c.reconnects;
    departed_.entries_superseded += c.entries_superseded;
    log(out, log::level::info, "policy server target removed", {{"target", it->first}});
    audience_.erase(it->first);
    lane_wanted_.erase(it->first);
    it = targets_.erase(it);
  }
  for (const auto& n : want) {
    if (targets_.count(n) != 0) continue;
    log(out, log::level::info, "policy server target added",
        {{"target", n}, {"resync", sent_any_}});
    // DB7: one that joins after something was sent may hold stale hints, and lacks the index.
    auto [it, fresh] = targets_.emplace(
        std::piecewise_construct, std::forward_as_tuple(n),
        std::forward_as_tuple(n, ++next_serial_, target_opts(), !sent_any_, now, out));
    if (draining_) {
      it->second.drain();
      if (final_ == final_clear::sent) it->second.offer_final(final_unit_, out);
    }
  }
  tell_health(out);
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
  if (ops.resync && !audience_.empty())
    apply_lane(ops, now, out);
  else if (holders_)
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
  auto it = targets_.find(r.target);
  if (it == targets_.end()) return;  // a target that left
  if (it->second.on_result(r, now, out) == target_delivery::outcome::probe_acked)
    probe_acked(r.target, now, out);
  tell_health(out);
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
  const uint32_t serial = target_delivery::gen_serial(gen);
  for (auto& [name, t] : targets_)
    if (t.serial() == serial) t.on_timer(gen, now, out);
  pump(now, out);
  check_drains(out);
}

void protocol::on_refresh_timer(moment, actions& out) {
  if (opts_.refresh_interval.count() > 0) {
    auto a = make(action_kind::arm_refresh);
    a.delay = opts_.refresh_interval;
    out.push_back(std::move(a));
  }
  if (!any_live() || draining_ || !reporting_.empty()) return;  // DB13
  // With a barrier outside merged mode, so that no lane starts before this re-report has arrived
  // (its chunks would go to the lane's targets only).
  request_reports(holders_ ? 0 : ++report_gen_, out);
}

void protocol::on_reported(uint32_t r, uint64_t gen, moment now, actions& out) {
  if (gen == 0 || gen != report_gen_) return;
  reporting_.erase(std::remove(reporting_.begin(), reporting_.end(), r), reporting_.end());
  if (reporting_.empty()) {
    pending_.end_tracking();  // DB6 ends: every re-report has arrived
    audience_.clear();        // DB10: the lane ends
    start_lane(out);
  }
  pump(now, out);
  check_drains(out);
}

void protocol::on_reconnected(const std::string& target, moment now, actions& out) {
  auto it = targets_.find(target);
  if (it == targets_.end()) return;
  it->second.on_reconnected(now, out);
  pump(now, out);
  check_drains(out);
}

void protocol::on_drain(moment now, actions& out) {
  ++drains_waiting_;
  if (!draining_) {
    draining_ = true;
    due_ = true;
    for (auto& [name, t] : targets_) t.drain();
    lane_wanted_.clear();
    if (opts_.shutdown_clear) {  // DB16
      c_.superseded += pending_.size();
      pending_.reset();
      final_ = final_clear::wanted;
    } else if (!any_live()) {  // DB17: nothing can be delivered
      c_.superseded += pending_.size();
      pending_.reset();
      log(out, log::level::warn,
          "shutting down while no policy server target is reachable; each keeps what it last "
          "had for this replica until its TTL expires");
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

// DB15: an add when `r` is the key's first (or only) holder or the ops are a re-report, an
// eviction when it was the last.
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
      if (first || in.resync || holders_->holders(in.adapter, op.fingerprint) == me) {
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
  if (superseded() && !opts_.l2_mode) {  // DB8: the re-report will bring the truth
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
    resync_all("pending overflow", now, out);
    return;
  }
  if (pending_.pending_removals() > 0 || pending_.clear_pending() ||
      pending_.pending_adds() >= opts_.flush_threshold)
    due_ = true;
  if (pending_.pending_adds() > 0) arm_window(out);
}

// DB10: everything pending before the chunk goes to everyone first, then the chunk to the lane.
void protocol::apply_lane(const shard_ops& ops, moment now, actions& out) {
  while (auto u = pending_.take(next_unit_++)) offer(seal(std::move(*u)), nullptr, now, out);
  due_ = false;
  if (!lane_pending_.apply(ops)) {  // bounded like pending: the lane's targets resync again
    lane_pending_.reset();
    lane_pending_.reset_overflow();
    for (const auto& n : audience_) {
      auto it = targets_.find(n);
      if (it != targets_.end()) it->second.start_resync("re-report over its bound", now, out);
    }
    return;
  }
  while (auto u = lane_pending_.take(next_unit_++)) offer(seal(std::move(*u)), &audience_, now, out);
}

void protocol::arm_window(actions& out) {
  if (window_armed_) return;
  window_armed_ = true;
  auto a = make(action_kind::arm_flush);
  a.delay = opts_.window;
  a.gen = ++flush_gen_;
  out.push_back(std::move(a));
}

emit_unit_ptr protocol::seal(emit_unit u) {
  if (repair_) {  // DB18
    repair_->on_unit(u);
    c_.sweep_restores = repair_->stats().restored;
    c_.sweep_repair_overflows = repair_->stats().overflows;
  }
  ++c_.units_sent;
  c_.entries_sent += u.entries();
  sent_any_ = true;
  return std::make_shared<const emit_unit>(std::move(u));
}

// DB8: one unit, encoded once, to every target (or the lane's).
void protocol::offer(const emit_unit_ptr& u, const std::set<std::string>* only, moment now,
                     actions& out) {
  const size_t bytes = unit_bytes(*u);
  for (auto& [name, t] : targets_)
    if (!only || only->count(name) != 0) t.offer(u, bytes, now, out);
}

static bool wants_more(const std::map<std::string, target_delivery>& targets) {
  return std::any_of(targets.begin(), targets.end(),
                     [](const auto& kv) { return kv.second.wants_more(); });
}

void protocol::pump(moment now, actions& out) {
  if (has_emitter_ && !targets_.empty()) {  // DB7: no target, nothing taken
    if (draining_ && opts_.shutdown_clear) {  // DB16: only the final clear
      if (final_ == final_clear::wanted) {
        emit_unit u;
        u.id = next_unit_++;
        u.clear = true;
        u.clear_ts_us = now.wall_us;
        final_unit_ = std::make_shared<const emit_unit>(std::move(u));
        final_ = final_clear::sent;
        for (auto& [name, t] : targets_) t.offer_final(final_unit_, out);
      }
    } else {
      while (due_ && !pending_.empty() && wants_more(targets_)) {  // DB3, DB8
        auto u = pending_.take(next_unit_++);
        due_ = draining_ || pending_.pending_removals() > 0 ||
               pending_.pending_adds() >= opts_.flush_threshold;
        offer(seal(std::move(*u)), nullptr, now, out);
        if (pending_.pending_adds() > 0) arm_window(out);
      }
    }
  }
  const bool released = pending_.released_memory();  // both asked: each answers true once
  if (lane_pending_.released_memory() || released) out.push_back(make(action_kind::trim_heap));
}

void protocol::resync_all(const char* why, moment now, actions& out) {
  if (draining_) return;
  log(out, log::level::info, "resyncing every policy server target: ALL_CLEARED, then every "
      "resident block", {{"reason", why}, {"merged_dp", opts_.merged}});
  if (!opts_.l2_mode) {  // superseded by the re-report
    c_.superseded += pending_.size();
    pending_.reset();
  }
  for (auto& [name, t] : targets_) t.start_resync(why, now, out);
}

void protocol::probe_acked(const std::string& target, moment, actions& out) {
  if (draining_) {  // keep mode: the server is empty now and will not be re-reported
    pending_.end_tracking();
    return;
  }
  const bool others_live = std::any_of(targets_.begin(), targets_.end(), [&](const auto& kv) {
    return kv.first != target && kv.second.live();
  });
  if (others_live) {
    if (holders_) {  // DB10: no lane in merged mode; everyone gets this re-report
      if (reporting_.empty()) request_reports(0, out);
      return;
    }
    lane_wanted_.insert(target);
    if (reporting_.empty()) start_lane(out);
    return;
  }
  // DB9: no one else to keep pending for.
  const size_t before = pending_.size();
  pending_.drop_for_resync();
  c_.superseded += before - pending_.size();
  if (holders_) holders_->clear();
  if (repair_) repair_->on_cleared();  // SR1: what the re-report brings rebuilds the mirror
  audience_.clear();
  lane_wanted_.clear();
  // Merged mode needs no DB6 window: the holder set, forgotten above, already drops a rank's
  // eviction of a key it has not re-reported (and the barrier would race the ports' forwarding).
  request_reports(holders_ ? 0 : ++report_gen_, out);
}

void protocol::start_lane(actions& out) {
  if (lane_wanted_.empty() || !reporting_.empty() || draining_) return;
  audience_ = std::exchange(lane_wanted_, {});
  request_reports(++report_gen_, out);
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
  if (reporting_.empty()) {
    pending_.end_tracking();
    audience_.clear();
  }
}

void protocol::tell_health(actions& out) {
  size_t up = 0, answered = 0;
  for (const auto& [name, t] : targets_) {
    up += t.up() ? 1 : 0;
    answered += t.answered() ? 1 : 0;
  }
  if (answered == 0) return;  // DB12: nothing known yet
  const size_t n = targets_.size();
  bool ok = false;
  switch (opts_.readiness) {
    case readiness_policy::any: ok = up >= 1; break;
    case readiness_policy::all: ok = up == n; break;
    case readiness_policy::quorum: ok = 2 * up > n; break;
  }
  // Not ready only for a reason: a target failed, or every one has answered.
  if (!ok && answered < n && answered == up) return;
  if (told_ok_ == ok) return;
  told_ok_ = ok;
  auto a = make(action_kind::health);
  a.ok = ok;
  out.push_back(std::move(a));
}

void protocol::check_drains(actions& out) {
  if (drains_waiting_ == 0) return;
  bool done = true, ok = has_emitter_ && !targets_.empty();
  if (!ok) {
    // nothing to deliver to
  } else if (opts_.shutdown_clear) {  // DB16
    for (const auto& [name, t] : targets_) {
      done = done && t.final_answered();
      ok = ok && t.final_acked();
    }
  } else {  // DB17
    const bool stuck = !any_live();  // nothing pending can go anywhere
    done = stuck || (pending_.empty() && reporting_.empty());
    for (const auto& [name, t] : targets_) {
      done = done && (t.drain_failed() || (t.idle() && !t.resync_in_progress()));
      ok = ok && !t.drain_failed();
    }
    ok = ok && !stuck;
  }
  if (!done) return;
  drains_waiting_ = 0;
  auto a = make(action_kind::answer_drains);
  a.ok = ok;
  out.push_back(std::move(a));
  log(out, ok ? log::level::info : log::level::warn,
      ok ? "shutdown: everything sent was acknowledged"
         : "shutdown: not everything was acknowledged; a server may keep stale entries for "
           "this replica until its TTL expires",
      {{"final_clear", opts_.shutdown_clear}, {"units_failed", stats().units_failed}});
}

}  // namespace kvrelay::debounce
