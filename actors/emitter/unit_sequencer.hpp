// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The emitter's protocol: which RPC goes out when, and how each unit is answered
// (messages/pipeline.hpp, rules U1-U4, is the contract with the debouncer). Pure logic: no gRPC,
// no CAF, no clock of its own. The actor shell feeds it what happened (a unit or a stats request
// arrived, a call completed, the channel changed state) and executes the actions it returns
// (start a call, answer a unit, tell the reconnect listener, write a log line).
//
// Rules:
//  UQ1. One unit at a time, in arrival order (U1). The head unit's calls all complete before the
//       next unit starts, so nothing of a later unit can overtake anything of an earlier one.
//  UQ2. A unit with a clear starts with PublishEvent(ALL_CLEARED) alone; nothing else of it starts
//       before that call completed. A clear that fails abandons the unit: nothing after it is
//       sent and the unit fails (U3).
//  UQ3. Then the unit's ReportCacheState stream, one call: its adds, then its downgrade groups,
//       and in `expire` mode its evictions last, as entries stamped 1 µs after the epoch (U2).
//       A unit with nothing for the stream opens none.
//  UQ4. `rpc` mode: the evictions follow the stream, one PublishEvent(PREFIX_EVICTED) each, at
//       most `max_evictions_in_flight` at a time, issued as earlier ones complete. The first go
//       out right behind the stream, without waiting for its Ack (U2: after the unit's updates,
//       in the order issued): a key is in a unit once, so no eviction can overtake its own add,
//       and waiting would add a round trip to every unit (as the emitter before this one did
//       not either).
//  UQ5. The first failed call of a unit stops it: nothing more of it is issued, calls already in
//       flight are awaited, and the unit is answered with ok = false, sent = true. An outage
//       therefore costs one window of calls per unit, not one call per eviction.
//  UQ6. After a failed unit every unit that reaches the head without a clear is answered at once
//       with ok = false, sent = false (nothing on the wire), until a unit that starts with a clear
//       arrives (the debouncer's resync); that one runs normally (U3).
//  UQ7. Every unit is answered exactly once (U4), in arrival order.
//  UQ8. Stats requests go out at once, beside the units (they are no part of the ordering and
//       not held back by UQ6: one per scrape interval is what tells a healthy server apart); each
//       is answered ok only when the call succeeded and the Ack said accepted.
//  UQ9. Channel: once the channel was READY, any other state means the transport was lost (a
//       server restart, a keepalive failure: gRPC goes to IDLE or TRANSIENT_FAILURE; CONNECTING
//       straight after READY only means a state was missed in between); the next READY after a
//       loss is a reconnect, and the listener is told (the server may have restarted empty). The
//       first READY is not a reconnect. A call that succeeded proves the channel was READY even
//       when the watch never saw it (a connection lost before the watch's thread looked): a loss
//       seen after it counts.
//  UQ10. Failed calls are logged rate limited per kind (one line per `log_period_ms`, carrying
//       how many were held back); completions of calls the sequencer does not know (from before
//       a reset) are ignored.
//  UQ11. Deadline back-off. A call issued at the current deadline that ends in
//       DEADLINE_EXCEEDED doubles the deadline of every call issued after it, up to
//       `max_deadline_scale` times the configured `deadline_ms`; a call issued at the current
//       deadline that succeeds in under a quarter of it halves it, never below the configured
//       one. Calls already in flight keep theirs, and a burst of timeouts of calls issued at one
//       deadline doubles it once. Each change is a set_deadline action, emitted before any call
//       it applies to. Why: a server slower than the deadline for a unit (the reference walks
//       every key after every message: ~0.1 s at 1 M keys) would fail every unit, and every
//       resync's re-report, forever; with the back-off the calls wait long enough and the resync
//       converges.
//  UQ12. `rpc` mode, a unit with restores (U5): once every eviction of the unit completed, and
//       none failed, one more ReportCacheState stream carries the restores, so they land after
//       the base-model evictions that swept them (a PublishEvent's Ack comes after the server
//       applied it). A unit without restores costs no extra round trip.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "base/log.hpp"
#include "base/rate_limiter.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay::emitter {

/// How evictions travel (U2). `expire` is the default: it costs the reference server one keyed
/// upsert per eviction, where a PREFIX_EVICTED sweeps every key of its index.
enum class eviction_mode : uint8_t { expire, rpc };
const char* to_string(eviction_mode m) noexcept;

/// grpc_connectivity_state, without gRPC.
enum class channel_state : uint8_t { idle, connecting, ready, transient_failure, shutdown };
const char* to_string(channel_state s) noexcept;

/// What a call is, for the shell's metrics and logs.
enum class call_kind : uint8_t { clear, stream, evict, stats, restore };
/// "PublishEvent" or "ReportCacheState".
const char* method_of(call_kind k) noexcept;
/// grpc::StatusCode's name ("OK", "UNAVAILABLE", ...; "UNKNOWN" outside 0-16).
const char* status_code_name(int code) noexcept;

/// The timestamp_us of an expire-mode eviction: 1 µs after the epoch, so the server takes it as
/// an entry last seen decades ago (stale for any TTL). Not 0: 0 means "now".
inline constexpr int64_t expired_ts_us = 1;

struct sequencer_options {
  eviction_mode mode = eviction_mode::expire;
  // rpc mode: PublishEvent(PREFIX_EVICTED) calls in flight at most. More did not help: against
  // a gRPC sync server (the bench sink) 256 and 1024 were slower than 64 (bench_emitter).
  size_t max_evictions_in_flight = 64;
  int64_t log_period_ms = 10'000;  // UQ10: one failure line per kind per period
  int64_t deadline_ms = 5'000;      // UQ11: the configured per-call deadline (rpc_timeout)
  uint32_t max_deadline_scale = 16; // UQ11: the longest deadline is this many times deadline_ms
};

struct emit_action {
  enum class kind : uint8_t {
    start_clear,   // call, unit: PublishEvent(ALL_CLEARED) at unit->clear_ts_us
    start_stream,  // call, unit, with_expirations: the unit's ReportCacheState stream (UQ3), or
                   // (UQ12) a unit of the head's restores as adds
    start_evict,   // call, unit, index: PublishEvent(PREFIX_EVICTED) of unit->evicts[index]
    start_stats,   // call, ticket: the stats update of that request
    answer_unit,   // ticket, result
    answer_stats,  // ticket, ok
    reconnected,   // tell the reconnect listener (UQ9)
    log,           // log
    set_deadline,  // deadline_ms: the deadline of the calls started after this action (UQ11)
  };
  kind what = kind::answer_unit;
  uint64_t call = 0;
  uint64_t ticket = 0;
  /// The unit a start_* action belongs to (the RPC layer may keep it while its call runs).
  emit_unit_ptr unit;
  size_t index = 0;
  bool with_expirations = false;
  bool ok = false;
  emit_result result;
  log::record log;  // UQ10: the reference's text; fields code, err, suppressed
  int64_t deadline_ms = 0;
};
using emit_actions = std::vector<emit_action>;

/// What a completion was, for the shell's metrics (kvrelay_rpc_*, kvrelay_event_age_seconds).
struct completion_info {
  bool known = false;
  call_kind kind = call_kind::stream;
  /// The engine batch time of the adds the call carried (0: none), for the event age.
  int64_t adds_ts_us = 0;
};

struct sequencer_counters {
  uint64_t units_ok = 0;
  uint64_t units_failed = 0;      // sent, at least one call failed
  uint64_t units_unsent = 0;      // failed without anything on the wire (UQ6)
  uint64_t calls_failed = 0;
  uint64_t reconnects = 0;
  uint64_t deadline_raised = 0;   // UQ11: times the deadline was doubled
};

class unit_sequencer {
 public:
  explicit unit_sequencer(sequencer_options opts = {});

  /// A unit arrived; `ticket` comes back with its answer.
  void on_unit(uint64_t ticket, emit_unit_ptr unit, emit_actions& out);
  /// A stats request arrived; `ticket` comes back with its answer.
  void on_stats(uint64_t ticket, emit_actions& out);
  /// A call finished (code = grpc::StatusCode, 0 = OK) after `latency_us` (issue to
  /// completion, for UQ11). `now_ms` is a steady clock for UQ10.
  completion_info on_completed(uint64_t call, int code, const std::string& message,
                               bool accepted, int64_t now_ms, emit_actions& out,
                               int64_t latency_us = 0);
  /// The channel's connectivity changed (UQ9).
  void on_channel(channel_state s, emit_actions& out);

  size_t queued_units() const { return queue_.size(); }
  size_t calls_in_flight() const { return calls_.size(); }
  /// UQ6 is in force: units without a clear are failed unsent.
  bool holding_back() const { return poisoned_; }
  channel_state channel() const { return channel_; }
  /// The deadline of calls started now (UQ11).
  int64_t deadline_ms() const { return opts_.deadline_ms * scale_; }
  const std::string& last_error() const { return last_error_; }
  const sequencer_counters& counters() const { return c_; }
  const sequencer_options& options() const { return opts_; }

 private:
  enum class phase : uint8_t { idle, clearing, evicting, restoring };
  struct queued {
    uint64_t ticket;
    emit_unit_ptr unit;
  };
  struct call_rec {
    call_kind kind;
    uint64_t ticket;  // stats only
    uint32_t scale;   // UQ11: the deadline scale it was issued at
  };

  void pump(emit_actions& out);
  void start_call(call_kind k, size_t index, emit_actions& out);
  void issue_evictions(emit_actions& out);
  void finish_head(emit_actions& out);
  void fail_unsent(emit_actions& out);
  void log_failure(call_kind k, int code, const std::string& message, int64_t now_ms,
                   emit_actions& out);
  void adjust_deadline(const call_rec& rec, int code, int64_t latency_us, emit_actions& out);

  sequencer_options opts_;
  std::deque<queued> queue_;
  absl::flat_hash_map<uint64_t, call_rec> calls_;
  uint64_t next_call_ = 1;

  // The head unit's progress.
  phase phase_ = phase::idle;
  size_t unit_calls_ = 0;   // head calls in flight
  size_t evicts_in_flight_ = 0;
  size_t next_evict_ = 0;
  bool stopped_ = false;    // UQ5: a call of the head failed
  uint32_t failed_ = 0;
  std::string unit_error_;

  uint32_t scale_ = 1;      // UQ11: calls start with deadline_ms * scale_
  bool poisoned_ = false;   // UQ6
  channel_state channel_ = channel_state::idle;
  bool was_ready_ = false;  // UQ9
  bool lost_ = false;

  std::string last_error_;
  rate_limiter log_limits_[3];
  sequencer_counters c_;
};

}  // namespace kvrelay::emitter
