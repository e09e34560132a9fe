// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "config/values.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>
#include <cstdlib>
#include <limits>

#include "base/dns_target.hpp"

namespace kvrelay::config {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

bool has_space_or_control(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return true;
  }
  return false;
}

// A decimal port number in [lo, 65535]; no sign, no leading '+', at most 5 digits.
bool parse_port(std::string_view s, int lo, int& port) {
  if (s.empty() || s.size() > 5) return false;
  int v = 0;
  for (char c : s) {
    if (!is_digit(c)) return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > 65535) return false;
  port = v;
  return true;
}

bool valid_hostname(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '-' || c == '.' || c == '_')) return false;
  }
  return true;
}

bool valid_ipv6_literal(std::string_view h) {  // the part inside [ ]
  if (h.empty() || h.size() > 45) return false;
  for (char c : h) {
    auto u = static_cast<unsigned char>(c);
    if (!(std::isxdigit(u) || c == ':' || c == '.' || c == '%')) return false;
  }
  return h.find(':') != std::string_view::npos;
}

// Splits "host:port" / "[v6]:port". `host` excludes brackets. False when there is no port part.
bool split_host_port(std::string_view s, std::string_view& host, std::string_view& port,
                     bool& bracketed) {
  bracketed = false;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return false;
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
    bracketed = true;
    return true;
  }
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  host = s.substr(0, colon);
  port = s.substr(colon + 1);
  // An unbracketed IPv6 address ("::1:80") is ambiguous: require brackets.
  return host.find(':') == std::string_view::npos;
}

// Go's strconv underscoreOK: underscores only between digits (a base prefix counts as one).
bool underscores_ok(std::string_view s) {
  char saw = '^';
  size_t i = 0;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  bool hex = false;
  if (s.size() >= 2 && s[0] == '0' &&
      (lower(s[1]) == 'x' || lower(s[1]) == 'b' || lower(s[1]) == 'o')) {
    hex = lower(s[1]) == 'x';
    i = 2;
    saw = '0';
  }
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (is_digit(c) || (hex && std::isxdigit(static_cast<unsigned char>(c)))) {
      saw = '0';
    } else if (c == '_') {
      if (saw != '0') return false;
      saw = '_';
    } else {
      if (saw == '_') return false;
      saw = '!';
    }
  }
  return saw != '_';
}

}  // namespace

std::string parse_duration(std::string_view s, std::chrono::nanoseconds& out) {
  const std::string orig(s);
  auto bad = [&] { return "invalid duration \"" + orig + "\" (e.g. 100ms, 10s, 1m, 1h30m)"; };
  if (s.size() > 64) return bad();
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") {
    out = std::chrono::nanoseconds{0};
    return {};
  }
  if (s.empty()) return bad();
  // Accumulate nanoseconds as long double: inputs are at most 64 characters, and the result is
  // range-checked before it is narrowed.
  long double total_ns = 0;
  while (!s.empty()) {
    size_t i = 0;
    long double value = 0;
    bool any_digit = false;
    while (i < s.size() && is_digit(s[i])) {
      value = value * 10 + (s[i] - '0');
      any_digit = true;
      ++i;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      long double scale = 1;
      while (i < s.size() && is_digit(s[i])) {
        scale /= 10;
        value += (s[i] - '0') * scale;
        any_digit = true;
        ++i;
      }
    }
    if (!any_digit) return bad();
    size_t u = i;
    while (u < s.size() && !is_digit(s[u]) && s[u] != '.') ++u;
    std::string_view unit = s.substr(i, u - i);
    long double ns_per_unit = 0;
    if (unit == "ns") ns_per_unit = 1;
    else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") ns_per_unit = 1e3L;
    else if (unit == "ms") ns_per_unit = 1e6L;
    else if (unit == "s") ns_per_unit = 1e9L;
    else if (unit == "m") ns_per_unit = 60e9L;
    else if (unit == "h") ns_per_unit = 3600e9L;
    else return bad();
    total_ns += value * ns_per_unit;
    s.remove_prefix(u);
  }
  // Go's limit: a time.Duration is int64 nanoseconds (about 292 years).
  if (total_ns > static_cast<long double>(std::numeric_limits<int64_t>::max())) return bad();
  const auto ns = static_cast<int64_t>(total_ns);  // truncates toward zero
  out = std::chrono::nanoseconds{negative ? -ns : ns};
  return {};
}

std::string parse_duration(std::string_view s, std::chrono::milliseconds& out) {
  std::chrono::nanoseconds ns{0};
  if (auto err = parse_duration(s, ns); !err.empty()) return err;
  auto ms = ns.count() / 1000000;  // truncates toward zero
  if (ms == 0 && ns.count() > 0) ms = 1;
  out = std::chrono::milliseconds{ms};
  return {};
}

std::string format_duration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string text;
  if (ms < 0) {
    text = "-";
    // -INT64_MIN overflows; no parsed duration gets there (they are ns / 1e6).
    ms = ms == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -ms;
  }
  const int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, rest = ms % 1000;
  if (h) text += std::to_string(h) + "h";
  if (m) text += std::to_string(m) + "m";
  if (s) text += std::to_string(s) + "s";
  if (rest) text += std::to_string(rest) + "ms";
  return text;
}

std::string parse_go_int(std::string_view s, int64_t& out) {
  const std::string orig(s);
  auto bad = [&](const char* why) { return std::string(why) + " \"" + orig + "\""; };
  if (s.empty() || s.size() > 100) return bad("invalid integer");
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return bad("invalid integer");
  if (!underscores_ok(orig)) return bad("invalid integer");
  unsigned base = 10;
  if (s.size() >= 2 && s[0] == '0') {
    char p = lower(s[1]);
    if (p == 'x') base = 16, s.remove_prefix(2);
    else if (p == 'b') base = 2, s.remove_prefix(2);
    else if (p == 'o') base = 8, s.remove_prefix(2);
    else base = 8, s.remove_prefix(1);
  }
  uint64_t value = 0;
  bool any = false;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  for (char c : s) {
    if (c == '_') continue;
    unsigned digit;
    if (is_digit(c)) digit = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'z') digit = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'Z') digit = static_cast<unsigned>(c - 'A' + 10);
    else return bad("invalid integer");
    if (digit >= base) return bad("invalid integer");
    if (value > (limit - digit) / base) return bad("integer out of range");
    value = value * base + digit;
    any = true;
  }
  if (!any) return bad("invalid integer");
  out = negative ? static_cast<int64_t>(~value + 1) : static_cast<int64_t>(value);
  return {};
}

std::string parse_go_bool(std::string_view s, bool& out) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") {
    out = true;
    return {};
  }
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") {
    out = false;
    return {};
  }
  return "invalid boolean \"" + std::string(s) + "\" (allowed: true, false)";
}

std::string parse_size(std::string_view s, int64_t& out) {
  const std::string orig(s);
  auto bad = [&] {
    return "invalid size \"" + orig + "\" (a byte count, or a number with B, KB, MB, GB, TB, "
           "KiB, MiB, GiB, TiB)";
  };
  if (s.empty() || s.size() > 64) return bad();
  size_t i = 0;
  long double value = 0;
  bool any = false;
  while (i < s.size() && is_digit(s[i])) value = value * 10 + (s[i++] - '0'), any = true;
  if (i < s.size() && s[i] == '.') {
    ++i;
    long double scale = 1;
    while (i < s.size() && is_digit(s[i])) scale /= 10, value += (s[i++] - '0') * scale, any = true;
  }
  if (!any) return bad();
  while (i < s.size() && s[i] == ' ') ++i;
  std::string_view unit = s.substr(i);
  long double mult = 0;
  static constexpr struct { const char* name; long double mult; } units[] = {
      {"", 1},           {"B", 1},
      {"KB", 1e3L},      {"MB", 1e6L},         {"GB", 1e9L},         {"TB", 1e12L},
      {"KiB", 1024.0L},  {"MiB", 1048576.0L},  {"GiB", 1073741824.0L},
      {"TiB", 1099511627776.0L}};
  for (const auto& u : units)
    if (iequals(unit, u.name)) mult = u.mult;
  if (mult == 0) return bad();
  long double bytes = value * mult;
  if (bytes > static_cast<long double>(std::numeric_limits<int64_t>::max())) return bad();
  out = static_cast<int64_t>(bytes);
  return {};
}

std::string check_endpoint(std::string_view s) {
  const std::string allowed = " (allowed: tcp://host:port, ipc://path, inproc://name)";
  const std::string quoted = "\"" + std::string(s) + "\"";
  if (has_space_or_control(s)) return "invalid endpoint " + quoted + allowed;
  auto starts = [&](std::string_view p) { return s.substr(0, p.size()) == p; };
  if (starts("ipc://")) {
    if (s.size() == 6) return "invalid endpoint " + quoted + ": empty ipc path" + allowed;
    return {};
  }
  if (starts("inproc://")) {
    if (s.size() == 9) return "invalid endpoint " + quoted + ": empty inproc name" + allowed;
    return {};
  }
  if (!starts("tcp://")) return "invalid endpoint " + quoted + ": unsupported transport" + allowed;
  std::string_view host, port;
  bool bracketed = false;
  if (!split_host_port(s.substr(6), host, port, bracketed))
    return "invalid endpoint " + quoted + ": expected host:port" + allowed;
  int p = 0;
  if (!parse_port(port, 1, p))
    return "invalid endpoint " + quoted + ": port must be 1-65535" + allowed;
  bool host_ok = bracketed ? valid_ipv6_literal(host) : (host == "*" || valid_hostname(host));
  if (!host_ok) return "invalid endpoint " + quoted + ": bad host" + allowed;
  return {};
}

std::string check_url(std::string_view s) {
  const std::string quoted = "\"" + std::string(s) + "\"";
  const std::string allowed = " (allowed: http://host[:port]/path, https://host[:port]/path)";
  if (has_space_or_control(s)) return "invalid URL " + quoted + allowed;
  std::string_view rest;
  if (s.substr(0, 7) == "http://") rest = s.substr(7);
  else if (s.substr(0, 8) == "https://") rest = s.substr(8);
  else return "invalid URL " + quoted + ": scheme must be http or https" + allowed;
  auto end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  if (authority.find('@') != std::string_view::npos)
    return "invalid URL " + quoted + ": credentials in URLs are not supported" + allowed;
  std::string_view host = authority, port;
  bool bracketed = false;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return "invalid URL " + quoted + ": bad host" + allowed;
    host = authority.substr(1, close - 1);
    bracketed = true;
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "invalid URL " + quoted + ": bad host" + allowed;
      port = after.substr(1);
      if (port.empty()) return "invalid URL " + quoted + ": port must be 1-65535" + allowed;
    }
  } else if (auto colon = authority.find(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return "invalid URL " + quoted + ": port must be 1-65535" + allowed;
  }
  bool host_ok = bracketed ? valid_ipv6_literal(host) : valid_hostname(host);
  if (!host_ok) return "invalid URL " + quoted + ": missing or bad host" + allowed;
  int p = 0;
  if (!port.empty() && !parse_port(port, 1, p))
    return "invalid URL " + quoted + ": port must be 1-65535" + allowed;
  return {};
}

std::string check_listen_address(std::string_view s) {
  const std::string quoted = "\"" + std::string(s) + "\"";
  std::string_view host, port;
  bool bracketed = false;
  if (has_space_or_control(s) || !split_host_port(s, host, port, bracketed))
    return "invalid listen address " + quoted + " (expected host:port, e.g. 127.0.0.1:9464)";
  int p = 0;
  if (!parse_port(port, 0, p))
    return "invalid listen address " + quoted + ": port must be 0-65535";
  bool host_ok = bracketed ? valid_ipv6_literal(host) : (host.empty() || valid_hostname(host));
  if (!host_ok) return "invalid listen address " + quoted + ": bad host";
  return {};
}

std::string check_grpc_target(std::string_view s) {
  const std::string quoted = "\"" + std::string(s) + "\"";
  if (s.empty() || has_space_or_control(s))
    return "invalid server address " + quoted + " (expected host:port or dns:///host:port)";
  for (std::string_view scheme : {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:"}) {
    if (s.substr(0, scheme.size()) == scheme) {
      if (s.size() == scheme.size()) return "invalid server address " + quoted + ": empty target";
      return {};
    }
  }
  std::string_view host, port;
  bool bracketed = false;
  if (!split_host_port(s, host, port, bracketed))
    return "invalid server address " + quoted + " (expected host:port or dns:///host:port)";
  int p = 0;
  if (!parse_port(port, 1, p)) return "invalid server address " + quoted + ": port must be 1-65535";
  bool host_ok = bracketed ? valid_ipv6_literal(host) : valid_hostname(host);
  if (!host_ok) return "invalid server address " + quoted + ": bad host";
  return {};
}

std::string check_policy_target(std::string_view s) {
  if (auto err = check_grpc_target(s); !err.empty()) return err;
  if (!is_dns_target(s)) return {};
  // The resolver's own parser (base/dns_target.hpp): what is accepted here is what it resolves.
  std::string why;
  if (parse_dns_target(s, why)) return {};
  return "invalid server target \"" + std::string(s) + "\": " + why +
         " (a dns: target is dns:///name:port, or dns://NS_IP[:NS_PORT]/name:port to ask that "
         "DNS server)";
}

bool is_loopback_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || host.size() > 64) return false;
  if (iequals(host, "localhost") || iequals(host, "localhost.")) return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

std::string_view listen_host(std::string_view listen) {
  std::string_view host, port;
  bool bracketed = false;
  if (!split_host_port(listen, host, port, bracketed)) return {};
  return host;
}

std::string rank_endpoint(const std::string& endpoint, int64_t rank, std::string& out) {
  if (rank == 0) {
    out = endpoint;
    return {};
  }
  if (rank < 0) return "negative data-parallel rank";
  if (endpoint.rfind("inproc://", 0) == 0) {
    out = endpoint + "_dp" + std::to_string(rank);
    return {};
  }
  if (endpoint.rfind("tcp://", 0) != 0)
    return "endpoint \"" + endpoint + "\" cannot be used with dp_size > 1 (engines derive rank " +
           "endpoints only for tcp:// and inproc://)";
  auto colon = endpoint.rfind(':');
  int64_t port = std::strtoll(endpoint.c_str() + colon + 1, nullptr, 10);
  if (port + rank > 65535)
    return "endpoint \"" + endpoint + "\" + rank " + std::to_string(rank) + " exceeds port 65535";
  out = endpoint.substr(0, colon + 1) + std::to_string(port + rank);
  return {};
}

}  // namespace kvrelay::config
