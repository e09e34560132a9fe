// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/discovery/discovery_detail.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <utility>

namespace kvrelay::discovery::detail {

failure failed(std::string context) {
  return failure{ec::discovery_failed, std::move(context), {}};
}

failure context::fail(std::string_view path, std::string what) const {
  return failed("engine " + base.url + ": GET " + base.prefix + std::string(path) + ": " +
                std::move(what));
}

void context::note(std::string text) const {
  if (notes != nullptr) notes->push_back(std::move(text));
}

namespace {

// Deepest [ / { nesting outside strings, stopping early past `limit`. The body is bounded by the
// fetch; this bounds what the JSON parser and the value's destructor recurse through.
int nesting_depth(std::string_view s, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
         c == ':' || c == '%' || c == '*';
}

}  // namespace

std::optional<json> parse_json(std::string_view body, std::string* why) {
  if (nesting_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    *why = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
    return std::nullopt;
  }
  json v = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    *why = "not JSON";
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> as_int(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

std::optional<int64_t> rank_from_key(std::string_view key) {
  if (key.empty() || key.size() > 6) return std::nullopt;
  int64_t r = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    r = r * 10 + (c - '0');
  }
  return r;
}

std::optional<int64_t> as_rank(const json& v) {
  std::optional<int64_t> r;
  if (v.is_string())
    r = rank_from_key(v.get_ref<const std::string&>());
  else
    r = as_int(v);
  if (!r || *r < 0 || *r > 999999) return std::nullopt;
  return r;
}

const json* member(const json& o, std::string_view key) {
  auto it = o.find(key);
  return it == o.end() ? nullptr : &*it;
}

const json* member(const json& o, std::string_view key, std::string_view alt) {
  const json* v = member(o, key);
  return v != nullptr ? v : member(o, alt);
}

std::string show(const json& v) {
  // JSON text itself (strings keep their quotes, so 1 and "1" differ), ASCII only, bounded.
  std::string text = v.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  if (text.size() > 120) text = text.substr(0, 120) + "...";
  return text;
}

std::optional<tcp_parts> split_tcp(std::string_view endpoint, std::string* why) {
  constexpr std::string_view kScheme = "tcp://";
  if (endpoint.substr(0, kScheme.size()) != kScheme) {
    *why = "is not a tcp:// endpoint: discovery dials TCP only (configure it explicitly)";
    return std::nullopt;
  }
  std::string_view rest = endpoint.substr(kScheme.size());
  tcp_parts p;
  if (!rest.empty() && rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      *why = "has a malformed [IPv6]:port";
      return std::nullopt;
    }
    p.host = std::string(rest.substr(1, close - 1));
    p.port_text = std::string(rest.substr(close + 2));
  } else {
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      *why = "has no port";
      return std::nullopt;
    }
    p.host = std::string(rest.substr(0, colon));
    p.port_text = std::string(rest.substr(colon + 1));
  }
  if (!std::all_of(p.host.begin(), p.host.end(), host_char)) {
    *why = "has a host that is not a name or an address";
    return std::nullopt;
  }
  return p;
}

bool is_wildcard_host(std::string_view host) {
  return host.empty() || host == "*" || host == "0.0.0.0" || host == "::" || host == "[::]";
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host.substr(0, 4) == "127." || host == "::1" || host == "[::1]";
}

std::optional<int64_t> parse_port(std::string_view text, std::string* why) {
  if (text == "0" || text == "*") {
    *why = "has port " + std::string(text) +
           ": that is a bind request, not the port the engine bound (the engine reported its "
           "configuration; vLLM reports bound ports since vllm-project/vllm #55844)";
    return std::nullopt;
  }
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    *why = "has a port that is not a number";
    return std::nullopt;
  }
  const int64_t p = std::stoll(std::string(text));
  if (p < 1 || p > 65535) {
    *why = "has a port outside 1..65535";
    return std::nullopt;
  }
  return p;
}

std::string tcp_endpoint(std::string_view host, int64_t port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return "tcp://" + (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" +
         std::to_string(port);
}

outcome<std::string> dialable(const context& cx, std::string_view path, std::string_view what,
                              std::string_view host, int64_t port) {
  std::string h(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (!std::all_of(h.begin(), h.end(), host_char)) {
    return cx.fail(path,
                   std::string(what) + " host " + quote(h, 80) + " is not a name or an address");
  }
  if (port < 1 || port > 65535) {
    return cx.fail(path, std::string(what) + " port " + std::to_string(port) +
                             (port == 0 ? " is a bind request, not the port the engine bound"
                                        : " is outside 1..65535"));
  }
  if (is_wildcard_host(h)) h = cx.base.host;
  std::string ep = tcp_endpoint(h, port);
  if (is_loopback_host(h) && !is_loopback_host(cx.base.host)) {
    cx.note(std::string(what) + " " + ep + " is a loopback address but the engine URL's host is " +
            cx.base.host + ": reachable only from the engine's own host");
  }
  return ep;
}

outcome<std::string> dialable(const context& cx, std::string_view path, std::string_view what,
                              std::string_view endpoint) {
  std::string why;
  auto parts = split_tcp(endpoint, &why);
  if (!parts) return cx.fail(path, std::string(what) + " " + quote(endpoint, 120) + " " + why);
  auto port = parse_port(parts->port_text, &why);
  if (!port) return cx.fail(path, std::string(what) + " " + quote(endpoint, 120) + " " + why);
  return dialable(cx, path, what, parts->host, *port);
}

std::optional<failure> check_and_sort(const context& cx, std::string_view path,
                                      std::vector<publisher>& pubs) {
  if (pubs.size() > kMaxPublishers) {
    return cx.fail(path, std::to_string(pubs.size()) + " publishers; at most " +
                             std::to_string(kMaxPublishers) + " are supported");
  }
  std::stable_sort(pubs.begin(), pubs.end(),
                   [](const publisher& a, const publisher& b) { return a.dp_rank < b.dp_rank; });
  std::map<std::string, int64_t> seen;
  for (std::size_t i = 0; i < pubs.size(); ++i) {
    if (i > 0 && pubs[i].dp_rank == pubs[i - 1].dp_rank) {
      return cx.fail(path, "DP rank " + std::to_string(pubs[i].dp_rank) + " is listed twice");
    }
    auto [it, fresh] = seen.emplace(pubs[i].endpoint, pubs[i].dp_rank);
    if (!fresh) {
      return cx.fail(path, "DP ranks " + std::to_string(it->second) + " and " +
                               std::to_string(pubs[i].dp_rank) + " both advertise " +
                               pubs[i].endpoint);
    }
  }
  return std::nullopt;
}

}  // namespace kvrelay::discovery::detail
