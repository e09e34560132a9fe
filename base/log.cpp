// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace kvrelay::log {

namespace {

std::atomic<level> g_level{level::info};
std::atomic<bool> g_json{true};
std::mutex g_mu;
std::function<void(level, const std::string&)> g_sink;  // guarded by g_mu

void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
}

std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  return buf;
}

}  // namespace

const char* to_string(level l) {
  switch (l) {
    case level::debug: return "DEBUG";
    case level::info: return "INFO";
    case level::warn: return "WARN";
    case level::error: return "ERROR";
  }
  return "INFO";
}

bool parse_level(std::string_view s, level& out) {
  if (s == "debug") out = level::debug;
  else if (s == "info") out = level::info;
  else if (s == "warn" || s == "warning") out = level::warn;
  else if (s == "error") out = level::error;
  else return false;
  return true;
}

void set_level(level l) { g_level.store(l); }
level current_level() { return g_level.load(std::memory_order_relaxed); }
void set_json(bool json) { g_json.store(json); }

void set_sink(std::function<void(level, const std::string&)> sink) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_sink = std::move(sink);
}

const std::string* record::find(std::string_view key) const {
  for (const auto& f : fields)
    if (f.key == key) return &f.value;
  return nullptr;
}

void write(const record& r, const std::vector<field>& leading) {
  if (!enabled(r.severity)) return;
  if (leading.empty()) return write(r.severity, r.message, r.fields);
  std::vector<field> all = leading;
  all.insert(all.end(), r.fields.begin(), r.fields.end());
  write(r.severity, r.message, all);
}

void write(level l, std::string_view msg, fields f) {
  write(l, msg, std::vector<field>(f.begin(), f.end()));
}

void write(level l, std::string_view msg, const std::vector<field>& f) {
  std::string line;
  line.reserve(128);
  if (g_json.load(std::memory_order_relaxed)) {
    line += "{\"time\":\"";
    line += timestamp();
    line += "\",\"level\":\"";
    line += to_string(l);
    line += "\",\"msg\":\"";
    append_escaped(line, msg);
    line += '"';
    for (const auto& x : f) {
      line += ",\"";
      append_escaped(line, x.key);
      line += "\":";
      if (x.quoted) {
        line += '"';
        append_escaped(line, x.value);
        line += '"';
      } else {
        line += x.value;
      }
    }
    line += '}';
  } else {
    line += timestamp();
    line += ' ';
    line += to_string(l);
    line += ' ';
    line += msg;
    for (const auto& x : f) {
      line += ' ';
      line += x.key;
      line += '=';
      line += x.value;
    }
  }
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_sink) {
    g_sink(l, line);
  } else {
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

}  // namespace kvrelay::log
