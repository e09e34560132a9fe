// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "net/http_url.hpp"

#include <charconv>
#include <system_error>
#include <utility>

namespace kvrelay {

std::optional<http_url> parse_http_url(std::string_view url, std::string* error,
                                       std::string_view what) {
  auto fail = [&](std::string why) -> std::optional<http_url> {
    if (error) {
      *error = "invalid " + std::string(what) + " \"" + std::string(url) + "\": " + std::move(why);
    }
    return std::nullopt;
  };
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) return fail("want http://host:port/path");
  std::string_view rest = url.substr(kScheme.size());
  std::size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) return fail("credentials are not supported");

  http_url out;
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail("unterminated IPv6 literal");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail("junk after IPv6 literal");
      port_text = after.substr(1);
      if (port_text.empty()) return fail("empty port");
    }
  } else {
    std::size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return fail("empty port");
    }
  }
  if (out.host.empty()) return fail("empty host");
  if (!port_text.empty()) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), v);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || v == 0 || v > 65535)
      return fail("bad port \"" + std::string(port_text) + "\"");
    out.port = static_cast<std::uint16_t>(v);
  }
  std::size_t hash = path.find('#');  // fragments never go on the wire
  if (hash != std::string_view::npos) path = path.substr(0, hash);
  out.path = path.empty() ? "/" : path.front() == '/' ? std::string(path) : "/" + std::string(path);
  return out;
}

}  // namespace kvrelay
