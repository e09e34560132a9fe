// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The stats path's stale-signal state machine (docs/spec/reference-behaviour.md S04-S08, S15) as a pure
// class: the scraper actor reports each tick's outcome and logs what it is handed, so tests can
// count log lines by level without a logger.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.hpp"

namespace kvrelay {

class stats_tracker {
 public:
  // Consecutive failures after which the server's load signal is declared stale.
  static constexpr int kStaleThreshold = 3;

  // A sample reached the server and was accepted. Returns the recovery INFO when at least
  // kStaleThreshold failures preceded it, otherwise nothing to log.
  std::optional<log::record> delivered();
  // A tick produced no delivered sample: scrape error, no stats, RPC error or accepted=false
  // all count (S06-S08). Returns WARN for failures 1..2, one ERROR at 3, DEBUG afterwards.
  log::record failed(std::string_view reason);

  // INFO lines the reporter logs around its run (S15).
  static log::record starting(std::int64_t interval_ms);
  static log::record stopped();

  int consecutive_failures() const { return failures_; }
  bool ever_delivered() const { return ever_delivered_; }
  bool stale() const { return failures_ >= kStaleThreshold; }

 private:
  int failures_ = 0;
  bool ever_delivered_ = false;  // per process: a restarted daemon cannot know (limitation 11)
};

// DESIGN "operability": alarm when the engine reports prefix-cache activity on /metrics while no
// KV events arrive (a silent or mis-wired event stream). Feed it once per stats tick.
class silent_stream_detector {
 public:
  enum class transition { none, raise, clear };

  // `intervals`: consecutive silent ticks before the alarm is raised (at least 1).
  explicit silent_stream_detector(int intervals = 3);

  // queries_total: the engine's cumulative prefix_cache_queries, empty when not exposed (SGLang,
  // rejected scrape). events_received: any KV event arrived since the previous tick.
  transition tick(std::optional<double> queries_total, bool events_received);

  bool alarmed() const { return alarmed_; }
  int silent_ticks() const { return silent_; }

 private:
  int intervals_;
  int silent_ = 0;
  bool alarmed_ = false;
  std::optional<double> last_;
};

// Sleep transitions across scrapes: a sleeping engine has discarded its KV
// cache, and an idle one may never publish the AllBlocksCleared that would say so, so the
// pipeline clears on the transition to asleep and indexes again after the wake. Feed it every
// scrape's reading; a scrape that says nothing (SGLang, a rejected body) changes nothing.
class sleep_watch {
 public:
  enum class transition { none, fell_asleep, woke_up };

  transition tick(std::optional<bool> asleep);
  bool asleep() const { return state_.value_or(false); }

 private:
  std::optional<bool> state_;  // unknown until the first reading
};

// Index coverage against one of the engine's block counts: resident / engine, clamped to
// [0, 1]; nothing when the engine's count is unknown, 1 when the engine uses no block at all
// (there is nothing to know).
std::optional<double> coverage_ratio(double resident, std::optional<double> engine_blocks);

}  // namespace kvrelay
