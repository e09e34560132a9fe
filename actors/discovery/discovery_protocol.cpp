// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/discovery/discovery_protocol.hpp"

#include <utility>

namespace kvrelay::discovery {

namespace {

constexpr size_t kMaxRemembered = 256;

watch_action action(watch_action::kind k) {
  watch_action a;
  a.what = k;
  return a;
}

// The parser's and the merge's errors start "engine <url>: ", which the reason says already.
std::string without_engine(std::string why) {
  const auto colon = why.find(": ");
  if (why.rfind("engine ", 0) == 0 && colon != std::string::npos &&
      why.substr(7, colon - 7).find("://") != std::string::npos)
    why.erase(0, colon + 2);
  return why;
}

}  // namespace

const char* to_string(watch_state s) noexcept {
  switch (s) {
    case watch_state::waiting: return "waiting";
    case watch_state::discovered: return "discovered";
    case watch_state::retrying: return "retrying";
    case watch_state::configured: return "configured";
  }
  return "?";
}

engine_watch::engine_watch(engine_request req, watch_options opts)
    : req_(std::move(req)), opts_(opts), backoff_(opts.retry_initial, opts.retry_max, opts.seed) {}

void engine_watch::start(watch_actions& out) {
  set_waiting("waiting for engine " + req_.url + ": not answered yet", out);
  fetch_now(out);
}

void engine_watch::fetch_now(watch_actions& out) {
  if (in_flight_) return;
  in_flight_ = true;
  timer_pending_ = false;
  ++gen_;  // DP2: any timer still pending is now stale
  ++c_.fetches;
  out.push_back(action(watch_action::kind::fetch));
}

void engine_watch::fetch_later(watch_actions& out) {
  auto a = action(watch_action::kind::fetch);
  a.delay = backoff_.next();
  a.gen = ++gen_;
  timer_pending_ = true;
  out.push_back(std::move(a));
}

void engine_watch::on_timer(uint64_t gen, watch_actions& out) {
  if (gen != gen_ || !timer_pending_) return;
  fetch_now(out);
}

void engine_watch::on_fetched(const outcome<discovered_engine>& r, int64_t now_ms,
                              watch_actions& out) {
  if (!in_flight_) return;  // DP2
  in_flight_ = false;
  if (!r) {
    failed(r.error(), now_ms, out);
  } else if (auto t = merge(req_, r.value()); !t) {
    failed(t.error(), now_ms, out);
  } else {
    succeeded(std::move(t).value(), out);
  }
  if (in_flight_ || timer_pending_) return;
  if (again_) {
    again_ = false;
    fetch_now(out);
  } else if (!stopped_.empty()) {
    fetch_later(out);  // DP6
  }
}

void engine_watch::failed(const failure& f, int64_t now_ms, watch_actions& out) {
  ++c_.failures;
  ++failures_in_a_row_;
  last_error_ = f.context.empty() ? f.render() : f.context;
  if (state_ == watch_state::configured) {
    // DP8: still on the configured settings; ask again below.
  } else if (target_) {
    state_ = watch_state::retrying;
  } else if (req_.fallback) {
    run_configured(out);
  } else {
    state_ = watch_state::waiting;
    set_waiting("waiting for engine " + req_.url + ": " + without_engine(last_error_), out);
  }
  uint64_t held = 0;
  if (last_error_ != last_logged_error_ && error_lines_.allow(now_ms, held)) {
    last_logged_error_ = last_error_;
    auto a = action(watch_action::kind::log);
    // The configured settings run: the Go sidecar's way, nothing an operator must act on.
    a.level = state_ == watch_state::configured ? log::level::info : log::level::warn;
    a.text = state_ == watch_state::configured
                 ? "engine discovery failed; the pipelines run on the configured settings"
             : target_ ? "engine discovery failed; the pipelines keep the last endpoints"
                       : "engine discovery failed; waiting for the engine";
    a.fields = {{"engine_url", req_.url},
                {"err", last_error_},
                {"attempt", failures_in_a_row_},
                {"suppressed", c_.suppressed + held}};
    c_.suppressed = 0;
    out.push_back(std::move(a));
  } else {
    ++c_.suppressed;
  }
  again_ = false;  // the retry below re-reads anyway
  fetch_later(out);
}

void engine_watch::run_configured(watch_actions& out) {
  state_ = watch_state::configured;
  target_ = req_.fallback;
  set_waiting("", out);
  ++c_.retargets;
  auto a = action(watch_action::kind::retarget);
  a.target = target_;
  out.push_back(std::move(a));
}

void engine_watch::succeeded(discovered_target t, watch_actions& out) {
  const bool from_configured = state_ == watch_state::configured;
  const bool first = !target_;
  // DP8: leaving the configured settings is always news (the origins at least change).
  const bool changed = first || from_configured || !target_->same_pipelines(t);
  if (failures_in_a_row_ > 0 || first) {
    auto a = action(watch_action::kind::log);
    a.level = log::level::info;
    a.text = "engine discovered";
    a.fields = {{"engine_url", req_.url},
                {"dialect", t.dialect},
                {"ranks", t.ranks.size()},
                {"failed_attempts", failures_in_a_row_}};
    out.push_back(std::move(a));
  }
  failures_in_a_row_ = 0;
  last_logged_error_.clear();
  backoff_.reset();
  state_ = watch_state::discovered;
  for (const auto& c : t.conflicts) log_once(log::level::warn, c, out);
  for (const auto& n : t.notes) log_once(log::level::info, "engine " + req_.url + ": " + n, out);
  set_waiting("", out);
  auto next = std::make_shared<const discovered_target>(std::move(t));
  if (!changed) {
    target_ = std::move(next);  // the same pipelines; origins may read differently
    return;
  }
  if (!first) {
    auto a = action(watch_action::kind::log);
    a.level = log::level::info;
    a.text = from_configured ? "the engine said where its publishers are; its pipelines follow it"
                             : "engine publishers changed; retargeting its pipelines";
    a.fields = {{"engine_url", req_.url}, {"ranks", next->ranks.size()}};
    out.push_back(std::move(a));
  }
  target_ = std::move(next);
  stopped_.clear();  // DP6: new pipelines, new streams
  ++c_.retargets;
  auto a = action(watch_action::kind::retarget);
  a.target = target_;
  out.push_back(std::move(a));
}

void engine_watch::set_waiting(std::string reason, watch_actions& out) {
  if (reason == waiting_) return;
  waiting_ = std::move(reason);
  auto a = action(watch_action::kind::readiness);
  a.text = waiting_;
  out.push_back(std::move(a));
}

void engine_watch::log_once(log::level l, const std::string& text, watch_actions& out) {
  if (logged_.count(text) != 0 || logged_.size() >= kMaxRemembered) return;
  logged_.insert(text);
  auto a = action(watch_action::kind::log);
  a.level = l;
  a.text = text;
  a.fields = {{"engine_url", req_.url}};
  out.push_back(std::move(a));
}

bool engine_watch::has_rank(int64_t rank) const {
  if (!target_) return false;
  for (const auto& r : target_->ranks)
    if (r.dp_rank == rank) return true;
  return false;
}

void engine_watch::on_stream_stopped(int64_t rank, const std::string& why, watch_actions& out) {
  if (!has_rank(rank)) return;  // DP7
  ++c_.stops;
  const bool fresh = stopped_.insert(rank).second;
  if (fresh) {
    auto a = action(watch_action::kind::log);
    a.level = log::level::info;
    a.text = "engine stream stopped; reading the engine's publishers again";
    a.fields = {{"engine_url", req_.url}, {"dp_rank", rank}, {"why", why}};
    out.push_back(std::move(a));
  }
  if (in_flight_) {
    again_ = true;  // DP5: that answer may predate the restart
    return;
  }
  if (timer_pending_) return;
  fetch_now(out);
}

void engine_watch::on_stream_flowing(int64_t rank) {
  if (stopped_.erase(rank) == 0 || !stopped_.empty()) return;
  // DP6: nothing stopped any more; a pending poll is not needed, a pending retry of a failure is
  // (the state says which).
  if (timer_pending_ && state_ == watch_state::discovered) {
    timer_pending_ = false;
    ++gen_;
  }
  again_ = false;
}

}  // namespace kvrelay::discovery
