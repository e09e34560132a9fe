// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The little flag grammar kvrelay-capture and kvrelay-replay share: `--x v` and `--x=v` (one or
// two dashes), durations and sizes as kvrelay's configuration reads them (config/values.hpp).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/values.hpp"

namespace kvrelay::capture::cli {

[[noreturn]] inline void usage_error(const std::string& msg, const char* usage) {
  std::fprintf(stderr, "%s\n%s", msg.c_str(), usage);
  std::exit(2);
}

/// True when argv[i] is the flag `name` (given without dashes); its value goes to `value`, from
/// "=v" or from the next argument (then i moves on). A missing value is a usage error.
inline bool flag(const char* name, int argc, char** argv, int& i, std::string& value,
                 const char* usage) {
  std::string a = argv[i];
  if (a.rfind("--", 0) == 0) a = a.substr(2);
  else if (a.rfind("-", 0) == 0) a = a.substr(1);
  else return false;
  const std::string n = name;
  if (a == n) {
    if (i + 1 >= argc) usage_error("flag needs a value: --" + n, usage);
    value = argv[++i];
    return true;
  }
  if (a.rfind(n + "=", 0) == 0) {
    value = a.substr(n.size() + 1);
    return true;
  }
  return false;
}

inline std::chrono::milliseconds duration(const std::string& flag, const std::string& text,
                                          const char* usage) {
  std::chrono::milliseconds out{0};
  if (auto err = config::parse_duration(text, out); !err.empty())
    usage_error("--" + flag + ": " + err, usage);
  return out;
}

inline uint64_t size(const std::string& flag, const std::string& text, const char* usage) {
  int64_t out = 0;
  if (auto err = config::parse_size(text, out); !err.empty())
    usage_error("--" + flag + ": " + err, usage);
  return static_cast<uint64_t>(out);
}

inline uint64_t count(const std::string& flag, const std::string& text, const char* usage) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text[0] == '-')
    usage_error("--" + flag + ": not a count: " + text, usage);
  return v;
}

using value_flag = std::pair<const char*, std::function<void(const std::string&)>>;
using switch_flag = std::pair<const char*, std::function<void()>>;

/// Parses every argument: -h/--help prints `usage` and exits 0; a flag of `values` gets its
/// value, one of `switches` takes none; anything else is a usage error (exit 2).
inline void parse(int argc, char** argv, const char* usage, const std::vector<value_flag>& values,
                  const std::vector<switch_flag>& switches = {}) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help" || a == "-help") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    bool known = false;
    for (const auto& [name, set] : switches)
      if (a == std::string("--") + name || a == std::string("-") + name) {
        set();
        known = true;
      }
    std::string v;
    for (size_t k = 0; !known && k < values.size(); ++k)
      if (flag(values[k].first, argc, argv, i, v, usage)) {
        values[k].second(v);
        known = true;
      }
    if (!known) usage_error("flag provided but not defined: " + a, usage);
  }
}

}  // namespace kvrelay::capture::cli
