// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/scraper/stats_tracker.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace kvrelay {
namespace {

// Collects what the reporter would log, so tests can count by level like the reference's tests.
struct log_sink {
  std::vector<log::record> lines;
  void add(const std::optional<log::record>& r) {
    if (r) lines.push_back(*r);
  }
  void add(const log::record& r) { lines.push_back(r); }
  int count(log::level l) const {
    int n = 0;
    for (const auto& r : lines) n += r.severity == l;
    return n;
  }
  int containing(std::string_view text) const {
    int n = 0;
    for (const auto& r : lines) n += r.message.find(text) != std::string::npos;
    return n;
  }
  const log::record* first(log::level l) const {
    for (const auto& r : lines)
      if (r.severity == l) return &r;
    return nullptr;
  }
};

TEST(StatsTracker, S04StaleEscalationAndRecovery) {
  stats_tracker t;
  log_sink log;
  log.add(t.delivered());
  for (int i = 0; i < 5; ++i) log.add(t.failed("connection refused"));
  log.add(t.delivered());

  EXPECT_EQ(log.count(log::level::error), 1);
  EXPECT_EQ(log.count(log::level::warn), 2);
  EXPECT_EQ(log.count(log::level::debug), 2);
  EXPECT_EQ(log.count(log::level::info), 1);
  const log::record* err = log.first(log::level::error);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(err->message.find("engine load stats stale"), std::string::npos);
  EXPECT_NE(err->message.find("last delivered sample"), std::string::npos);
  EXPECT_EQ(err->message.find("undelivered since startup"), std::string::npos);
  ASSERT_NE(err->find("event"), nullptr);
  EXPECT_EQ(*err->find("event"), "load_signal_stale");
  EXPECT_EQ(*err->find("consecutive_failures"), "3");
  EXPECT_EQ(*err->find("err"), "connection refused");
  const log::record* info = log.first(log::level::info);
  ASSERT_NE(info, nullptr);
  EXPECT_NE(info->message.find("engine load stats recovered"), std::string::npos);
  EXPECT_EQ(*info->find("event"), "load_signal_recovered");
  EXPECT_EQ(*info->find("after_failures"), "5");
  EXPECT_EQ(log.containing("engine load stats update failed; will retry"), 2);
  EXPECT_EQ(t.consecutive_failures(), 0);
  EXPECT_FALSE(t.stale());
}

TEST(StatsTracker, S05ColdStartNeverSucceeded) {
  stats_tracker t;
  log_sink log;
  for (int i = 0; i < 3; ++i) log.add(t.failed("scrape: connection refused"));
  EXPECT_EQ(log.count(log::level::error), 1);
  const log::record* err = log.first(log::level::error);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(err->message.find("undelivered since startup"), std::string::npos);
  EXPECT_EQ(err->message.find("last delivered sample"), std::string::npos);
  EXPECT_EQ(err->message.find("IC has no"), std::string::npos);
  EXPECT_TRUE(t.stale());
  EXPECT_FALSE(t.ever_delivered());
}

TEST(StatsTracker, S06S07S08AnyFailureKindCountsTowardStale) {
  // Delivery errors, "no stats" and accepted=false are all failed() to the tracker.
  for (const char* why : {"ReportCacheState: unavailable", "no stats", "ack accepted=false"}) {
    stats_tracker t;
    log_sink log;
    for (int i = 0; i < 3; ++i) log.add(t.failed(why));
    EXPECT_EQ(log.count(log::level::error), 1) << why;
    EXPECT_EQ(log.containing("undelivered since startup"), 1) << why;
    EXPECT_EQ(log.containing("recovered"), 0) << why;
    EXPECT_EQ(*log.first(log::level::error)->find("event"), "load_signal_stale");
  }
}

TEST(StatsTracker, S15RecoveryOnlyAfterThreshold) {
  stats_tracker t;
  log_sink log;
  log.add(t.failed("x"));
  log.add(t.failed("x"));
  log.add(t.delivered());  // two failures: no recovery line
  EXPECT_EQ(log.count(log::level::info), 0);
  EXPECT_EQ(log.count(log::level::warn), 2);
  // The counter reset on delivery: the next two failures warn again, the third is an ERROR with
  // the "last delivered sample" text (delivered once in this process).
  log.add(t.failed("y"));
  log.add(t.failed("y"));
  log.add(t.failed("y"));
  EXPECT_EQ(log.count(log::level::warn), 4);
  EXPECT_EQ(log.count(log::level::error), 1);
  EXPECT_EQ(log.containing("last delivered sample"), 1);
  log.add(t.delivered());
  EXPECT_EQ(log.count(log::level::info), 1);
  EXPECT_EQ(*log.first(log::level::info)->find("after_failures"), "3");
  // A second stale episode logs a second ERROR.
  for (int i = 0; i < 4; ++i) log.add(t.failed("z"));
  EXPECT_EQ(log.count(log::level::error), 2);
  EXPECT_EQ(log.count(log::level::debug), 1);
}

TEST(StatsTracker, DeliveredWithoutFailuresLogsNothing) {
  stats_tracker t;
  EXPECT_FALSE(t.delivered().has_value());
  EXPECT_FALSE(t.delivered().has_value());
  EXPECT_TRUE(t.ever_delivered());
}

TEST(StatsTracker, StartStopLines) {
  log::record start = stats_tracker::starting(10000);
  EXPECT_EQ(start.severity, log::level::info);
  EXPECT_EQ(start.message, "stats reporter starting");
  EXPECT_EQ(*start.find("interval"), "10000ms");
  EXPECT_EQ(stats_tracker::stopped().message, "stats reporter stopped");
  EXPECT_STREQ(to_string(log::level::warn), "WARN");
}

using tr = silent_stream_detector::transition;

TEST(SilentStreamDetector, RaisesAfterNSilentActiveIntervalsAndClearsOnEvents) {
  silent_stream_detector d(3);
  EXPECT_EQ(d.tick(100.0, false), tr::none);  // first reading: no activity known yet
  EXPECT_EQ(d.tick(150.0, false), tr::none);  // silent 1
  EXPECT_EQ(d.tick(200.0, false), tr::none);  // silent 2
  EXPECT_EQ(d.tick(260.0, false), tr::raise); // silent 3
  EXPECT_TRUE(d.alarmed());
  EXPECT_EQ(d.tick(300.0, false), tr::none);  // raised once only
  EXPECT_EQ(d.tick(350.0, true), tr::clear);
  EXPECT_FALSE(d.alarmed());
  EXPECT_EQ(d.tick(400.0, true), tr::none);
}

TEST(SilentStreamDetector, EventsOrIdleEngineResetTheCount) {
  silent_stream_detector d(2);
  d.tick(0.0, false);
  EXPECT_EQ(d.tick(10.0, false), tr::none);  // silent 1
  EXPECT_EQ(d.tick(20.0, true), tr::none);   // events arrived: back to 0
  EXPECT_EQ(d.tick(30.0, false), tr::none);  // silent 1
  EXPECT_EQ(d.tick(30.0, false), tr::none);  // idle engine: consistent, back to 0
  EXPECT_EQ(d.silent_ticks(), 0);
  EXPECT_EQ(d.tick(40.0, false), tr::none);  // silent 1
  EXPECT_EQ(d.tick(50.0, false), tr::raise); // silent 2
}

TEST(SilentStreamDetector, NoReadingOrCounterResetIsNotActivity) {
  silent_stream_detector d(1);
  EXPECT_EQ(d.tick(std::nullopt, false), tr::none);
  EXPECT_EQ(d.tick(100.0, false), tr::none);
  EXPECT_EQ(d.tick(5.0, false), tr::none);  // engine restart: counter went down
  EXPECT_EQ(d.tick(std::nullopt, false), tr::none);
  EXPECT_EQ(d.tick(50.0, false), tr::none);  // previous reading missing
  EXPECT_FALSE(d.alarmed());
  EXPECT_EQ(d.tick(60.0, false), tr::raise);
}

TEST(SilentStreamDetector, IntervalsBelowOneMeanOne) {
  silent_stream_detector d(0);
  d.tick(1.0, false);
  EXPECT_EQ(d.tick(2.0, false), tr::raise);
}

TEST(SleepWatch, TransitionsOnlyOnChangeAndUnknownChangesNothing) {
  using t = sleep_watch::transition;
  sleep_watch w;
  EXPECT_EQ(w.tick(std::nullopt), t::none);
  EXPECT_EQ(w.tick(false), t::none) << "first reading awake: nothing happened";
  EXPECT_EQ(w.tick(true), t::fell_asleep);
  EXPECT_TRUE(w.asleep());
  EXPECT_EQ(w.tick(true), t::none);
  EXPECT_EQ(w.tick(std::nullopt), t::none) << "a scrape that says nothing keeps the state";
  EXPECT_TRUE(w.asleep());
  EXPECT_EQ(w.tick(false), t::woke_up);
  EXPECT_FALSE(w.asleep());
  sleep_watch starts_asleep;
  EXPECT_EQ(starts_asleep.tick(true), t::fell_asleep) << "a restarted scraper clears again";
}

TEST(CoverageRatio, ClampedShareAndTheEdges) {
  EXPECT_DOUBLE_EQ(coverage_ratio(620, 1000.0).value_or(-1), 0.62);
  EXPECT_DOUBLE_EQ(coverage_ratio(5000, 1000.0).value_or(-1), 1.0);
  EXPECT_DOUBLE_EQ(coverage_ratio(-1, 1000.0).value_or(-1), 0.0) << "no resident series yet";
  EXPECT_DOUBLE_EQ(coverage_ratio(0, 0.0).value_or(-1), 1.0) << "nothing in use: nothing to know";
  EXPECT_FALSE(coverage_ratio(10, std::nullopt));
}

}  // namespace
}  // namespace kvrelay
