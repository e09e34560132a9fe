// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/scraper/stats_tracker.hpp"

#include <algorithm>

namespace kvrelay {

std::optional<log::record> stats_tracker::delivered() {
  int after = failures_;
  failures_ = 0;
  ever_delivered_ = true;
  // Only a declared stale signal gets a matching all-clear; a blip of 1-2 misses stays quiet.
  if (after < kStaleThreshold) return std::nullopt;
  return log::record{log::level::info,
                     "engine load stats recovered",
                     {{"event", "load_signal_recovered"}, {"after_failures", std::to_string(after)}}};
}

log::record stats_tracker::failed(std::string_view reason) {
  ++failures_;
  std::vector<log::field> fields{{"consecutive_failures", std::to_string(failures_)},
                                {"err", std::string(reason)}};
  if (failures_ < kStaleThreshold)
    return log::record{log::level::warn, "engine load stats update failed; will retry",
                      std::move(fields)};
  if (failures_ > kStaleThreshold)
    return log::record{log::level::debug, "engine load stats update still failing",
                      std::move(fields)};
  fields.insert(fields.begin(), log::field{"event", "load_signal_stale"});
  // Say what the server is left with: an aging sample, or nothing at all since we started.
  std::string msg = ever_delivered_
                        ? "engine load stats stale: IC has no fresh load signal and keeps serving "
                          "the last delivered sample"
                        : "engine load stats stale: undelivered since startup";
  return log::record{log::level::error, std::move(msg), std::move(fields)};
}

log::record stats_tracker::starting(std::int64_t interval_ms) {
  return log::record{log::level::info,
                    "stats reporter starting",
                    {{"interval", std::to_string(interval_ms) + "ms"}}};
}

log::record stats_tracker::stopped() { return log::record{log::level::info, "stats reporter stopped", {}}; }

silent_stream_detector::silent_stream_detector(int intervals) : intervals_(std::max(1, intervals)) {}

silent_stream_detector::transition silent_stream_detector::tick(std::optional<double> queries_total,
                                                                bool events_received) {
  std::optional<double> prev = last_;
  last_ = queries_total;
  if (events_received) {
    silent_ = 0;
    if (!alarmed_) return transition::none;
    alarmed_ = false;
    return transition::clear;
  }
  // Activity = the counter moved forward. No reading, a first reading or a counter reset say
  // nothing either way, so they neither count as silent nor clear the count.
  bool active = prev && queries_total && *queries_total > *prev;
  if (!active) {
    if (prev && queries_total && *queries_total == *prev) silent_ = 0;  // engine idle: consistent
    return transition::none;
  }
  ++silent_;
  if (silent_ >= intervals_ && !alarmed_) {
    alarmed_ = true;
    return transition::raise;
  }
  return transition::none;
}

sleep_watch::transition sleep_watch::tick(std::optional<bool> asleep) {
  if (!asleep) return transition::none;
  const std::optional<bool> before = state_;
  state_ = asleep;
  if (*asleep && before != true) return transition::fell_asleep;  // also the first reading
  if (!*asleep && before == true) return transition::woke_up;
  return transition::none;
}

std::optional<double> coverage_ratio(double resident, std::optional<double> engine_blocks) {
  if (!engine_blocks) return std::nullopt;
  if (!(*engine_blocks > 0)) return 1.0;
  return std::clamp(std::max(resident, 0.0) / *engine_blocks, 0.0, 1.0);
}

}  // namespace kvrelay
