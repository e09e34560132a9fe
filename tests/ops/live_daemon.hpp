// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A daemon the way an operator meets it, for the tests of what operators look at (/metrics,
// the dashboard's and rules' metric names, the admin page): the e2e harness (fake engine with a
// replay ring, demo policy server, in-process daemon) with the admin port on a free loopback
// port and its crash endpoint on, the scraper reading a fake engine /metrics, and traffic that
// reaches every stage: stores and removals for the base model and a LoRA adapter, engine batch
// times (so event ages are measured), a malformed batch (a decode drop), an event at an unknown
// medium and, on request, a crashed and restarted actor. Every wait is bounded polling; nothing sleeps as an assertion.

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/fault_fixture.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/skip.hpp"

namespace kvrelay::stats_e2e {
class metrics_endpoint;
}

namespace kvrelay::ops {

struct live_options {
  std::string token;  // admin bearer token; "" = none
};

class live_daemon {
 public:
  explicit live_daemon(live_options o = {});
  ~live_daemon();

  /// Starts the daemon and waits until it decoded a live batch. False with `error()`.
  bool start();
  /// Publishes `rounds` rounds of stores, removals and LoRA traffic, then one malformed batch,
  /// an event at an unknown medium and a sentinel, and waits until the server holds prefixes, the decoder counted the drop,
  /// an event age was measured and the ingress published its counters. False with `error()`.
  bool drive(int rounds = 4);
  /// POST /debug/crash for `actor` of the pipeline, then waits until the supervisor counted the
  /// restart and the actor runs again (its /debug/tree state). False with `error()`.
  bool crash_and_wait(const std::string& actor);

  /// The admin port over HTTP, with the token unless told otherwise.
  faults::http_reply get(const std::string& path, bool with_token = true) const;
  faults::http_reply post(const std::string& path, bool with_token = true) const;
  uint16_t admin_port() const;
  std::string url(const std::string& path = "/") const;
  const std::string& pipeline() const;
  const std::string& error() const { return error_; }
  e2e::harness& harness() { return *h_; }

 private:
  live_options opt_;
  std::unique_ptr<stats_e2e::metrics_endpoint> engine_metrics_;
  faults::temp_dir state_dir_;  // the durable index's (its metric families are part of the scrape)
  std::unique_ptr<e2e::harness> h_;
  std::string error_;
  uint32_t next_token_ = 1;
};

/// Runs `args` (no shell) with a bound; the exit status (-1: did not finish in time, killed),
/// its stdout in `out` and its stderr in `err` (appended to `out` when `err` is null).
int run(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
        std::string& out, std::string* err = nullptr);

}  // namespace kvrelay::ops

