// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

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
// Idle cost: the poll waits on the sockets (and an eventfd that stop() writes) with no timeout
// unless something is due — a replay's inactivity deadline or retry, a tail probe — or reading is
// throttled (credits are not pollable: it looks again every 5 ms, under load only).
//
// zmq.hpp stays out of this header (pimpl): it is ~5k lines of templates that every includer of
// the actor shell would otherwise compile. A batch travels as the pipeline's raw_batch: one
// allocation holds the received ZMQ frame and the raw_batch that points into it (no copy).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "actors/ingress/ring_span.hpp"
#include "actors/ingress/sequence_tracker.hpp"
#include "base/log.hpp"
#include "durable/format/snapshot_log_io.hpp"
#include "messages/pipeline.hpp"

namespace zmq {
class context_t;
}

namespace kvrelay {

/// The tracker's payload size for the shared batches the source delivers (found by ADL).
inline size_t payload_bytes(const raw_batch_ptr& b) noexcept { return b ? b->size : 0; }
/// The tracker's hash of a shared batch's bytes (ST1; found by ADL).
inline uint64_t payload_digest(const raw_batch_ptr& b) noexcept {
  return b ? std::hash<std::string_view>{}(std::string_view(b->data, b->size)) : 0;
}

}  // namespace kvrelay

namespace kvrelay::ingress {

/// How the consumer hands back batches it finished with, without a lock: a monotonic count the
/// consumer adds to and the source reads. One line per pipeline, shared across data-path
/// restarts; a new source counts from the total it finds, so at most a dead consumer's late
/// credits (fewer than its in-flight budget) land on its successor.
class credit_line {
 public:
  void credit(uint64_t n) noexcept { credited_.fetch_add(n, std::memory_order_release); }
  uint64_t credited() const noexcept { return credited_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> credited_{0};
};

// -- what the source reports -------------------------------------------------------------------

/// A live seq skipped ahead. Informational: a history_lost notice follows if it cannot be
/// repaired.
struct gap_event {
  uint64_t first_missing = 0;
  uint64_t seen = 0;
  bool repairing = false;  // a replay was requested
};
/// The first batch of an engine incarnation is about to be delivered (tracker rule ST7): from seq
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

/// Batches in sequence order, never twice (raw_batch_ptr); lost history and new incarnations as
/// the notices the pipeline acts on (ingress_notice_ptr: the source already logged them); and
/// what the owner reports.
using ingress_event = std::variant<raw_batch_ptr, ingress_notice_ptr, gap_event, history_event,
                                   connected_event, disconnected_event, source_failed_event>;

// -- configuration -----------------------------------------------------------------------------

/// Which side of the live connection binds. The engine binds its PUB when its endpoint has a
/// wildcard (`*`), `::`, or is ipc:// / inproc:// (docs/spec/engine-wire.md §1); otherwise it dials, and
/// then we must bind. Our endpoint is the one *we* use, so `auto_detect` binds only for a
/// wildcard host (`*`, `0.0.0.0`, `[::]`) — an address you can only listen on — and connects to
/// anything else, like the reference sidecar. Force `bind` for a specific local address.
enum class bind_mode : uint8_t { auto_detect, connect, bind };
bool sub_binds(std::string_view endpoint, bind_mode mode) noexcept;

using log_fn = std::function<void(const log::record&)>;

struct zmq_source_options {
  std::string endpoint;         // live PUB endpoint (required)
  std::string replay_endpoint;  // engine ROUTER; empty = no replay (gaps are reported as losses)
  std::string topic;            // SUB prefix filter; "" = everything
  bind_mode mode = bind_mode::auto_detect;
  int rcvhwm = 100000;  // messages queued in ZMQ before the PUB drops (engine default hwm)
  /// The replay DEALER's receive queue in messages; 0 = unbounded. Bounded, a reply longer than
  /// it is cut at the engine's ROUTER and asked for again from where it stopped (ST10).
  int replay_rcvhwm = 0;
  /// ZMQ_RECONNECT_IVL of the SUB, constant like the reference (its default 1 s); 0 → 1 s.
  std::chrono::milliseconds reconnect_interval{1000};
  /// A replay with no reply for this long is abandoned (its DEALER closed) and retried: a
  /// failure (tracker rule ST10).
  std::chrono::milliseconds replay_timeout{2000};
  /// Once a reply has arrived, this much silence ends it: the engine sends a whole reply in one
  /// loop, so a pause means the rest (END included) was dropped past its high-water mark. The
  /// tracker asks for the rest at once (ST10: progress is not a failure). A pause of a slower,
  /// paced engine only costs a re-ask.
  std::chrono::milliseconds replay_stall_timeout{250};
  /// Retry delay after a failed replay: initial·2^(n−1), capped, with "equal jitter" (uniform in
  /// [d/2, d]) so many pipelines on one engine host do not retry in lockstep. Reset after an END.
  std::chrono::milliseconds replay_backoff_initial{100};
  std::chrono::milliseconds replay_backoff_max{5000};
  /// Tracker rule ST6: delay before the first re-ask after a catch-up that saw no live batch;
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
  /// Where the consumer returns credits; null → the source makes its own (see credit()).
  std::shared_ptr<credit_line> credits;
  /// The process' memory budget (base/memory_budget.hpp): each batch is charged to it, and the
  /// thread stops reading while it is spent (gate rules MG1-MG7). Null: no budget.
  std::shared_ptr<memory_budget> budget;
  /// Optional log hook (called on the ZMQ thread). Texts follow the reference sidecar.
  log_fn log;
  /// Optional: called on the ZMQ thread after a poll round that changed stats() (counters or
  /// connection state), at most once per round. Must be cheap (the shell sets a flag).
  std::function<void()> on_change;
  /// The durable index's delta log (durable/format/snapshot_log.hpp LF4): every batch the tracker
  /// delivers and every notice is appended before it goes to the consumer. Null: no log.
  std::shared_ptr<snapshot::log_writer> delta_log;
  /// A restore's log records (LR5), delivered in order before anything else (the SUB is not
  /// read and the tracker not started until they are all out); null: nothing to replay. The
  /// tracker's `resume` then continues from where they end.
  snapshot::log_replay_ptr replay_log;
  /// Where the ring span learnt from the engine's replies is published (ring_span.hpp), for
  /// the supervisor's snapshot interval; null: not published.
  std::shared_ptr<ring_gauge> ring;
};

/// Frame-level rejects and traffic, per reason (docs/spec/engine-wire.md WR1 and WR5).
struct frame_counters {
  uint64_t messages = 0;          // live multipart messages received
  uint64_t bytes = 0;             // live payload bytes accepted
  uint64_t bad_frame_count = 0;   // live message with ≠ 3 frames (and not unsequenced)
  uint64_t unsequenced = 0;       // [payload] / [topic, payload]: no seq (ATOM #869), delivered
  uint64_t bad_seq_size = 0;      // live seq frame not 8 bytes
  uint64_t reserved_seq = 0;      // live seq = eight 0xFF (the END marker) on a data batch
  uint64_t replay_malformed = 0;  // reply not [""(, topic), seq8, payload]
  uint64_t replay_bad_end = 0;    // END marker with a payload other than ATOM's [oldest, latest]
  uint64_t replay_send_failed = 0;
};

struct zmq_source_stats {
  tracker_counters tracker;
  frame_counters frames;
  uint64_t in_flight = 0;       // delivered, not yet credited
  uint64_t throttled = 0;       // poll rounds spent not reading because of in-flight
  uint64_t overloads = 0;       // times reading paused because the memory budget was spent (MG2)
  uint64_t paused_ns = 0;       // time spent paused by the budget (MG4)
  bool overloaded = false;      // paused by the budget now
  uint64_t connects = 0;        // SUB peer connects/accepts
  uint64_t disconnects = 0;
  bool connected = false;       // the SUB has at least one peer
  bool live = false;            // a live batch arrived: the subscription is in effect
  bool catching_up = false;     // a replay is outstanding or a tail probe is due (ST6)
  tracker_phase phase = tracker_phase::unstarted;
  ring_estimate ring;           // ring_span.hpp
  uint64_t log_replayed = 0;    // batches delivered from the delta log at start (LR5)
  bool log_replaying = false;   // the delta log's records are still being delivered
  std::string log_replay_error; // why the log replay stopped short ("" when it did not)
};

/// What the ingress shell needs of a source: the seam that lets it run without ZMQ in tests.
class event_source {
 public:
  using sink_fn = std::function<void(ingress_event)>;
  virtual ~event_source() = default;
  /// Starts delivering; false (with `error` filled) when the endpoint is unusable.
  virtual bool start(std::string* error) = 0;
  /// Stops delivering and joins whatever thread delivers (idempotent).
  virtual void stop() = 0;
  virtual bool running() const noexcept = 0;
  /// A consistent snapshot, safe from any thread.
  virtual zmq_source_stats stats() const = 0;
  /// A notice that clears the pipeline from outside the stream (the engine sleeps): the source
  /// logs it (delta log) and delivers it in order with its batches. False when this source
  /// cannot: the caller then sends it to the consumer itself.
  virtual bool inject(ingress_notice_ptr) { return false; }
};

/// Makes the source of one pipeline; the shell's default is a zmq_source.
using source_factory =
    std::function<std::unique_ptr<event_source>(zmq_source_options, event_source::sink_fn)>;

class zmq_source final : public event_source {
 public:
  zmq_source(zmq_source_options opts, sink_fn sink);
  ~zmq_source() override;  // stop()
  zmq_source(const zmq_source&) = delete;
  zmq_source& operator=(const zmq_source&) = delete;

  /// Starts the thread and waits until its sockets are bound/connected. False (with `error`
  /// filled) when the endpoint is unusable; the thread is then not running.
  bool start(std::string* error = nullptr) override;
  /// Stops and joins the thread (wakes its poll at once; idempotent, also from the destructor).
  void stop() override;
  bool running() const noexcept override;

  /// The consumer finished with `n` batches (the same as options.credits->credit(n)).
  void credit(uint32_t n) noexcept;

  /// The SUB's actual endpoint (ZMQ_LAST_ENDPOINT) after start(): the real port when bound to
  /// `tcp://host:*`.
  std::string sub_endpoint() const;

  /// A consistent snapshot, safe from any thread (refreshed once per poll round).
  zmq_source_stats stats() const override;
  /// Queued for the thread, which logs and delivers it between two batches.
  bool inject(ingress_notice_ptr n) override;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace kvrelay::ingress
