// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The standard process_* series every Prometheus exporter is expected to have (the names and
// meanings client libraries use: CPU seconds, resident and virtual memory, open and maximum file
// descriptors, start time), read from /proc at scrape time. The parsers are pure and take the
// files' text, so tests feed them samples; read_process_sample() does the file reading.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvrelay {

class metrics_registry;

/// The fields of /proc/<pid>/stat kvrelay reports, in the units the kernel writes them.
struct proc_stat_fields {
  uint64_t utime_ticks = 0, stime_ticks = 0;  // fields 14, 15
  uint64_t starttime_ticks = 0;               // field 22: since boot
  uint64_t vsize_bytes = 0;                   // field 23
  int64_t rss_pages = 0;                      // field 24
};

/// Parses /proc/<pid>/stat. The command name (field 2) is in parentheses and may itself hold
/// spaces and ')', so fields are counted from the last ')'. nullopt when malformed.
std::optional<proc_stat_fields> parse_proc_stat(std::string_view text);
/// The "btime" line of /proc/stat: boot time, seconds since the epoch.
std::optional<int64_t> parse_boot_time(std::string_view proc_stat);
/// The soft "Max open files" limit of /proc/<pid>/limits; -1 for "unlimited".
std::optional<int64_t> parse_max_open_files(std::string_view limits);

struct process_sample {
  double cpu_seconds = 0;
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double start_time_seconds = 0;  // since the epoch
  double open_fds = 0;
  double max_fds = 0;             // soft limit; +Inf when unlimited
};

/// Combines the parsed files with the clock tick rate and the page size.
process_sample to_sample(const proc_stat_fields& stat, int64_t boot_time, int64_t max_fds,
                         double open_fds, long ticks_per_second, long page_bytes);

/// Reads `proc_dir` ("/proc/self"), /proc/stat and the fd directory. nullopt when /proc is not
/// there (a sandbox): the process_* families are then simply absent.
std::optional<process_sample> read_process_sample(const std::string& proc_dir = "/proc/self");

/// The six families in text format 0.0.4.
std::string render_process_metrics(const process_sample& s);

/// Registers a scrape-time collector on `m` that appends the process_* families.
void add_process_collector(metrics_registry& m);

}  // namespace kvrelay
