// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "supervision/supervision_protocol.hpp"

#include <algorithm>
#include <utility>

namespace kvrelay {

namespace {

using action = supervision_protocol::action;
using type = action::type;

// Teardown order (SV8): upstream first, the emitter last so the debouncer never outlives it.
constexpr actor_kind teardown_order[] = {actor_kind::ingress, actor_kind::decoder,
                                         actor_kind::debouncer, actor_kind::scraper,
                                         actor_kind::emitter};

action make(type t) {
  action a;
  a.what = t;
  return a;
}

}  // namespace

const char* to_string(supervision_protocol::action::type t) noexcept {
  switch (t) {
    case type::spawn: return "spawn";
    case type::stop: return "stop";
    case type::kill: return "kill";
    case type::schedule_restart: return "schedule_restart";
    case type::schedule_stable: return "schedule_stable";
    case type::schedule_deadline: return "schedule_deadline";
    case type::mark_unhealthy: return "mark_unhealthy";
    case type::mark_healthy: return "mark_healthy";
    case type::log: return "log";
    case type::quit: return "quit";
  }
  return "unknown";
}

supervision_protocol::supervision_protocol(options o)
    : opts_(std::move(o)), backoff_(opts_.backoff_min, opts_.backoff_max, opts_.seed) {}

std::vector<actor_kind> supervision_protocol::members_of(pipeline_unit u) {
  switch (u) {
    case pipeline_unit::datapath:
      return {actor_kind::ingress, actor_kind::decoder, actor_kind::debouncer};
    case pipeline_unit::emitter: return {actor_kind::emitter};
    case pipeline_unit::scraper: return {actor_kind::scraper};
  }
  return {};
}

uint64_t supervision_protocol::live_incarnation(actor_kind k) const {
  const auto& m = members_[index(k)];
  return m.alive ? m.incarnation : 0;
}

bool supervision_protocol::unhealthy() const {
  return std::any_of(units_.begin(), units_.end(),
                     [](const unit_state& u) { return u.rec.unhealthy; });
}

void supervision_protocol::log(actions& out, log::level l, std::string msg,
                               std::vector<log::field> f) const {
  auto a = make(type::log);
  a.level = l;
  a.message = std::move(msg);
  a.fields.emplace_back("pipeline", opts_.pipeline);
  for (auto& x : f) a.fields.push_back(std::move(x));
  out.push_back(std::move(a));
}

void supervision_protocol::spawn(pipeline_unit u, clock::time_point now, actions& out) {
  auto& st = units_[index(u)];
  st.up = true;
  st.rec.started = now;
  const uint64_t inc = ++st.rec.incarnation;
  for (auto k : members_of(u)) members_[index(k)] = member{true, inc};
  auto a = make(type::spawn);
  a.unit = u;
  a.number = inc;
  out.push_back(std::move(a));
  if (st.rec.unhealthy) {  // SV6: healthy again once it stays up for a window
    auto s = make(type::schedule_stable);
    s.unit = u;
    s.number = inc;
    s.delay = opts_.restart_window;
    out.push_back(std::move(s));
  }
}

supervision_protocol::actions supervision_protocol::start(clock::time_point now) {
  actions out;
  spawn(pipeline_unit::emitter, now, out);
  spawn(pipeline_unit::datapath, now, out);
  if (opts_.has_scraper) spawn(pipeline_unit::scraper, now, out);
  return out;
}

bool supervision_protocol::end_child(actor_kind k, action::type how, actions& out) {
  auto& m = members_[index(k)];
  if (!m.alive) return false;
  m.alive = false;
  auto a = make(how);
  a.child = k;
  a.number = m.incarnation;
  out.push_back(std::move(a));
  return true;
}

void supervision_protocol::unit_down(pipeline_unit u, const std::string& reason,
                                     clock::time_point now, actions& out) {
  auto& st = units_[index(u)];
  st.up = false;
  st.rec.last_error = reason;
  for (auto k : members_of(u)) end_child(k, type::stop, out);  // SV3: the rest goes too
  if (restarting_stopped()) return;  // rules 7, 8

  while (!st.recent.empty() && now - st.recent.front() > opts_.restart_window)
    st.recent.pop_front();
  st.recent.push_back(now);
  ++st.rec.restarts;
  const auto n = static_cast<uint32_t>(st.recent.size());
  ms delay = backoff_.delay(n);
  if (static_cast<int>(n) > opts_.max_restarts) {  // SV5
    delay = opts_.unhealthy_backoff;
    if (!st.rec.unhealthy) {
      const bool was = unhealthy();
      st.rec.unhealthy = true;
      if (!was) out.push_back(make(type::mark_unhealthy));
      log(out, log::level::error, "pipeline keeps failing; marked unhealthy, retrying slowly",
          {{"unit", to_string(u)}, {"restarts", st.rec.restarts}, {"last_error", reason},
           {"retry_ms", static_cast<int64_t>(delay.count())}});
    }
  }
  st.pending = ++st.generation;
  auto a = make(type::schedule_restart);
  a.unit = u;
  a.number = st.pending;
  a.delay = delay;
  out.push_back(std::move(a));
  log(out, log::level::warn, "actor failed; restarting",
      {{"unit", to_string(u)}, {"err", reason},
       {"backoff_ms", static_cast<int64_t>(delay.count())}});
}

supervision_protocol::actions supervision_protocol::child_down(actor_kind who,
                                                               uint64_t incarnation,
                                                               const std::string& reason,
                                                               clock::time_point now) {
  actions out;
  auto& m = members_[index(who)];
  if (!m.alive || m.incarnation != incarnation) return out;  // SV2
  if (tearing_down_) {
    m.alive = false;
    const bool was_front = !teardown_queue_.empty() && teardown_queue_.front() == who;
    teardown_queue_.erase(std::remove(teardown_queue_.begin(), teardown_queue_.end(), who),
                          teardown_queue_.end());
    units_[index(unit_of(who))].up = false;
    if (was_front || teardown_queue_.empty()) stop_next(out);
    return out;
  }
  m.alive = false;
  unit_down(unit_of(who), reason, now, out);
  return out;
}

supervision_protocol::actions supervision_protocol::spawn_failed(pipeline_unit u,
                                                                 uint64_t incarnation,
                                                                 const std::string& reason,
                                                                 clock::time_point now) {
  actions out;
  auto& st = units_[index(u)];
  if (!st.up || st.rec.incarnation != incarnation || tearing_down_) return out;
  for (auto k : members_of(u)) members_[index(k)].alive = false;  // nothing to stop
  unit_down(u, reason, now, out);
  return out;
}

supervision_protocol::actions supervision_protocol::restart_timer(pipeline_unit u,
                                                                  uint64_t generation,
                                                                  clock::time_point now) {
  actions out;
  auto& st = units_[index(u)];
  if (st.pending == 0 || generation != st.pending) return out;  // SV4
  st.pending = 0;
  if (restarting_stopped() || st.up) return out;                // rules 7, 8
  spawn(u, now, out);
  log(out, log::level::info, "actor restarted",
      {{"unit", to_string(u)}, {"restarts", st.rec.restarts}});
  return out;
}

supervision_protocol::actions supervision_protocol::stable_timer(pipeline_unit u,
                                                                 uint64_t incarnation) {
  actions out;
  auto& st = units_[index(u)];
  if (!st.up || st.rec.incarnation != incarnation || !st.rec.unhealthy) return out;
  st.rec.unhealthy = false;
  st.recent.clear();
  log(out, log::level::info, "unit stayed up for a restart window; healthy again",
      {{"unit", to_string(u)}});
  if (!unhealthy()) out.push_back(make(type::mark_healthy));
  return out;
}

supervision_protocol::actions supervision_protocol::drain_begun() {
  draining_ = true;
  return {};
}

supervision_protocol::actions supervision_protocol::teardown_requested() {
  actions out;
  if (tearing_down_ || quit_) return out;
  tearing_down_ = true;
  for (auto k : teardown_order)
    if (members_[index(k)].alive) teardown_queue_.push_back(k);
  if (!teardown_queue_.empty()) {
    auto d = make(type::schedule_deadline);
    d.delay = opts_.teardown_deadline;
    out.push_back(std::move(d));
  }
  stop_next(out);
  return out;
}

void supervision_protocol::stop_next(actions& out) {
  if (quit_) return;
  if (teardown_queue_.empty()) {
    quit_ = true;
    out.push_back(make(type::quit));
    return;
  }
  auto a = make(type::stop);
  a.child = teardown_queue_.front();
  a.number = members_[index(a.child)].incarnation;
  out.push_back(std::move(a));
}

supervision_protocol::actions supervision_protocol::teardown_deadline() {
  actions out;
  if (!tearing_down_ || quit_) return out;
  std::string left;
  for (auto k : teardown_queue_) {
    if (!end_child(k, type::kill, out)) continue;
    if (!left.empty()) left += ",";
    left += to_string(k);
  }
  teardown_queue_.clear();
  log(out, log::level::warn, "children did not stop in time; killed", {{"children", left}});
  quit_ = true;
  out.push_back(make(type::quit));
  return out;
}

}  // namespace kvrelay
