// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/metrics_registry.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace kvrelay {
namespace {

TEST(MetricsRegistry, CollectorsAppendWholeFamiliesAfterTheRegistrysOwn) {
  metrics_registry m;
  m.counter("kvrelay_a_total", "a", {{"replica", "r"}}).inc(3);
  int calls = 0;
  m.add_collector([&](std::string& out) {
    ++calls;
    append_family(out, "process_open_fds", "gauge", "Number of open file descriptors.",
                  {{{}, 7}});
  });
  const std::string text = m.render();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(text,
            "# HELP kvrelay_a_total a\n# TYPE kvrelay_a_total counter\n"
            "kvrelay_a_total{replica=\"r\"} 3\n"
            "# HELP process_open_fds Number of open file descriptors.\n"
            "# TYPE process_open_fds gauge\nprocess_open_fds 7\n");
  m.render();
  EXPECT_EQ(calls, 2) << "collectors run at every scrape";
}

TEST(MetricsRegistry, AppendFamilyEscapesLabelValues) {
  std::string out;
  append_family(out, "kvrelay_x", "gauge", "x", {{{{"a", "q\"b\\c\nd"}}, 1}, {{{"a", ""}}, 2}});
  EXPECT_EQ(out,
            "# HELP kvrelay_x x\n# TYPE kvrelay_x gauge\n"
            "kvrelay_x{a=\"q\\\"b\\\\c\\nd\"} 1\nkvrelay_x{a=\"\"} 2\n");
}

TEST(MetricsRegistry, ValuesReadBackAsTheSameDouble) {
  for (double v : {0.1, 1.964348, 1764590123.37, 1e-7, 123456789.123456789, 2.5e20}) {
    const std::string text = format_metric_value(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
  }
  EXPECT_EQ(format_metric_value(42), "42");
  EXPECT_EQ(format_metric_value(0.5), "0.5");
  EXPECT_EQ(format_metric_value(1764590123.37), "1764590123.37");
  EXPECT_EQ(format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
}

TEST(MetricsRegistry, HistogramCountIsItsInfBucket) {
  metrics_registry m;
  auto& h = m.histogram("kvrelay_h_seconds", "h", {0.1, 1}, {});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  const std::string text = m.render();
  EXPECT_NE(text.find("kvrelay_h_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvrelay_h_seconds_bucket{le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvrelay_h_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvrelay_h_seconds_count 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvrelay_h_seconds_sum 5.55\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace kvrelay
