// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// An HTTP/1.1 request head as the admin port's server reads it, and the response it writes:
// parsing and formatting only (no sockets), so it lives in the core and is tested as pure logic.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvrelay {

struct http_request {
  std::string method;
  std::string path;   // before '?', as sent
  std::string query;  // after '?'
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::vector<std::pair<std::string, std::string>> params;   // query, percent-decoded
  std::string body;
  std::string peer;  // the client's address
  /// The connection arrived at a loopback address of this host (127.0.0.0/8, ::1): it comes from
  /// this host or pod. False for one that reached a pod or host address.
  bool local_loopback = true;

  /// The header's value (name in any case), or nullptr.
  const std::string* header(std::string_view name) const;
  bool has_param(std::string_view name) const;
  /// The first value of the query parameter ("" when absent).
  std::string param(std::string_view name) const;
};

struct http_response {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

/// Parses "METHOD /path?query HTTP/1.x" and the header lines (without the final empty line) into
/// `out`. False on anything malformed. Pure; exposed for tests.
bool parse_http_head(std::string_view head, http_request& out, bool& keep_alive);

/// ASCII case-insensitive equality (header names and tokens).
bool http_iequals(std::string_view a, std::string_view b);

/// "Not Found" for 404, ...
const char* http_reason_phrase(int status);

/// Status line, Content-Type, Content-Length, Connection (close or keep-alive), body.
std::string serialize_http_response(const http_response& r, bool close);

}  // namespace kvrelay
