// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// kvrelay-capture's loop: a SUB socket on the engine's live endpoint (every topic under the
// prefix, every message whatever its shape) and, with a replay endpoint, one DEALER request for
// everything the engine's ring holds (start seq 0), sent once the first live message arrived so
// ring and stream overlap (or after `replay_after` on an idle engine). Every message goes to the
// capture file with its receive time, until a bound (bytes, time, messages) or stop is reached.
// The SUB binds instead of dialing when the endpoint is tcp://*:port (as kvrelay's ingress).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "base/error.hpp"

namespace kvrelay::capture {

struct capture_options {
  std::string endpoint;         // the engine's PUB (required)
  std::string replay_endpoint;  // its replay ROUTER; "" = live only
  std::string topic;            // SUB prefix; "" = every topic
  std::string out;              // the capture file (required)
  uint64_t max_bytes = 256ull << 20;           // the file never grows past this
  std::chrono::milliseconds max_duration{0};   // 0 = until stopped
  uint64_t max_messages = 0;                   // live messages; 0 = no bound
  std::chrono::milliseconds replay_after{2000};    // ask the ring then even without live traffic
  std::chrono::milliseconds replay_timeout{5000};  // a silent replay is abandoned after this
};

struct capture_stats {
  uint64_t live = 0;           // live messages written
  uint64_t replay_replies = 0; // replay reply messages written (the END included)
  uint64_t bytes = 0;          // file size
  bool replay_asked = false, replay_ended = false;
  std::string stopped_by;      // "max_bytes", "max_duration", "max_messages", "stop"
};

class capturer {
 public:
  explicit capturer(capture_options o) : opt_(std::move(o)) {}
  /// Runs until a bound or `stop` is reached; the file is complete (flushed, closed) on return.
  outcome<void> run(const std::atomic<bool>& stop);
  /// Live messages written so far (readable from another thread while run() runs).
  uint64_t live_messages() const noexcept { return live_.load(std::memory_order_relaxed); }
  /// The seq of the last well-formed live message written, -1 before the first.
  int64_t last_seq() const noexcept { return last_seq_.load(std::memory_order_relaxed); }
  const capture_stats& stats() const noexcept { return stats_; }  // after run()

 private:
  capture_options opt_;
  capture_stats stats_;
  std::atomic<uint64_t> live_{0};
  std::atomic<int64_t> last_seq_{-1};
};

}  // namespace kvrelay::capture
