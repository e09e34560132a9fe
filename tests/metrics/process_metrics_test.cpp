// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/process_metrics.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <string>

#include "base/metrics_registry.hpp"

namespace kvrelay {
namespace {

// A real line (kernel 6.1), with a command name holding a space and a ')'.
constexpr const char* stat_line =
    "4242 (kv relay) x) S 1 4242 4242 0 -1 4194560 1855 0 0 0 250 75 0 0 20 0 9 0 "
    "123456 912345088 4321 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcessMetrics, ParsesStatAfterTheLastParenthesis) {
  auto f = parse_proc_stat(stat_line);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->utime_ticks, 250u);
  EXPECT_EQ(f->stime_ticks, 75u);
  EXPECT_EQ(f->starttime_ticks, 123456u);
  EXPECT_EQ(f->vsize_bytes, 912345088u);
  EXPECT_EQ(f->rss_pages, 4321);
}

TEST(ProcessMetrics, RefusesMalformedStat) {
  EXPECT_FALSE(parse_proc_stat(""));
  EXPECT_FALSE(parse_proc_stat("4242 kvrelay S 1 2 3"));          // no parentheses
  EXPECT_FALSE(parse_proc_stat("4242 (kvrelay) S 1 4242 4242 0"));  // too few fields
  std::string bad = stat_line;
  bad.replace(bad.find(" 250 "), 5, " 2x0 ");
  EXPECT_FALSE(parse_proc_stat(bad));
}

TEST(ProcessMetrics, ParsesBootTimeAndTheSoftFdLimit) {
  EXPECT_EQ(parse_boot_time("cpu  1 2 3\ncpu0 1 2 3\nintr 5\nctxt 9\nbtime 1764590000\n"
                            "processes 77\n"),
            1764590000);
  EXPECT_FALSE(parse_boot_time("cpu 1 2 3\n"));
  const char* limits =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max cpu time              unlimited            unlimited            seconds   \n"
      "Max open files            1024                 1048576              files     \n";
  EXPECT_EQ(parse_max_open_files(limits), 1024);
  EXPECT_EQ(parse_max_open_files("Max open files            unlimited            unlimited   "
                                 "         files\n"),
            -1);
  EXPECT_FALSE(parse_max_open_files("Max processes 10 10 processes\n"));
}

TEST(ProcessMetrics, CombinesTicksPagesAndBootTime) {
  auto f = parse_proc_stat(stat_line);
  ASSERT_TRUE(f);
  const auto s = to_sample(*f, 1764590000, 1024, 12, 100, 4096);
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 3.25);
  EXPECT_DOUBLE_EQ(s.resident_bytes, 4321.0 * 4096);
  EXPECT_DOUBLE_EQ(s.virtual_bytes, 912345088);
  EXPECT_DOUBLE_EQ(s.start_time_seconds, 1764590000 + 1234.56);
  EXPECT_DOUBLE_EQ(s.open_fds, 12);
  EXPECT_DOUBLE_EQ(s.max_fds, 1024);
  EXPECT_TRUE(std::isinf(to_sample(*f, 0, -1, 0, 100, 4096).max_fds));
}

TEST(ProcessMetrics, RendersTheSixStandardFamilies) {
  process_sample s;
  s.cpu_seconds = 3.25;
  s.start_time_seconds = 1764591234.56;
  s.max_fds = 1024;
  const auto text = render_process_metrics(s);
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3.25\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("process_start_time_seconds 1764591234.56\n"), std::string::npos) << text;
  for (const char* family : {"process_max_fds", "process_open_fds",
                             "process_resident_memory_bytes", "process_virtual_memory_bytes"})
    EXPECT_NE(text.find(std::string("# TYPE ") + family + " gauge\n"), std::string::npos)
        << family;
}

TEST(ProcessMetrics, ReadsThisProcess) {
  auto s = read_process_sample();
  ASSERT_TRUE(s) << "/proc/self is readable on Linux";
  EXPECT_GT(s->resident_bytes, 0);
  EXPECT_GT(s->virtual_bytes, s->resident_bytes);
  EXPECT_GE(s->open_fds, 3) << "stdin, stdout, stderr at least";
  EXPECT_GT(s->max_fds, s->open_fds);
  EXPECT_GT(s->start_time_seconds, 1.5e9);
  EXPECT_FALSE(read_process_sample("/nonexistent/proc/self"));

  metrics_registry m;
  add_process_collector(m);
  EXPECT_NE(m.render().find("\nprocess_resident_memory_bytes "), std::string::npos);
}

}  // namespace
}  // namespace kvrelay
