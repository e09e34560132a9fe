// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/emitter/unit_sequencer.hpp"

#include <algorithm>
#include <utility>

namespace kvrelay::emitter {

namespace {

const char* code_name(int code) {
  static const char* names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? names[code] : "UNKNOWN";
}

bool has_stream(const emit_unit& u, eviction_mode m) {
  return !u.adds.empty() || !u.downgrades.empty() ||
         (m == eviction_mode::expire && !u.evicts.empty());
}

}  // namespace

const char* to_string(eviction_mode m) noexcept {
  return m == eviction_mode::rpc ? "rpc" : "expire";
}

const char* to_string(channel_state s) noexcept {
  switch (s) {
    case channel_state::idle:
      return "IDLE";
    case channel_state::connecting:
      return "CONNECTING";
    case channel_state::ready:
      return "READY";
    case channel_state::transient_failure:
      return "TRANSIENT_FAILURE";
    case channel_state::shutdown:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

const char* method_of(call_kind k) noexcept {  // restore: ReportCacheState
  return k == call_kind::clear || k == call_kind::evict ? "PublishEvent" : "ReportCacheState";
}

const char* status_code_name(int code) noexcept { return code_name(code); }

unit_sequencer::unit_sequencer(sequencer_options opts) : opts_(opts) {
  if (opts_.max_evictions_in_flight == 0) opts_.max_evictions_in_flight = 1;
  if (opts_.deadline_ms <= 0) opts_.deadline_ms = 1;
  if (opts_.max_deadline_scale == 0) opts_.max_deadline_scale = 1;
  for (auto& l : log_limits_) l = rate_limiter(1, opts_.log_period_ms);
}

void unit_sequencer::on_unit(uint64_t ticket, emit_unit_ptr unit, emit_actions& out) {
  if (!unit) {  // nothing to send, but U4 still holds
    emit_action a;
    a.what = emit_action::kind::answer_unit;
    a.ticket = ticket;
    a.result.ok = false;
    a.result.sent = false;
    a.result.last_error = "null unit";
    out.push_back(std::move(a));
    return;
  }
  queue_.push_back({ticket, std::move(unit)});
  if (queue_.size() == 1) pump(out);
}

void unit_sequencer::on_stats(uint64_t ticket, emit_actions& out) {
  const uint64_t call = next_call_++;
  calls_.emplace(call, call_rec{call_kind::stats, ticket, scale_});
  emit_action a;
  a.what = emit_action::kind::start_stats;
  a.call = call;
  a.ticket = ticket;
  out.push_back(std::move(a));
}

void unit_sequencer::start_call(call_kind k, size_t index, emit_actions& out) {
  const uint64_t call = next_call_++;
  calls_.emplace(call, call_rec{k, 0, scale_});
  ++unit_calls_;
  if (k == call_kind::evict) ++evicts_in_flight_;
  out.emplace_back();
  emit_action& a = out.back();
  a.call = call;
  a.unit = queue_.front().unit;
  a.index = index;
  switch (k) {
    case call_kind::clear:
      a.what = emit_action::kind::start_clear;
      break;
    case call_kind::stream:
      a.what = emit_action::kind::start_stream;
      a.with_expirations = opts_.mode == eviction_mode::expire;
      break;
    case call_kind::restore: {  // UQ12: the restores travel as the adds of a unit of their own
      a.what = emit_action::kind::start_stream;
      auto r = std::make_shared<emit_unit>();
      r->id = a.unit->id;
      r->adds = a.unit->restores;
      r->adds_ts_us = a.unit->restores_ts_us;
      a.unit = std::move(r);
      break;
    }
    default:
      a.what = emit_action::kind::start_evict;
      break;
  }
}

void unit_sequencer::issue_evictions(emit_actions& out) {
  const emit_unit& u = *queue_.front().unit;
  while (!stopped_ && next_evict_ < u.evicts.size() &&
         evicts_in_flight_ < opts_.max_evictions_in_flight)
    start_call(call_kind::evict, next_evict_++, out);
}

void unit_sequencer::fail_unsent(emit_actions& out) {
  auto q = std::move(queue_.front());
  queue_.pop_front();
  ++c_.units_unsent;
  emit_action a;
  a.what = emit_action::kind::answer_unit;
  a.ticket = q.ticket;
  a.result.id = q.unit->id;
  a.result.ok = false;
  a.result.sent = false;
  a.result.last_error = "not sent: an earlier unit failed; waiting for the resync's clear";
  out.push_back(std::move(a));
}

void unit_sequencer::finish_head(emit_actions& out) {
  auto q = std::move(queue_.front());
  queue_.pop_front();
  emit_action a;
  a.what = emit_action::kind::answer_unit;
  a.ticket = q.ticket;
  a.result.id = q.unit->id;
  a.result.ok = failed_ == 0;
  a.result.failed_rpcs = failed_;
  a.result.sent = true;
  a.result.last_error = std::move(unit_error_);
  if (a.result.ok) {
    ++c_.units_ok;
  } else {
    ++c_.units_failed;
    poisoned_ = true;  // UQ6
  }
  out.push_back(std::move(a));
  phase_ = phase::idle;
  unit_calls_ = 0;
  evicts_in_flight_ = 0;
  next_evict_ = 0;
  stopped_ = false;
  failed_ = 0;
  unit_error_.clear();
}

// Advances the head unit as far as the rules allow; answers every unit it can finish.
void unit_sequencer::pump(emit_actions& out) {
  while (!queue_.empty()) {
    const emit_unit& u = *queue_.front().unit;
    if (phase_ == phase::idle) {
      if (poisoned_ && !u.clear) {  // UQ6
        fail_unsent(out);
        continue;
      }
      if (u.clear) {
        poisoned_ = false;  // the resync: it runs normally (a failure sets UQ6 again)
        phase_ = phase::clearing;
        start_call(call_kind::clear, 0, out);
        return;  // UQ2: nothing after a clear before the server has it
      }
      phase_ = phase::clearing;  // no clear: as if it had completed
    }
    if (phase_ == phase::clearing) {
      if (unit_calls_ > 0) return;
      if (stopped_) {  // UQ2: a failed clear abandons the unit
        finish_head(out);
        continue;
      }
      // UQ3, UQ4: the stream, and in rpc mode the evictions issued right behind it.
      phase_ = phase::evicting;
      if (has_stream(u, opts_.mode)) start_call(call_kind::stream, 0, out);
    }
    // phase::evicting (in expire mode the stream carries the evictions).
    if (phase_ == phase::evicting && opts_.mode == eviction_mode::rpc) issue_evictions(out);
    const bool more = opts_.mode == eviction_mode::rpc && !stopped_ && next_evict_ < u.evicts.size();
    if (unit_calls_ > 0 || more) return;
    if (phase_ == phase::evicting && opts_.mode == eviction_mode::rpc && !stopped_ &&
        !u.restores.empty()) {  // UQ12
      phase_ = phase::restoring;
      start_call(call_kind::restore, 0, out);
      return;
    }
    finish_head(out);
  }
}

void unit_sequencer::log_failure(call_kind k, int code, const std::string& message,
                                 int64_t now_ms, emit_actions& out) {
  // One limiter per text. The first line of a burst keeps the reference's texts so existing
  // alerts keep matching (R14); later lines of the same burst say how many were held back.
  enum : int { report, publish, stats };
  const int what = k == call_kind::stats                                 ? stats
                   : k == call_kind::stream || k == call_kind::restore ? report
                                                                         : publish;
  static constexpr const char* texts[] = {"report send failed; dropping batch",
                                          "publish event failed; dropping", "stats report failed"};
  uint64_t suppressed = 0;
  if (!log_limits_[what].allow(now_ms, suppressed)) return;
  emit_action a;
  a.what = emit_action::kind::log;
  a.log = log::record{log::level::warn,
                      texts[what],
                      {{"code", status_code_name(code)}, {"err", message}, {"suppressed", suppressed}}};
  out.push_back(std::move(a));
}

void unit_sequencer::adjust_deadline(const call_rec& rec, int code, int64_t latency_us,
                                     emit_actions& out) {
  if (rec.scale != scale_) return;  // issued at another deadline: says nothing about this one
  constexpr int deadline_exceeded = 4;
  const uint32_t before = scale_;
  if (code == deadline_exceeded && scale_ < opts_.max_deadline_scale) {
    scale_ = std::min(scale_ * 2, opts_.max_deadline_scale);
    ++c_.deadline_raised;
  } else if (code == 0 && scale_ > 1 && latency_us * 4 < deadline_ms() * 1000) {
    scale_ /= 2;
  }
  if (scale_ == before) return;
  emit_action a;
  a.what = emit_action::kind::set_deadline;
  a.deadline_ms = deadline_ms();
  out.push_back(std::move(a));
}

completion_info unit_sequencer::on_completed(uint64_t call, int code, const std::string& message,
                                             bool accepted, int64_t now_ms, emit_actions& out,
                                             int64_t latency_us) {
  completion_info info;
  auto it = calls_.find(call);
  if (it == calls_.end()) return info;  // UQ10
  const call_rec rec = it->second;
  calls_.erase(it);
  info.known = true;
  info.kind = rec.kind;
  if (code != 0) {
    ++c_.calls_failed;
    last_error_ = std::string(code_name(code)) + ": " + message;
    log_failure(rec.kind, code, message, now_ms, out);
  } else {
    was_ready_ = true;  // UQ9: only a READY channel answers
  }
  adjust_deadline(rec, code, latency_us, out);  // before pump(): UQ11 covers what it starts
  if (rec.kind == call_kind::stats) {
    emit_action a;
    a.what = emit_action::kind::answer_stats;
    a.ticket = rec.ticket;
    a.ok = code == 0 && accepted;  // the stats path counts accepted=false as a failure (S08)
    out.push_back(std::move(a));
    return info;
  }
  // A unit call: always the head's (UQ1: the head finishes only when none is left).
  if (queue_.empty()) return info;
  const emit_unit& u = *queue_.front().unit;
  if (rec.kind == call_kind::stream && !u.adds.empty()) info.adds_ts_us = u.adds_ts_us;
  if (unit_calls_ > 0) --unit_calls_;
  if (rec.kind == call_kind::evict && evicts_in_flight_ > 0) --evicts_in_flight_;
  if (code != 0) {
    ++failed_;
    stopped_ = true;  // UQ5
    if (unit_error_.empty()) unit_error_ = last_error_;
  }
  pump(out);
  return info;
}

void unit_sequencer::on_channel(channel_state s, emit_actions& out) {
  channel_ = s;
  if (s == channel_state::ready) {
    if (was_ready_ && lost_) {
      ++c_.reconnects;
      emit_action a;
      a.what = emit_action::kind::reconnected;
      out.push_back(std::move(a));
    }
    was_ready_ = true;
    lost_ = false;
    return;
  }
  if (was_ready_) lost_ = true;
}

}  // namespace kvrelay::emitter
