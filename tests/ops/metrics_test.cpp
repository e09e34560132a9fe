// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// /metrics of a live daemon, held to what Prometheus and the shipped dashboards expect:
// `promtool check metrics` accepts it, the standard exporter families are there, and every
// metric the rules, the dashboard and the docs' metrics table name is one it exports
// (check_metric_names.py; a rename anywhere fails here).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/build_info.hpp"
#include "tests/ops/live_daemon.hpp"

namespace kvrelay::ops {
namespace {

using std::chrono::seconds;

bool have(const char* program) {
  std::string out;
  return run({"/bin/sh", "-c", std::string("command -v ") + program}, seconds(10), out) == 0;
}

struct LiveMetrics : ::testing::Test {
  static void SetUpTestSuite() {
    d = new live_daemon();
    ASSERT_TRUE(d->start()) << d->error();
    ASSERT_TRUE(d->drive()) << d->error();
    // A restart, so kvrelay_actor_restarts_total is in the scrape like on a bad day.
    ASSERT_TRUE(d->crash_and_wait("emitter")) << d->error();
    // The scraper has run at least once (200 ms interval).
    ASSERT_TRUE(e2e::harness::wait_until([] {
      return d->harness().metric("kvrelay_stats_stale", {{"replica", d->pipeline()}}) >= 0;
    }));
    auto r = d->get("/metrics", false);
    ASSERT_EQ(r.status, 200) << "Prometheus sends no token";
    text = new std::string(r.body);
  }
  static void TearDownTestSuite() {
    delete d;
    delete text;
    d = nullptr;
    text = nullptr;
  }
  static live_daemon* d;
  static std::string* text;
};
live_daemon* LiveMetrics::d = nullptr;
std::string* LiveMetrics::text = nullptr;

TEST_F(LiveMetrics, PromtoolCheckMetricsAcceptsTheScrape) {
  if (!have("promtool")) KVRELAY_SKIP("promtool is not installed (Debian package prometheus)");
  faults::temp_dir dir;
  dir.write("metrics.txt", *text);
  std::string out;
  const int rc = run({"/bin/sh", "-c", "promtool check metrics < \"$0\"", dir.file("metrics.txt")},
                     seconds(60), out);
  EXPECT_EQ(rc, 0) << out << "\n--- scrape ---\n" << *text;
  EXPECT_EQ(out, "") << "promtool's lint findings";
}

TEST_F(LiveMetrics, StandardExporterFamiliesArePresent) {
  for (const char* family :
       {"process_cpu_seconds_total counter", "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge", "process_open_fds gauge", "process_max_fds gauge",
        "process_start_time_seconds gauge", "kvrelay_build_info gauge"})
    EXPECT_NE(text->find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family;
  // The source it was built from: the git revision and the commit's date, as --version says.
  const std::string build_info = std::string("kvrelay_build_info{version=\"") + KVRELAY_VERSION +
                                 "\",revision=\"" + build::revision() + "\",build_date=\"" +
                                 build::date() + "\",caf=\"0.17.6\",";
  EXPECT_NE(text->find(build_info), std::string::npos) << build_info << "\n" << *text;
  EXPECT_STRNE(build::revision(), "unknown") << "built from a git checkout";
  EXPECT_STRNE(build::date(), "unknown");
}

TEST_F(LiveMetrics, RulesDashboardAndDocsNameOnlyExportedMetrics) {
  if (!have("python3")) KVRELAY_SKIP("python3 is not installed");
  faults::temp_dir dir;
  dir.write("metrics.txt", *text);
  std::string out;
  const int rc = run({"python3", KVRELAY_SOURCE_DIR "/tests/ops/check_metric_names.py",
                      dir.file("metrics.txt"), KVRELAY_SOURCE_DIR},
                     seconds(60), out);
  if (rc == 77) KVRELAY_SKIP(out);
  EXPECT_EQ(rc, 0) << out;
  std::cout << out;
}

}  // namespace
}  // namespace kvrelay::ops
