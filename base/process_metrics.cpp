// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/process_metrics.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include "base/metrics_registry.hpp"
#include "base/read_file.hpp"

namespace kvrelay {

namespace {

template <class T>
bool parse_number(std::string_view text, T& out) {
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && p == end;
}

// Splits on runs of spaces and tabs.
std::vector<std::string_view> fields(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t' && text[j] != '\n') ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    if (j < text.size() && text[j] == '\n') break;
    i = j;
  }
  return out;
}

// Every line of `text`, without its newline.
template <class F>
void for_each_line(std::string_view text, F f) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// /proc files report a size of 0, so read_regular_file's bound is the only limit; these are
// a few hundred bytes (stat, limits) or a few KiB per CPU (/proc/stat).
constexpr size_t proc_file_bound = 1 << 20;

std::optional<std::string> slurp(const std::string& path) {
  auto text = read_regular_file(path, proc_file_bound, path);
  if (!text) return std::nullopt;
  return std::move(text).value();
}

std::optional<double> count_fds(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return std::nullopt;
  double n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the descriptor opendir() itself holds
}

}  // namespace

std::optional<proc_stat_fields> parse_proc_stat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  // Field 3 (state) is the first after the command; field n is at index n - 3.
  const auto f = fields(text.substr(close + 1));
  if (f.size() < 22) return std::nullopt;
  proc_stat_fields out;
  if (!parse_number(f[14 - 3], out.utime_ticks) || !parse_number(f[15 - 3], out.stime_ticks) ||
      !parse_number(f[22 - 3], out.starttime_ticks) || !parse_number(f[23 - 3], out.vsize_bytes) ||
      !parse_number(f[24 - 3], out.rss_pages))
    return std::nullopt;
  return out;
}

std::optional<int64_t> parse_boot_time(std::string_view proc_stat) {
  std::optional<int64_t> out;
  for_each_line(proc_stat, [&](std::string_view line) {
    const auto f = fields(line);
    int64_t v = 0;
    if (f.size() == 2 && f[0] == "btime" && parse_number(f[1], v)) out = v;
  });
  return out;
}

std::optional<int64_t> parse_max_open_files(std::string_view limits) {
  // "Max open files            1024                 1048576              files"
  std::optional<int64_t> out;
  constexpr std::string_view key = "Max open files";
  for_each_line(limits, [&](std::string_view line) {
    if (line.substr(0, key.size()) != key) return;
    const auto f = fields(line.substr(key.size()));
    if (f.empty()) return;
    int64_t v = 0;
    if (f[0] == "unlimited") out = -1;
    else if (parse_number(f[0], v)) out = v;
  });
  return out;
}

process_sample to_sample(const proc_stat_fields& stat, int64_t boot_time, int64_t max_fds,
                         double open_fds, long ticks_per_second, long page_bytes) {
  const double hz = ticks_per_second > 0 ? static_cast<double>(ticks_per_second) : 100.0;
  process_sample s;
  s.cpu_seconds = static_cast<double>(stat.utime_ticks + stat.stime_ticks) / hz;
  s.resident_bytes = static_cast<double>(stat.rss_pages) * static_cast<double>(page_bytes);
  s.virtual_bytes = static_cast<double>(stat.vsize_bytes);
  s.start_time_seconds =
      static_cast<double>(boot_time) + static_cast<double>(stat.starttime_ticks) / hz;
  s.open_fds = open_fds;
  s.max_fds = max_fds < 0 ? std::numeric_limits<double>::infinity() : static_cast<double>(max_fds);
  return s;
}

std::optional<process_sample> read_process_sample(const std::string& proc_dir) {
  const auto stat_text = slurp(proc_dir + "/stat");
  const auto sys_text = slurp("/proc/stat");
  const auto limits_text = slurp(proc_dir + "/limits");
  if (!stat_text || !sys_text || !limits_text) return std::nullopt;
  const auto stat = parse_proc_stat(*stat_text);
  const auto boot = parse_boot_time(*sys_text);
  const auto max_fds = parse_max_open_files(*limits_text);
  const auto open_fds = count_fds(proc_dir + "/fd");
  if (!stat || !boot || !max_fds || !open_fds) return std::nullopt;
  return to_sample(*stat, *boot, *max_fds, *open_fds, ::sysconf(_SC_CLK_TCK),
                   ::sysconf(_SC_PAGESIZE));
}

std::string render_process_metrics(const process_sample& s) {
  std::string out;
  append_family(out, "process_cpu_seconds_total", "counter",
                "Total user and system CPU time spent in seconds.", {{{}, s.cpu_seconds}});
  append_family(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                {{{}, s.max_fds}});
  append_family(out, "process_open_fds", "gauge", "Number of open file descriptors.",
                {{{}, s.open_fds}});
  append_family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                {{{}, s.resident_bytes}});
  append_family(out, "process_start_time_seconds", "gauge",
                "Start time of the process since unix epoch in seconds.",
                {{{}, s.start_time_seconds}});
  append_family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                {{{}, s.virtual_bytes}});
  return out;
}

void add_process_collector(metrics_registry& m) {
  m.add_collector([](std::string& out) {
    if (auto s = read_process_sample()) out += render_process_metrics(*s);
  });
}

}  // namespace kvrelay
