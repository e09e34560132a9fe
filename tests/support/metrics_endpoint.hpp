// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A fake engine /metrics endpoint on a real loopback HTTP socket (cpp-httplib, port 0), for the
// scraper's end-to-end tests. What it answers is switchable while it runs:
//   - a sticky answer (status + body) repeated on every request;
//   - one-shot answers queued in front of it, each served exactly once, in order (so a tick that
//     must be seen exactly once cannot be missed by a slow poller);
//   - a generator called with the request number (a counter that rises on every scrape);
//   - "hang": the request is held, never answered, until release() or stop().
// Thread-safe. httplib stays in the .cpp (Debian's build has ABI-changing defines).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kvrelay::stats_e2e {

struct http_answer {
  int status = 200;
  std::string body;
};

class metrics_endpoint {
 public:
  /// Binds 127.0.0.1:0 and serves GET /metrics. Throws std::runtime_error when it cannot bind.
  metrics_endpoint();
  ~metrics_endpoint();  // stop()
  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

  /// "http://127.0.0.1:<port>/metrics".
  std::string url() const;

  /// Every later request gets this answer (after any queued one-shot answers).
  void serve(int status, std::string body);
  /// Queues an answer served to exactly one request.
  void serve_once(int status, std::string body);
  /// Every later request gets gen(n), n = the 1-based number of the request.
  void serve_generated(std::function<http_answer(uint64_t)> gen);
  /// Holds every later request unanswered until release().
  void hang();
  /// Lets held requests (and later ones) go on with the sticky answer.
  void release();

  uint64_t requests() const;
  /// Requests currently held by hang().
  uint64_t held() const;
  /// When the first request arrived (steady clock); epoch when none did yet.
  std::chrono::steady_clock::time_point first_request() const;

  /// Releases held requests and stops the server. Idempotent.
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The contents of tests/fixtures/metrics/<name>; throws when unreadable.
std::string metrics_fixture(const std::string& name);

}  // namespace kvrelay::stats_e2e
