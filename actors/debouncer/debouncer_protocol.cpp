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
    case action_kind::walk: return "walk";
    case action_kind::answer_drains: return "answer_drains";
    case action_kind::health: return "health";
    case action_kind::listen: return "listen";
    case action_kind::log: return "log";
    case action_kind::trim_heap: return "trim_heap";
    case action_kind::hold: return "hold";
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
    : opts_(o), pending_(pending_set::options{o.l2_mode, o.max_pending, o.max_adds_per_unit}) {
  if (opts_.flush_threshold == 0) opts_.flush_threshold = 1;
  if (opts_.walk_chunk == 0) opts_.walk_chunk = 1;
  // DB19: a replay flushes well before pending would shed its adds (DB11) and walk the index.
  opts_.history_max_pending =
      std::max<size_t>(1, std::min(opts_.history_max_pending, opts_.max_pending / 2));
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
  arm_refresh(out);
  if (opts_.start_with_clear) {  // DB14
    pending_.clear(now.wall_us);
    due_ = true;
  }
  settle(now, out);
}

void protocol::on_emitter(moment now, actions& out) {
  has_emitter_ = true;
  out.push_back(make(action_kind::listen));
  for (auto& [name, t] : targets_) t.on_emitter_replaced(now, out);  // TD7
  tell_health(out);
  settle(now, out);
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
    walks_.erase(it->first);  // WK6
    refreshed_ms_.erase(it->first);
    if (tracking_walk_ == it->first) stop_tracking();
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
    } else if (it->second.live()) {  // WK4: the start clear reaches it, then what was restored
      std::vector<uint32_t> restored;
      for (const auto& [r, rs] : ranks_)
        if (rs.restored) restored.push_back(r);
      if (!restored.empty()) start_walk(n, walk_kind::start, std::move(restored), now, out);
    }
  }
  tell_health(out);
  settle(now, out);
}

void protocol::on_decoder(uint32_t r, moment now, actions& out) {
  rank(r).decoder = true;
  for (auto& [name, w] : walks_) w.rank_restarted(r);  // IW3: ask the new one
  settle(now, out);
}

void protocol::on_rank_started(uint32_t r, moment now, actions& out) {
  if (ranks_.count(r) != 0 && holders_) clear_rank(r, now.wall_us, now, out);
  ranks_[r] = rank_state{};  // a new data path: its decoder starts at epoch 1 again
  for (auto& [name, w] : walks_) w.rank_restarted(r);
  settle(now, out);
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
    if (ops.walk != 0) {  // WK3: after the clear every block is a live add
      settle(now, out);
      return;
    }
  }
  if (ops.walk != 0) {
    on_chunk(r, ops, now, out);
  } else if (ops.restored) {  // WK4: after the start clear, to every live target
    rs.restored = true;
    for (const auto& [name, t] : targets_)  // (start_walk starts none while draining)
      if (t.live()) start_walk(name, walk_kind::start, {r}, now, out);
  } else if (holders_) {
    apply(filter_merged(r, ops), now, out);
  } else {
    apply(ops, now, out);
  }
  settle(now, out);
}

void protocol::on_clear(uint32_t r, uint64_t epoch, int64_t ts_us, moment now, actions& out) {
  if (final_ != final_clear::none) return;
  auto& rs = rank(r);
  if (epoch <= rs.epoch && epoch != 0) return;  // already cleared by a newer-epoch op
  rs.epoch = std::max(rs.epoch, epoch);
  clear_rank(r, ts_us, now, out);
  settle(now, out);
}

void protocol::on_result(const emit_result& r, moment now, actions& out) {
  auto it = targets_.find(r.target);
  if (it == targets_.end()) return;  // a target that left
  if (it->second.on_result(r, now, out) == target_delivery::outcome::probe_acked)
    probe_acked(r.target, now, out);
  tell_health(out);
  settle(now, out);
}

void protocol::on_flush_timer(uint64_t gen, moment now, actions& out) {
  if (gen != flush_gen_) return;
  window_armed_ = false;
  // DB19, unless a live op came since this window was armed (merged mode: another rank is live,
  // and its adds keep their window).
  if (history_since_ms_ && live_last_ms_ < window_armed_ms_) {
    if (now.steady_ms - history_last_ms_ < opts_.window.count()) {  // the replay goes on
      if (history_due(now)) due_ = true;
      arm_window(now, out);  // the window keeps looking, so the hold ends when the replay does
      settle(now, out);
      return;
    }
    history_since_ms_.reset();  // a window without a replayed op: the replay ended or stalled
  }
  // Held evictions as well as adds: they waited for this window (DB19).
  if (!pending_.empty()) due_ = true;
  settle(now, out);
}

void protocol::on_resync_timer(uint64_t gen, moment now, actions& out) {
  const uint32_t serial = target_delivery::gen_serial(gen);
  for (auto& [name, t] : targets_)
    if (t.serial() == serial) t.on_timer(gen, now, out);
  settle(now, out);
}

void protocol::on_refresh_timer(moment now, actions& out) {
  if (draining_ || opts_.refresh_interval.count() <= 0) return;
  for (const auto& [name, t] : targets_) {  // WK5
    if (!t.live() || walks_.count(name) != 0) continue;
    auto it = refreshed_ms_.find(name);
    if (it == refreshed_ms_.end()) {  // first seen live: what it holds is fresh, due an interval on
      refreshed_ms_.emplace(name, now.steady_ms);
      continue;
    }
    if (now.steady_ms - it->second < opts_.refresh_interval.count()) continue;
    start_walk(name, walk_kind::refresh, walk_ranks(), now, out);
  }
  settle(now, out);
  arm_refresh(out);
}

void protocol::on_reconnected(const std::string& target, moment now, actions& out) {
  auto it = targets_.find(target);
  if (it == targets_.end()) return;
  it->second.on_reconnected(now, out);
  settle(now, out);
}

void protocol::on_drain(moment now, actions& out) {
  ++drains_waiting_;
  if (holding_) {  // shutdown: whatever is left is reported by the drain or dropped
    holding_ = false;
    out.push_back(make(action_kind::hold));  // ok false: let go
  }
  if (!draining_) {
    draining_ = true;
    due_ = true;
    for (auto& [name, t] : targets_) t.drain();
    walks_.clear();  // WK6
    if (!tracking_walk_.empty()) stop_tracking();  // DB6 ends with the walk
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
  settle(now, out);
}

// ---- internals ---------------------------------------------------------------------------------

// The end of every input: take what is due, then answer the drains it completed. (One place, so
// no input can change what a drain waits for without the drain seeing it.)
void protocol::settle(moment now, actions& out) {
  pump(now, out);
  check_drains(out);
}

void protocol::stop_tracking() {
  pending_.end_tracking();
  tracking_walk_.clear();
}

void protocol::clear_rank(uint32_t r, int64_t ts_us, moment now, actions& out) {
  for (auto& [name, w] : walks_) w.rank_cleared(r);  // WK3
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

// DB15: an add when `r` is the key's only holder (its first, or a re-store of its own), an
// eviction when it was the last. (Walk chunks, the re-reports, never come here: on_chunk.)
shard_ops protocol::filter_merged(uint32_t r, const shard_ops& in) {
  shard_ops out;  // what apply() reads (the epoch was checked, a re-report decided, already)
  out.adapter = in.adapter;
  out.ts_us = in.ts_us;
  out.had_store = in.had_store;
  out.replayed = in.replayed;
  out.ops.reserve(in.ops.size());
  const uint64_t me = r < holder_set::max_ranks ? uint64_t{1} << r : 0;
  for (const auto& op : in.ops) {
    if (op.op == prefix_op::kind::upsert) {
      const bool first = holders_->add(in.adapter, op.fingerprint, r);
      if (first || holders_->holders(in.adapter, op.fingerprint) == me) {  // (first: no lookup)
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
  const uint64_t shed_before = pending_.drops().shed;
  const auto result = pending_.apply(ops);
  if (pending_.drops().shed != shed_before) {  // DB11: re-reported by a walk
    ++c_.sheds;
    uint64_t suppressed = 0;
    if (overflow_log_.allow(now.steady_ms, suppressed))
      log(out, log::level::warn,
          "pending updates over their bound; adds shed, every live target walks the index "
          "again (no clear)",
          {{"max_pending", opts_.max_pending}, {"suppressed", suppressed}});
    for (const auto& [name, t] : targets_)
      if (t.live()) start_walk(name, walk_kind::catchup, walk_ranks(), now, out);
  }
  if (result == pending_set::apply_result::full) {  // DB11: nothing more until the server took some
      if (!holding_ && any_live()) {
        holding_ = true;
        ++c_.holds;
        auto a = make(action_kind::hold);
        a.ok = true;
        out.push_back(std::move(a));
        log(out, log::level::warn,
            "pending evictions at their bound; reading from the engine pauses until the policy "
            "server takes them (a gap, repaired from the replay ring or declared)",
            {{"max_pending", opts_.max_pending}});
      }
  }
  if (ops.replayed && opts_.history_windows != 0) {  // DB19
    if (!history_since_ms_) history_since_ms_ = now.steady_ms;
    history_last_ms_ = now.steady_ms;
  } else {
    live_last_ms_ = now.steady_ms;
    history_since_ms_.reset();  // DB19: a live op ends the history (DB2 again, below)
  }
  if (history_since_ms_) {
    if (history_due(now)) due_ = true;  // a clear made itself due when it was queued (DB14)
    // Evictions wait too; armed even with nothing pending, so the window that sees no replayed
    // op ends the hold.
    arm_window(now, out);
    return;
  }
  if (pending_.pending_removals() > 0 || pending_.clear_pending() ||
      pending_.pending_adds() >= opts_.flush_threshold)
    due_ = true;
  if (pending_.pending_adds() > 0) arm_window(now, out);
}

bool protocol::history_due(moment now) const {
  return draining_ || pending_.size() >= opts_.history_max_pending ||
         now.steady_ms - *history_since_ms_ >=
             int64_t{opts_.history_windows} * opts_.window.count();
}

// WK1-WK3: one chunk of a walk, for its target alone.
void protocol::on_chunk(uint32_t, const shard_ops& ops, moment now, actions& out) {
  auto w = std::find_if(walks_.begin(), walks_.end(),
                        [&](const auto& kv) { return kv.second.expects(ops.walk); });
  if (w == walks_.end()) return;  // WK3, IW2: a request no walk awaits (any more)
  auto t = targets_.find(w->first);
  if (t == targets_.end() || !t->second.live()) return;  // pump drops the walk (WK6)
  if (!ops.ops.empty()) {
    // WK2: no clear waits in pending now. Chunks are asked only while none does (pump_walks), and
    // a clear of the rank a chunk was asked of moves the walk past it (IW3: its answer is not
    // awaited any more) or is newer than the chunk (dropped above, WK3).
    emit_unit u;
    u.id = next_unit_++;
    u.adds.reserve(ops.ops.size());
    for (const auto& op : ops.ops)
      if (op.op == prefix_op::kind::upsert)
        u.adds.push_back(prefix_add{op.fingerprint, op.token_count, op.t, ops.adapter});
    pending_.note_sent(ops.adapter, ops.ops);  // WK2, DB5, DB6
    c_.walk_blocks += u.adds.size();
    const std::set<std::string> only{w->first};
    offer(seal(std::move(u)), &only, now, out);
  }
  if (ops.walk_last)
    w->second.answered(ops.walk, ops.walk_partition, ops.walk_key, ops.walk_done, ops.ops.size(),
                       ops.resident);
  else
    w->second.partial(ops.walk, ops.ops.size());
}

void protocol::arm_window(moment now, actions& out) {
  if (window_armed_) return;
  window_armed_ = true;
  window_armed_ms_ = now.steady_ms;
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
        auto u = pending_.take(next_unit_++);  // every removal goes: only adds can be left
        if (history_since_ms_) {  // DB19: the wait starts over from this unit
          history_since_ms_ = now.steady_ms;
          due_ = draining_ || pending_.size() >= opts_.history_max_pending;
          arm_window(now, out);
        } else {
          due_ = draining_ || pending_.pending_adds() >= opts_.flush_threshold;
        }
        offer(seal(std::move(*u)), nullptr, now, out);
        if (pending_.pending_adds() > 0) arm_window(now, out);
      }
      pump_walks(now, out);
    }
  }
  release_hold(out);
  if (pending_.released_memory()) out.push_back(make(action_kind::trim_heap));
}

// DB11: the hold ends once pending fell to half its bound, or once no target is live (what
// pending holds is then superseded by the walk to come, DB8).
void protocol::release_hold(actions& out) {
  if (!holding_) return;
  if (!any_live()) {
    const size_t before = pending_.size();
    pending_.drop_for_resync();
    stop_tracking();
    c_.superseded += before - pending_.size();
  }
  if (any_live() && pending_.size() * 2 > opts_.max_pending) return;
  holding_ = false;
  out.push_back(make(action_kind::hold));  // ok false: let go
}

// WK1, WK6: each walk asks for its next chunk while its target wants more; a finished or
// orphaned walk goes.
void protocol::pump_walks(moment now, actions& out) {
  for (auto it = walks_.begin(); it != walks_.end();) {
    auto t = targets_.find(it->first);
    index_walk& w = it->second;
    if (t == targets_.end() || !t->second.live() || w.done()) {
      if (w.done()) {
        ++c_.walks_done;
        // Fresh as of the walk's start: the next refresh pass is due an interval after it (a
        // refresh pass noted its start when it began).
        if (w.kind() != walk_kind::refresh) {
          refreshed_ms_[it->first] = w.started_ms();
          log(out, log::level::info, "walk of the index done",
              {{"target", it->first}, {"kind", to_string(w.kind())},
               {"blocks", w.blocks_sent()}, {"ms", now.steady_ms - w.started_ms()}});
        }
      }
      if (tracking_walk_ == it->first) stop_tracking();  // DB6 ends with the walk that began it
      it = walks_.erase(it);
      continue;
    }
    if (!w.waiting() && t->second.wants_more() && !pending_.clear_pending()) {
      const auto r = w.rank();
      const uint32_t n = w.allowance(now.steady_ms, opts_.walk_chunk);
      if (r && n > 0 && rank(*r).decoder) {
        auto a = make(action_kind::walk);
        a.rank = *r;
        a.ask = w.ask(next_walk_id_++, n);
        out.push_back(std::move(a));
      }
    }
    ++it;
  }
}

std::vector<uint32_t> protocol::walk_ranks() const {
  std::vector<uint32_t> out;
  for (const auto& [r, rs] : ranks_) out.push_back(r);  // rank order (std::map)
  if (out.empty()) out.push_back(0);
  return out;
}

// WK4, WK5: which walk a target runs when another is asked for.
void protocol::start_walk(const std::string& target, walk_kind k, std::vector<uint32_t> ranks,
                          moment now, actions& out) {
  if (draining_ || ranks.empty()) return;
  auto it = walks_.find(target);
  if (it != walks_.end()) {
    const walk_kind has = it->second.kind();
    if (k == walk_kind::refresh) return;  // a walk of another kind reports everything anyway
    if (k == walk_kind::start && has != walk_kind::refresh) {
      if (has == walk_kind::start) {  // another rank restored too: everything, from the top
        it->second.restart(walk_kind::catchup, now.steady_ms);
        ++c_.walk_restarts;
      }
      return;  // a resync or catch-up covers the restored rank too
    }
    if (k == walk_kind::catchup && has != walk_kind::refresh) {
      it->second.restart(has == walk_kind::resync ? walk_kind::resync : walk_kind::catchup,
                         now.steady_ms);  // WK4: a shed add may lie behind the cursor
      ++c_.walk_restarts;
      return;
    }
    walks_.erase(it);
  }
  ++c_.walks_started;
  switch (k) {
    case walk_kind::start: ++c_.walks_start; break;
    case walk_kind::resync: ++c_.walks_resync; break;
    case walk_kind::catchup: ++c_.walks_catchup; break;
    case walk_kind::refresh: ++c_.walks_refresh; break;
  }
  // (IW5 paces refresh passes only: the interval is nothing to the other kinds.)
  walks_.emplace(target,
                 index_walk(k, std::move(ranks), now.steady_ms, opts_.refresh_interval.count()));
  if (k == walk_kind::refresh) refreshed_ms_[target] = now.steady_ms;
  if (k != walk_kind::refresh)
    log(out, log::level::info, "walking the index to a policy server target",
        {{"target", target}, {"kind", to_string(k)}});
}

// WK5: while a refresh pass runs, ticks often enough for a pass of few, large messages (the
// first one soon: the pass does not know yet how much there is); otherwise at most a minute
// apart, to start the next pass.
void protocol::arm_refresh(actions& out) {
  const int64_t interval = opts_.refresh_interval.count();
  if (interval <= 0) return;
  const int64_t lo = std::min<int64_t>(1000, interval);
  const int64_t hi = std::min<int64_t>(60'000, interval);
  int64_t tick = hi;
  for (const auto& [name, w] : walks_) {
    if (w.kind() != walk_kind::refresh) continue;
    // Still learning what a rank holds (IW5): soon. (A rank that said 0 and is not done yet is
    // at a partition's end: nothing to pace.)
    const auto resident = static_cast<long double>(std::max<uint64_t>(w.resident(), 1));
    const int64_t t =
        w.learning() ? lo
                     : static_cast<int64_t>(static_cast<long double>(interval) *
                                            opts_.walk_chunk / resident);
    tick = std::min(tick, t);
  }
  auto a = make(action_kind::arm_refresh);
  a.delay = ms(std::clamp(tick, lo, hi));
  out.push_back(std::move(a));
}

void protocol::probe_acked(const std::string& target, moment now, actions& out) {
  // Keep mode: the server is empty now and will not be re-reported (DB6's tracking ended with the
  // walks when the drain began, and none starts after).
  if (draining_) return;
  const bool others_live = std::any_of(targets_.begin(), targets_.end(), [&](const auto& kv) {
    return kv.first != target && kv.second.live();
  });
  if (!others_live) {  // DB9: no one else to keep pending for.
    const size_t before = pending_.size();
    pending_.drop_for_resync();
    c_.superseded += before - pending_.size();
    if (repair_) repair_->on_cleared();  // SR1: what the walk brings rebuilds the mirror
    // Merged mode needs no DB6 window: the holder set already drops a rank's eviction of a key
    // it no longer holds.
    if (holders_)
      pending_.end_tracking();
    else
      tracking_walk_ = target;
  }
  start_walk(target, walk_kind::resync, walk_ranks(), now, out);
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
  } else {  // DB17 (the walks ended when the drain began: WK6)
    // Nothing pending can go anywhere: then each target failed (it was unhealthy, or a unit of the
    // drain failed) or has a probe out, which fails it or finds it empty and fails it too.
    const bool stuck = !any_live();
    done = stuck || pending_.empty();
    for (const auto& [name, t] : targets_) {
      done = done && (t.drain_failed() || (t.idle() && !t.resync_in_progress()));
      ok = ok && !t.drain_failed();
    }
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
