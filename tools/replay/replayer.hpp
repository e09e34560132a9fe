// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// kvrelay-replay's engine: serves a capture (tools/capture/kvcap.hpp) the way the engine did.
// The live records go out on a PUB (an XPUB, to see the first subscriber) at the recorded pace
// scaled by `speed` (0 = as fast as possible), each exactly as captured, malformed ones
// included; with a replay endpoint a ROUTER answers replay requests like an engine
// (docs/spec/engine-wire.md §1) from a ring that holds, from before the first request can be
// answered, the capture's replay replies (the history the engine had before the capture began),
// plus every live batch sent so far. A live seq going backwards (an engine restart in the
// capture) empties the ring again. The fake engine's publisher does the ZMQ work; this class
// only decides what to send when.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/error.hpp"

namespace kvrelay::fake {
class publisher;
}

namespace kvrelay::capture {

struct replay_options {
  std::string in;                                // the capture file (required)
  std::string bind = "tcp://127.0.0.1:5557";    // PUB; port '*' or 0 = ephemeral
  std::string replay_bind;                      // ROUTER; "" = no replay service
  double speed = 1.0;                           // 1 = as recorded, 2 = twice as fast, 0 = max
  /// Reply in the v0.26 [topic, seq, payload] form; unset = as the capture's own replies were
  /// (or the older form when it has none).
  std::optional<bool> replay_topic_frames;
  std::chrono::milliseconds wait_subscriber{10000};  // 0 = start at once
  /// run() sends nothing until this file exists ("" = no wait), then waits for a subscriber: a
  /// script starts the subscriber, sees it caught up with the ring, then creates the file.
  std::string go_file;
  std::chrono::milliseconds linger{2000};  // keep answering replay requests after the end
  /// Moves every batch's engine timestamp (the envelope's first element, a float64) by the time
  /// between the capture and now, so an old capture's updates are not stale to a policy server
  /// that expires entries by their timestamps. Payloads of another shape pass unchanged.
  bool shift_timestamps = false;
};

/// Adds `seconds` to an EventBatch's timestamp in place: an array envelope whose first element
/// is a float64 (every engine era). False, and `payload` untouched, for anything else.
bool shift_batch_timestamp(std::string& payload, double seconds);

struct replay_stats {
  uint64_t live_sent = 0;       // live records sent (well formed or not)
  uint64_t history = 0;         // replay-reply batches in the ring from the start
  bool truncated_capture = false;
  bool subscriber_seen = false;
};

class replayer {
 public:
  /// Reads the whole capture and binds the sockets, the replay ring already holding the
  /// capture's history; a failure names the bad file or endpoint.
  static outcome<std::unique_ptr<replayer>> create(replay_options o);
  ~replayer();
  replayer(const replayer&) = delete;
  replayer& operator=(const replayer&) = delete;

  /// The endpoints actually bound (ephemeral ports resolved).
  const std::string& live_endpoint() const;
  const std::string& replay_endpoint() const;  // "" without replay

  /// Plays the capture, then lingers; returns early when `stop` is set.
  void run(const std::atomic<bool>& stop);
  /// Live records sent so far (readable while run() runs).
  uint64_t sent() const noexcept { return sent_.load(std::memory_order_relaxed); }
  uint64_t live_records() const noexcept;
  const replay_stats& stats() const noexcept { return stats_; }

 private:
  replayer() = default;
  void shift_timestamps();  // finds t0_; moves every timestamp when the options say so
  struct contents;
  int64_t t0_ = 0;  // the first live record's receive time
  replay_options opt_;
  std::unique_ptr<contents> c_;
  std::unique_ptr<fake::publisher> pub_;
  replay_stats stats_;
  std::atomic<uint64_t> sent_{0};
};

}  // namespace kvrelay::capture
