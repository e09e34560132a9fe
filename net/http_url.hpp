// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The one parser of plain-http URLs (the scraper's /metrics URL, discovery's engine URL). Pure,
// so it lives in kvrelay_core; the client that uses it (http_fetch.hpp) needs httplib and does not.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvrelay {

struct http_url {
  std::string host;  // name, IPv4, or IPv6 without brackets
  std::uint16_t port = 80;
  std::string path;  // starts with '/', query included
};

// Parses `http://host[:port][/path]`. Only plain http: engines serve /metrics without TLS, and a
// silent downgrade of an https URL would be worse than a clear error. Returns nullopt and sets
// *error ("invalid <what> \"<url>\": <why>") on anything else.
std::optional<http_url> parse_http_url(std::string_view url, std::string* error,
                                       std::string_view what = "metrics URL");

}  // namespace kvrelay
