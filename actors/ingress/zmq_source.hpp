#pragma once
// The ingress' ZMQ side: one std::thread that owns the SUB socket (live stream) and, when a replay
// endpoint is configured, a DEALER per replay request; it validates frames, runs the
// sequence_tracker and hands every outcome to a sink callback (STYLE.md C1, option (a)).
//
// Threading: the thread creates, polls and closes its own sockets (ZMQ sockets are not
// thread-safe). The context is shared (shared_ptr captured by the thread), so whoever terminates
// it first cannot pull it from under the thread; ETERM ends the thread quietly. The sink runs on
// the ZMQ thread and must be cheap (the actor shell anon_sends). The thread never blocks on its
// consumer: it stops *reading* once `max_in_flight` delivered batches are not yet credited, so
// ZMQ's rcvhwm fills and the engine's PUB drops — a loss that shows up as a sequence gap (and is
// repaired by replay where possible) instead of unbounded memory here.
//
// zmq.hpp stays out of this header (pimpl): it is ~5k lines of templates that every includer of
// the actor shell would otherwise compile. Payloads travel as `payload_ref`, which keeps the ZMQ
// frame alive without copying it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "actors/ingress/sequence_tracker.hpp"

namespace zmq {
class context_t;
}

namespace kvrelay::ingress {

/// Bytes owned by something else (a received ZMQ frame), shared and immutable. Copying is a
/// refcount increment, so actor messages can carry it.
class payload_ref {
 public:
  payload_ref() = default;
  payload_ref(std::shared_ptr<const void> owner, std::string_view bytes)
      : owner_(std::move(owner)), bytes_(bytes) {}
  /// A payload that owns a copy of `bytes` (tests, tools).
  static payload_ref copy_of(std::string_view bytes);

  std::string_view bytes() const noexcept { return bytes_; }
  const char* data() const noexcept { return bytes_.data(); }
  size_t size() const noexcept { return bytes_.size(); }
  bool empty() const noexcept { return bytes_.empty(); }

 private:
  std::shared_ptr<const void> owner_;
  std::string_view bytes_;
};

// -- what the source reports -------------------------------------------------------------------

/// One engine batch, in sequence order, never twice.
struct batch_event {
  uint64_t seq = 0;
  payload_ref payload;
  bool replayed = false;  // came from the replay endpoint rather than the live stream
};
/// A live seq skipped ahead. Informational: a history_lost follows if it cannot be repaired.
struct gap_event {
  uint64_t first_missing = 0;
  uint64_t seen = 0;
  bool repairing = false;  // a replay was requested
};
/// [first_missing, first_available) will never arrive. The pipeline must clear: a missed
/// BlockRemoved would leave a hint nothing can evict.
struct history_lost_event {
  uint64_t first_missing = 0;
  uint64_t first_available = 0;
  loss_reason reason = loss_reason::history_lost;
};
/// The live seq went backwards: a new engine process. The pipeline must clear.
struct incarnation_reset_event {
  uint64_t previous_seq = 0;
  uint64_t new_seq = 0;
};
/// The first batch of an engine incarnation is about to be delivered (tracker rule 7): from seq
/// 0 the index sees the engine process' whole history; from later, what it cached before is
/// unknown to the index.
struct history_event {
  uint64_t first_seq = 0;
  bool complete() const noexcept { return first_seq == 0; }
};
/// The SUB socket gained (TCP connected/accepted) or lost a peer.
struct connected_event {
  std::string endpoint;
};
struct disconnected_event {
  std::string endpoint;
};
/// The thread ended on an error other than context termination; the owner should restart it.
struct source_failed_event {
  std::string what;
};

using ingress_event =
    std::variant<batch_event, gap_event, history_lost_event, incarnation_reset_event,
                 history_event, connected_event, disconnected_event, source_failed_event>;

// -- configuration -----------------------------------------------------------------------------

/// Which side of the live connection binds. The engine binds its PUB when its endpoint has a
/// wildcard (`*`), `::`, or is ipc:// / inproc:// (engine-wire.md §1); otherwise it dials, and
/// then we must bind. Our endpoint is the one *we* use, so `auto_detect` binds only for a
/// wildcard host (`*`, `0.0.0.0`, `[::]`) — an address you can only listen on — and connects to
/// anything else, like the reference sidecar. Force `bind` for a specific local address.
enum class bind_mode : uint8_t { auto_detect, connect, bind };
bool sub_binds(std::string_view endpoint, bind_mode mode) noexcept;

enum class log_severity : uint8_t { debug, info, warn, error };
using log_fields = std::vector<std::pair<std::string, std::string>>;
using log_fn = std::function<void(log_severity, const std::string& msg, const log_fields&)>;

struct zmq_source_options {
  std::string endpoint;         // live PUB endpoint (required)
  std::string replay_endpoint;  // engine ROUTER; empty = no replay (gaps are reported as losses)
  std::string topic;            // SUB prefix filter; "" = everything
  bind_mode mode = bind_mode::auto_detect;
  int rcvhwm = 100000;  // messages queued in ZMQ before the PUB drops (engine default hwm)
  /// ZMQ_RECONNECT_IVL of the SUB, constant like the reference (its default 1 s); 0 → 1 s.
  std::chrono::milliseconds reconnect_interval{1000};
  /// A replay with no reply for this long is abandoned (its DEALER closed) and retried.
  std::chrono::milliseconds replay_timeout{2000};
  /// Retry delay after a failed replay: initial·2^(n−1), capped, with "equal jitter" (uniform in
  /// [d/2, d]) so many pipelines on one engine host do not retry in lockstep. Reset after an END.
  std::chrono::milliseconds replay_backoff_initial{100};
  std::chrono::milliseconds replay_backoff_max{5000};
  /// Tracker rule 6: delay before the first re-ask after a catch-up that saw no live batch;
  /// each further probe waits twice as long (8 probes: 25.5 s in all with the default).
  std::chrono::milliseconds tail_probe_initial{100};
  /// Delivered batches not yet credit()ed above which the thread stops reading.
  uint32_t max_in_flight = 1024;
  /// Messages taken per socket per poll wakeup: bounds the time between stop-flag checks.
  uint32_t max_drain = 256;
  /// Sequence tracking; replay_enabled is derived from replay_endpoint.
  tracker_options tracker;
  /// Shared ZMQ context; null → the source makes its own.
  std::shared_ptr<zmq::context_t> context;
  /// Optional log hook (called on the ZMQ thread). Texts follow the reference sidecar.
  log_fn log;
};

/// Frame-level rejects and traffic, per reason (engine-wire.md "SHOULD reject" 1 and 5).
struct frame_counters {
  uint64_t messages = 0;          // live multipart messages received
  uint64_t bytes = 0;             // live payload bytes accepted
  uint64_t bad_frame_count = 0;   // live message with ≠ 3 frames
  uint64_t bad_seq_size = 0;      // live seq frame not 8 bytes
  uint64_t reserved_seq = 0;      // live seq = eight 0xFF (the END marker) on a data batch
  uint64_t replay_malformed = 0;  // reply not [""(, topic), seq8, payload]
  uint64_t replay_bad_end = 0;    // END marker with a non-empty payload
  uint64_t replay_send_failed = 0;
};

struct zmq_source_stats {
  tracker_counters tracker;
  frame_counters frames;
  uint64_t in_flight = 0;       // delivered, not yet credited
  uint64_t throttled = 0;       // poll rounds spent not reading because of in-flight
  uint64_t connects = 0;        // SUB peer connects/accepts
  uint64_t disconnects = 0;
  bool connected = false;       // the SUB has at least one peer
  bool live = false;            // a live batch arrived: the subscription is in effect
  bool catching_up = false;     // a replay is outstanding or a tail probe is due (rule 6)
};

class zmq_source {
 public:
  using sink_fn = std::function<void(ingress_event)>;

  zmq_source(zmq_source_options opts, sink_fn sink);
  ~zmq_source();  // stop()
  zmq_source(const zmq_source&) = delete;
  zmq_source& operator=(const zmq_source&) = delete;

  /// Starts the thread and waits until its sockets are bound/connected. False (with `error`
  /// filled) when the endpoint is unusable; the thread is then not running.
  bool start(std::string* error = nullptr);
  /// Stops and joins the thread (returns within ~100 ms; idempotent, also from the destructor).
  void stop();
  bool running() const noexcept;

  /// The consumer finished with `n` batches.
  void credit(uint32_t n) noexcept;

  /// The SUB's actual endpoint (ZMQ_LAST_ENDPOINT) after start(): the real port when bound to
  /// `tcp://host:*`.
  std::string sub_endpoint() const;

  /// A consistent snapshot, safe from any thread (refreshed once per poll round).
  zmq_source_stats stats() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace kvrelay::ingress
