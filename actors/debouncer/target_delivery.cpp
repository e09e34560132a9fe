// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/debouncer/target_delivery.hpp"

#include <algorithm>
#include <random>
#include <utility>

namespace kvrelay::debounce {

namespace {

constexpr uint64_t probe_id_bit = uint64_t{1} << 63;

action make(action_kind k) {
  action a;
  a.kind = k;
  return a;
}

}  // namespace

size_t unit_bytes(const emit_unit& u) noexcept {
  size_t n = sizeof(emit_unit) + (u.adds.size() + u.restores.size()) * sizeof(prefix_add) +
             u.evicts.size() * sizeof(prefix_evict);
  for (const auto& g : u.downgrades) n += sizeof(g) + g.entries.size() * sizeof(prefix_add);
  return n;
}

target_delivery::target_delivery(std::string name, uint32_t serial, target_options o, bool live,
                                 moment now, actions& out)
    : name_(std::move(name)),
      serial_(serial),
      opts_(o),
      backoff_(o.backoff_initial, o.backoff_max, o.seed != 0 ? o.seed : std::random_device{}()) {
  if (opts_.credits == 0) opts_.credits = 1;
  if (!live) start_resync("target joined", now, out);  // TD5
}

void target_delivery::log(actions& out, log::level l, std::string text,
                          std::vector<log::field> f) {
  f.insert(f.begin(), log::field{"target", name_});
  auto a = make(action_kind::log);
  a.line = log::record{l, std::move(text), std::move(f)};
  out.push_back(std::move(a));
}

// ---- inputs ------------------------------------------------------------------------------------

void target_delivery::offer(const emit_unit_ptr& u, size_t bytes, moment now, actions& out) {
  if (!live()) {  // TD1: the re-report after the probe brings the truth
    ++c_.units_superseded;
    c_.entries_superseded += u->entries();
    return;
  }
  queue_.push_back(queued{u, bytes});
  queued_bytes_ += bytes;
  pump(now, out);
  if (queued_bytes_ > opts_.max_lag_bytes) {  // TD2
    ++c_.lag_overflows;
    log(out, log::level::warn,
        "policy server target fell too far behind; dropping what waits for it and re-reporting "
        "in full once it keeps up",
        {{"queued_bytes", queued_bytes_},
         {"max_lag_bytes", opts_.max_lag_bytes},
         {"in_flight", in_flight_.size()}});
    drop_queue();
    start_resync("fell behind", now, out);
  }
}

void target_delivery::offer_final(const emit_unit_ptr& u, actions& out) {
  drop_queue();
  probe_wanted_ = false;
  final_unit_ = u;
  final_ = final_state::queued;  // TD8: sent whatever the health, within the credits
  pump(moment{}, out);
}

target_delivery::outcome target_delivery::on_result(const emit_result& r, moment now,
                                                    actions& out) {
  auto it = std::find(in_flight_.begin(), in_flight_.end(), r.id);
  if (it == in_flight_.end()) return outcome::none;  // from before an emitter restart
  in_flight_.erase(it);
  answered_ = true;
  if (final_unit_ && r.id == final_unit_->id) {
    up_ = r.ok;
    final_ = r.ok ? final_state::acked : final_state::failed;
    if (!r.ok) {
      last_error_ = r.last_error;
      ++c_.units_failed;
    }
    return outcome::final_answered;
  }
  if (!r.ok) {
    ++c_.units_failed;
    failed(r.id == probe_unit_, r.last_error, now, out);
    pump(now, out);
    return outcome::failed;
  }
  up_ = true;
  if (r.id != probe_unit_) {
    pump(now, out);
    return outcome::ok;
  }
  probe_unit_ = 0;  // TD5
  ++c_.resyncs;
  if (!healthy_)
    log(out, log::level::info, "policy server target reachable again; re-reporting every block",
        {{"outage_s", (now.steady_ms - unhealthy_since_ms_) / 1000},
         {"probes_failed", c_.probes_failed}});
  healthy_ = true;
  backoff_.reset();
  last_resync_ms_ = now.steady_ms;  // TD6: this resync counts
  if (draining_) drain_failed_ = true;  // keep mode: it is empty now and will not be re-reported
  pump(now, out);
  return outcome::probe_acked;
}

void target_delivery::on_timer(uint64_t gen, moment now, actions& out) {
  if (gen_serial(gen) != serial_ || (gen & 0xffffffffu) != timer_gen_ || draining_) return;
  if (deferred_resync_) {
    deferred_resync_ = false;
    if (healthy_) start_resync("transport reconnected (deferred)", now, out);
  } else if (!healthy_ && probe_unit_ == 0) {
    probe_wanted_ = true;  // TD4
  }
  pump(now, out);
}

void target_delivery::on_reconnected(moment now, actions& out) {
  ++c_.reconnects;
  if (draining_) return;
  if (!healthy_) {
    // TD4: the transport is back; probe now instead of waiting for the backoff.
    // (The backoff timer may still fire: it finds this probe wanted or out, and adds nothing.)
    if (probe_unit_ == 0 && !probe_wanted_) probe_wanted_ = true;
  } else if (resync_in_progress() ||
             (last_resync_ms_ &&
              now.steady_ms - *last_resync_ms_ < opts_.reconnect_resync_interval.count())) {
    if (!deferred_resync_) {  // TD6
      deferred_resync_ = true;
      const int64_t since = last_resync_ms_ ? now.steady_ms - *last_resync_ms_ : 0;
      arm(ms(std::max<int64_t>(opts_.reconnect_resync_interval.count() - since, 1)), out);
    }
  } else {
    start_resync("transport reconnected", now, out);
  }
  pump(now, out);
}

void target_delivery::on_emitter_replaced(moment now, actions& out) {
  if (in_flight_.empty()) return;
  in_flight_.clear();
  if (final_ == final_state::sent) final_ = final_state::queued;  // to the new emitter
  ++c_.units_failed;
  failed(probe_unit_ != 0, "emitter restarted with units in flight", now, out);  // TD7
  pump(now, out);
}

void target_delivery::start_resync(const char* why, moment now, actions& out) {
  if (draining_ || resync_in_progress()) return;
  log(out, log::level::info,
      "resyncing a policy server target: ALL_CLEARED, then every resident block",
      {{"reason", why}});
  last_resync_ms_ = now.steady_ms;
  probe_wanted_ = true;
  drop_queue();  // superseded by the re-report
  pump(now, out);
}

void target_delivery::drain() {
  if (draining_) return;
  draining_ = true;
  // No more probes: the shutdown decides what the server keeps (timers and reconnects that
  // come now see draining_).
  probe_wanted_ = false;
  if (!healthy_) drain_failed_ = true;  // nothing can be delivered to it (nothing waits: TD3)
}

// ---- internals ---------------------------------------------------------------------------------

void target_delivery::pump(moment now, actions& out) {
  while (in_flight_.size() < opts_.credits) {
    if (final_ != final_state::none) {  // TD8: only the final clear
      if (final_ == final_state::queued) {
        final_ = final_state::sent;
        send(final_unit_, out);
      }
      break;
    }
    if (probe_unit_ != 0) break;  // TD3: nothing until the probe answers
    if (probe_wanted_) {
      auto u = std::make_shared<emit_unit>();
      u->id = probe_unit_ = probe_id_bit | ++next_probe_id_;
      u->clear = true;
      u->clear_ts_us = now.wall_us;
      probe_wanted_ = false;
      send(std::move(u), out);
      break;
    }
    if (!healthy_ || queue_.empty()) break;
    auto q = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= q.bytes;
    send(std::move(q.unit), out);
  }
}

void target_delivery::send(emit_unit_ptr u, actions& out) {
  in_flight_.push_back(u->id);
  ++c_.units_sent;
  auto a = make(action_kind::send_unit);
  a.target = name_;
  a.unit = std::move(u);
  out.push_back(std::move(a));
}

void target_delivery::drop_queue() {
  for (const auto& q : queue_) {
    ++c_.units_superseded;
    c_.entries_superseded += q.unit->entries();
  }
  queue_.clear();
  queued_bytes_ = 0;
}

void target_delivery::failed(bool was_probe, const std::string& err, moment now, actions& out) {
  up_ = false;
  last_error_ = err;
  if (was_probe) probe_unit_ = 0;
  if (draining_) {  // no resync while shutting down; the drain's answer says it
    drain_failed_ = true;
    drop_queue();
    return;
  }
  if (healthy_) {  // TD3
    healthy_ = false;
    unhealthy_since_ms_ = now.steady_ms;
    failed_since_log_ = 0;
    log(out, log::level::warn,
        "policy server target unreachable; only the resync's ALL_CLEARED goes to it until it "
        "answers",
        {{"err", err}, {"units_in_flight", in_flight_.size()}});
    drop_queue();
    arm_probe(out);
    return;
  }
  ++failed_since_log_;
  if (!was_probe) return;
  ++c_.probes_failed;
  arm_probe(out);
  uint64_t suppressed = 0;
  if (outage_log_.allow(now.steady_ms, suppressed)) {
    const auto next = out.back().delay.count();
    log(out, log::level::warn, "policy server target still unreachable",
        {{"err", err},
         {"outage_s", (now.steady_ms - unhealthy_since_ms_) / 1000},
         {"probes_failed", c_.probes_failed},
         {"units_failed", failed_since_log_},
         {"next_probe_ms", static_cast<int64_t>(next)},
         {"suppressed", suppressed}});
    failed_since_log_ = 0;
  }
}

void target_delivery::arm_probe(actions& out) {
  deferred_resync_ = false;
  arm(backoff_.next(), out);
}

void target_delivery::arm(ms delay, actions& out) {
  auto a = make(action_kind::arm_resync);
  a.delay = delay;
  a.gen = (uint64_t{serial_} << 32) | ++timer_gen_;
  out.push_back(std::move(a));
}

}  // namespace kvrelay::debounce
