// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The engine side of the ZMQ wire (docs/spec/engine-wire.md §1): a PUB socket sending
// [topic, seq BE8, payload] and an optional ROUTER replay socket serving the last `buffer_steps`
// encoded batches. The replay side answers like vLLM's `_service_replay` (vllm-project/vllm,
// vllm/distributed/kv_events.py at 0181ea3) and SGLang's copy of it: every ring entry >= start,
// then END, in one tight loop into a ROUTER with ZMQ's default send high-water mark (1000
// messages per peer); a message that does not fit is dropped without a word, END included
// (sgl-project/sglang #38945). So kvrelay's tests see what production sees. Test hooks force the faults a subscriber must survive: skipped seqs (a gap),
// a seq restart at 0 (a new incarnation) and batches published but never retained (lost history).
//
// Thread-safety: publish() and the hooks may be called from any thread (one mutex guards the PUB
// socket and the ring). The ROUTER is owned by an internal thread that polls it. stop() is
// idempotent and joins that thread; the destructor calls it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvrelay::fake {

struct publisher_options {
  std::string bind = "tcp://127.0.0.1:*";  // live PUB endpoint (always bound); port '*' or 0 =
                                           // ephemeral; a [v6] host turns on IPv6
  std::string replay_bind;                 // ROUTER endpoint; empty = no replay service
  std::string topic;                       // first frame of every live message
  size_t buffer_steps = 10000;             // replay ring size, in batches
  int dp_rank = 0;                         // added to both ports (spec §1 data parallelism)
  /// vLLM ≥ v0.26 replies [topic, seq, payload] and ends with ["", END, ""]; older vLLM and all
  /// SGLang reply [seq, payload] and end with [END, ""].
  bool replay_topic_frames = false;
  /// ROCm ATOM #869 builds: no sequence frame, [payload] (or [topic, payload] with a topic),
  /// nothing kept for replay (that era had none). docs/producers.md.
  bool unsequenced = false;
  int sndhwm = 100000;
  /// The replay ROUTER's send high-water mark: ZMQ's default, which neither engine changes.
  int replay_sndhwm = 1000;
  /// Wait for room instead of dropping (what sglang #38945 proposes; no released engine does
  /// it). Only for a test that needs a whole reply; kvrelay must never rely on it.
  bool replay_lossless = false;
  int linger_ms = 500;  // how long close() may wait to flush queued live messages
  /// An XPUB instead of a PUB (the same on the wire), so wait_for_subscriber() can see a
  /// subscription arrive: kvrelay-replay starts a recorded stream only once someone listens.
  bool xpub = false;
  /// What the ring holds before the replay service answers its first request (history an
  /// engine had before a capture began, for kvrelay-replay): seq order not required, a seq
  /// given twice is kept once. retain() after construction would race with a request.
  std::vector<std::pair<uint64_t, std::string>> history;
};

/// The endpoint a DP rank binds (spec §1): tcp port + rank; an ephemeral port ('*' or 0) stays;
/// inproc://x → inproc://x_dp<rank>; anything else with rank > 0 is an error (nullopt).
std::optional<std::string> dp_endpoint(const std::string& endpoint, int rank);

class publisher {
 public:
  /// Binds the sockets; throws std::runtime_error when an endpoint cannot be bound.
  explicit publisher(publisher_options opt);
  ~publisher();
  publisher(const publisher&) = delete;
  publisher& operator=(const publisher&) = delete;

  /// The endpoints actually bound (ZMQ_LAST_ENDPOINT, so an ephemeral port is resolved).
  const std::string& live_endpoint() const noexcept;
  const std::string& replay_endpoint() const noexcept;  // empty without replay

  /// Sends one batch with the next seq and returns that seq. With retain = false the batch is
  /// sent live but never enters the replay ring (history a replay cannot recover).
  uint64_t publish(const std::string& payload, bool retain = true);
  /// Sends a live message exactly as given, any number of frames (a recorded stream may hold
  /// malformed ones). A well-formed [topic, seq BE8, payload] enters the replay ring under its
  /// own seq (unless retain is false): a seq below the last one is a new incarnation, which
  /// empties the ring as restart_incarnation() does. next_seq() follows it.
  void publish_frames(const std::vector<std::string_view>& frames, bool retain = true);
  /// Puts a batch in the replay ring, in seq order, without sending it (history the engine held
  /// before a capture began). A seq already there is kept as it was.
  void retain(uint64_t seq, std::string payload);
  /// With options.xpub: waits until a subscription arrives (or arrived before). False after
  /// `timeout`, and always without xpub.
  bool wait_for_subscriber(std::chrono::milliseconds timeout);
  /// Consumes `n` seqs without sending anything: the subscriber sees a gap.
  void skip(uint64_t n);
  /// A new engine incarnation: seq restarts at 0 and the ring is emptied (a restarted engine
  /// remembers nothing).
  void restart_incarnation();
  uint64_t next_seq() const;

  struct counters {
    uint64_t published = 0;
    uint64_t replay_requests = 0;    // well-formed requests served
    uint64_t replay_batches = 0;     // batches a reply covered (sent or dropped)
    uint64_t replay_dropped = 0;     // reply messages dropped at the high-water mark (END too)
    uint64_t replies_done = 0;       // requests whose reply loop has finished
    uint64_t ignored_requests = 0;   // malformed requests, dropped without a reply
  };
  counters stats() const;

  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay::fake
