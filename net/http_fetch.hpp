// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// A small HTTP GET client for an engine's HTTP server: the scraper's /metrics URL, and the
// discovery endpoints on the same origin (get(path)). One connection is kept alive across calls.
// Never throws; every failure comes back as an error string. httplib stays in the .cpp (Debian's
// build is a compiled library with ABI-changing defines: deps.md pitfall 9).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/http_url.hpp"

namespace kvrelay {

struct fetch_result {
  bool ok = false;       // a response arrived (any status); false = transport error
  int status = 0;        // HTTP status when ok
  std::string body;      // response body when ok (at most max_body bytes)
  std::string error;     // what went wrong when !ok: "GET <url>: <why>", or just <why>
  // The parts of `error`, for a caller that names the request itself (discovery) and would
  // otherwise have to take `error` apart.
  std::string url;  // the URL asked, as `error` shows it; empty when no request was made
  std::string why;  // the error without its request ("connection refused by ..."), when !ok
};

struct http_fetch_options {
  std::chrono::milliseconds timeout{5000};     // connect, and the whole request after it
  std::size_t max_body = 16u * 1024u * 1024u;  // bigger bodies are an error, not truncated
};

class http_fetcher {
 public:
  explicit http_fetcher(std::string url, http_fetch_options opts = {});
  ~http_fetcher();
  http_fetcher(http_fetcher&&) noexcept;
  http_fetcher& operator=(http_fetcher&&) noexcept;
  http_fetcher(const http_fetcher&) = delete;
  http_fetcher& operator=(const http_fetcher&) = delete;

  // Empty when the URL parsed; otherwise every get() fails with this text.
  const std::string& url_error() const;
  const std::string& url() const;

  // One GET of the URL given at construction. Blocks for at most about the configured timeout.
  // Never throws.
  fetch_result get();
  // One GET of another path (query allowed) on the same host and port, over the same kept-alive
  // connection, with the same timeout and body bound. A missing leading '/' is added.
  fetch_result get(std::string_view path);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay
