// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/dns_target.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <system_error>

namespace kvrelay {

namespace {

bool is_ipv4(const std::string& s) {
  in_addr a{};
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}

bool is_ipv6(const std::string& s) {
  in6_addr a{};
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

bool parse_port(std::string_view text, uint16_t& port) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v == 0 || v > 65535) {
    return false;
  }
  port = static_cast<uint16_t>(v);
  return true;
}

// "host", "host:port", "[v6]" or "[v6]:port". Returns an error text, empty on success.
std::string split_host_port(std::string_view s, std::string& host, std::string_view& port_text,
                            bool& bracketed) {
  bracketed = false;
  port_text = {};
  if (!s.empty() && s.front() == '[') {
    std::size_t close = s.find(']');
    if (close == std::string_view::npos) return "unterminated IPv6 literal";
    host = std::string(s.substr(1, close - 1));
    bracketed = true;
    std::string_view after = s.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return "junk after IPv6 literal";
      port_text = after.substr(1);
      if (port_text.empty()) return "empty port";
    }
    if (!is_ipv6(host)) return "\"" + host + "\" is not an IPv6 address";
    return {};
  }
  std::size_t colon = s.rfind(':');
  host = std::string(s.substr(0, colon));
  if (colon != std::string_view::npos) {
    if (host.find(':') != std::string::npos) return "an IPv6 literal needs brackets: [addr]:port";
    port_text = s.substr(colon + 1);
    if (port_text.empty()) return "empty port";
  }
  return {};
}

// Letters, digits, '-' and '_' (SRV-style and some cluster names), labels of 1..63 bytes, a
// trailing dot allowed: what fits a query and what a Kubernetes name can be.
std::string check_name(const std::string& name) {
  std::string_view n = name;
  if (!n.empty() && n.back() == '.') n.remove_suffix(1);
  if (n.empty()) return "empty name";
  if (n.size() > 253) return "name longer than 253 characters";
  std::size_t label = 0;
  for (char c : n) {
    if (c == '.') {
      if (label == 0) return "empty label in \"" + name + "\"";
      label = 0;
      continue;
    }
    bool okc = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
    if (!okc) return "character '" + std::string(1, c) + "' in name \"" + name + "\"";
    if (++label > 63) return "label longer than 63 characters in \"" + name + "\"";
  }
  if (label == 0) return "empty label in \"" + name + "\"";
  return {};
}

}  // namespace

bool is_ip_literal(const std::string& s) { return is_ipv4(s) || is_ipv6(s); }

std::string host_port_text(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

bool is_dns_target(std::string_view s) { return s.substr(0, 4) == "dns:"; }

std::optional<dns_target> parse_dns_target(std::string_view s, std::string& why) {
  auto fail = [&](const std::string& reason) -> std::optional<dns_target> {
    why = reason;
    return std::nullopt;
  };
  if (!is_dns_target(s)) return fail("not a dns: target");
  std::string_view rest = s.substr(4);
  dns_target out;
  if (rest.substr(0, 2) == "//") {
    rest.remove_prefix(2);
    const std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
      return fail("no '/' after the nameserver");
    }
    const std::string_view authority = rest.substr(0, slash);
    rest.remove_prefix(slash + 1);
    if (!authority.empty()) {
      std::string_view port_text;
      bool bracketed = false;
      std::string err = split_host_port(authority, out.nameserver, port_text, bracketed);
      if (!err.empty()) return fail("nameserver: " + err);
      if (!is_ipv4(out.nameserver) && !is_ipv6(out.nameserver)) {
        return fail("nameserver \"" + out.nameserver + "\" is not an IP address");
      }
      if (!port_text.empty() && !parse_port(port_text, out.nameserver_port)) {
        return fail("bad nameserver port \"" + std::string(port_text) + "\"");
      }
    }
  }
  if (rest.empty()) return fail("no name to resolve");
  std::string_view port_text;
  bool bracketed = false;
  std::string err = split_host_port(rest, out.host, port_text, bracketed);
  if (!err.empty()) return fail(err);
  if (port_text.empty()) return fail("port required (name:port)");
  if (!parse_port(port_text, out.port)) return fail("bad port \"" + std::string(port_text) + "\"");
  if (!bracketed && !is_ipv4(out.host)) {
    err = check_name(out.host);
    if (!err.empty()) return fail(err);
  }
  return out;
}

std::string to_string(const dns_target& t) {
  std::string ns;
  if (!t.nameserver.empty()) ns = host_port_text(t.nameserver, t.nameserver_port);
  return "dns://" + ns + "/" + host_port_text(t.host, t.port);
}

}  // namespace kvrelay
