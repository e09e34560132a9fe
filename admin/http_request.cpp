// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "admin/http_request.hpp"

#include <algorithm>
#include <cstring>

namespace kvrelay {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals_(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = lower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// application/x-www-form-urlencoded: '+' is a space, %XX a byte; a malformed escape stays as is.
std::string decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool is_token_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

}  // namespace

bool http_iequals(std::string_view a, std::string_view b) { return iequals_(a, b); }

const char* http_reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
  }
  return "Status";
}

std::string serialize_http_response(const http_response& r, bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + http_reason_phrase(r.status) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    (close ? "\r\nConnection: close\r\n\r\n" : "\r\nConnection: keep-alive\r\n\r\n");
  out += r.body;
  return out;
}

// -- request ----------------------------------------------------------------------------------

const std::string* http_request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals_(k, name)) return &v;
  return nullptr;
}

bool http_request::has_param(std::string_view name) const {
  return std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == name; });
}

std::string http_request::param(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  return {};
}

bool parse_http_head(std::string_view head, http_request& out, bool& keep_alive) {
  auto eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  head = eol == std::string_view::npos ? std::string_view{} : head.substr(eol + 2);
  // Request line: METHOD SP target SP HTTP/1.x
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0) return false;
  const auto method = line.substr(0, sp1);
  const auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const auto version = line.substr(sp2 + 1);
  if (!std::all_of(method.begin(), method.end(), is_token_char)) return false;
  if (target.empty() || target.front() != '/') return false;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
  out.method = std::string(method);
  const auto q = target.find('?');
  out.path = std::string(target.substr(0, q));
  out.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  for (std::string_view rest = out.query; !rest.empty();) {
    const auto amp = rest.find('&');
    const auto pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    out.params.emplace_back(decode(pair.substr(0, eq)),
                            eq == std::string_view::npos ? std::string() : decode(pair.substr(eq + 1)));
  }
  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head = eol == std::string_view::npos ? std::string_view{} : head.substr(eol + 2);
    if (line.empty()) continue;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;  // also obs-fold lines
    const auto name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char)) return false;
    std::string key(name);
    for (auto& c : key) c = lower(c);
    out.headers.emplace_back(std::move(key), std::string(trim(line.substr(colon + 1))));
  }
  const auto* conn = out.header("connection");
  keep_alive = version == "HTTP/1.1" ? !(conn && iequals_(*conn, "close"))
                                     : (conn && iequals_(*conn, "keep-alive"));
  return true;
}

}  // namespace kvrelay
