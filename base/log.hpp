// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Structured logging: one JSON object per line on stderr (or `text` for humans), with the
// reference sidecar's message texts so users' log queries keep working. Thread-safe; cheap when
// the level is filtered out. Tests install a capture sink to assert on what was logged.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvrelay::log {

enum class level : uint8_t { debug, info, warn, error };

const char* to_string(level l);
bool parse_level(std::string_view s, level& out);

/// One key/value of a log line. Numbers and booleans are written unquoted in JSON.
struct field {
  std::string key;
  std::string value;
  bool quoted = true;

  field(std::string k, std::string v) : key(std::move(k)), value(std::move(v)) {}
  field(std::string k, const char* v) : key(std::move(k)), value(v) {}
  field(std::string k, std::string_view v) : key(std::move(k)), value(v) {}
  field(std::string k, bool v) : key(std::move(k)), value(v ? "true" : "false"), quoted(false) {}
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  field(std::string k, T v) : key(std::move(k)), value(std::to_string(v)), quoted(false) {}
};

using fields = std::initializer_list<field>;

void set_level(level l);
level current_level();
void set_json(bool json);

/// Replaces the output (stderr) with `sink`, which receives each formatted line; an empty
/// function restores stderr. For tests.
void set_sink(std::function<void(level, const std::string&)> sink);

void write(level l, std::string_view msg, fields f = {});
void write(level l, std::string_view msg, const std::vector<field>& f);

inline bool enabled(level l) { return l >= current_level(); }

/// A line a pure machine returns for its shell to write (machines never write one themselves):
/// the one record type, so every machine reports in the same vocabulary.
struct record {
  level severity = level::info;
  std::string message;
  std::vector<field> fields;

  /// The value of field `key`, or nullptr.
  const std::string* find(std::string_view key) const;
};

/// Writes `r` (when its level is enabled) with `leading` before its own fields: the shell says
/// who it is (the replica, the pipeline).
void write(const record& r, const std::vector<field>& leading = {});
inline void debug(std::string_view m, fields f = {}) {
  if (enabled(level::debug)) write(level::debug, m, f);
}
inline void info(std::string_view m, fields f = {}) {
  if (enabled(level::info)) write(level::info, m, f);
}
inline void warn(std::string_view m, fields f = {}) {
  if (enabled(level::warn)) write(level::warn, m, f);
}
inline void error(std::string_view m, fields f = {}) {
  if (enabled(level::error)) write(level::error, m, f);
}

}  // namespace kvrelay::log
