// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Delivery to one policy server: its credits, health, outage, probes and resyncs.
// Pure logic: no CAF, no timers, no clock of its own. The debouncer (debouncer_protocol.hpp)
// coalesces once and owns one of these per target; every unit it takes is offered to each, so a
// target that is down or slow costs the others nothing.
//
// Units and credits
//  TD1. A unit offered to a live target (healthy, no probe wanted or outstanding) queues in
//       order; at most `credits` units are with the emitter for this target at a time, the rest
//       wait here. A unit offered to a target that is not live is dropped (counted superseded):
//       the re-report after its probe brings the truth.
//  TD2. Lag bound: when the units waiting here pass `max_lag_bytes`, they are dropped and the
//       target resyncs (TD5): it stops queueing instead of holding memory for a server that does
//       not keep up, and gets the whole index once it answers again.
//
// Outage and resync
//  TD3. A failed unit (not the probe) marks the target unhealthy: one WARN, later failures are
//       summarised at most once per 10 s. What waits here is dropped. Until a probe succeeds
//       only the probe goes out: a unit that is only an ALL_CLEARED (the emitter fails the units
//       after a failure until a clear, contract U3).
//  TD4. The probe goes after a jittered backoff (backoff_initial doubling to backoff_max) and
//       again after each failure. A reconnect notice while unhealthy probes at once.
//  TD5. A resync (a reconnect, the lag bound, a join) is a probe while healthy. The probe's
//       success: the target is healthy and empty; on_result says so (probe_acked) and the
//       debouncer re-reports every resident block to it; the backoff starts over.
//  TD6. A reconnect notice while healthy (the server may have restarted empty) starts a resync,
//       at most one per reconnect_resync_interval: a notice within it, or while a probe is
//       outstanding (it may have reached the server before the restart), defers one resync to
//       the interval's end.
//  TD7. Units with an emitter that was replaced are lost: the target fails as in TD3.
//
// Shutdown
//  TD8. draining: no more probes or resyncs; a failure only marks the target failed. The final
//       clear (server.on_shutdown = clear) drops what waits here and goes whatever the health.
//
// Readiness
//  TD9. A target is up once a unit of it succeeded, until one fails; `answered` once either
//       happened. The debouncer applies the readiness policy over every target's `up`.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "actors/debouncer/debounce_actions.hpp"
#include "base/backoff.hpp"
#include "base/rate_limiter.hpp"

namespace kvrelay::debounce {

struct target_options {
  size_t credits = 2;                       // units with the emitter at a time (TD1)
  size_t max_lag_bytes = size_t{16} << 20;  // TD2
  ms backoff_initial{500};                  // TD4
  ms backoff_max{30'000};
  /// TD6: a full re-report is O(resident blocks); 5 s bounds how long a server that restarted
  /// empty goes without our hints.
  ms reconnect_resync_interval{5'000};
  uint64_t seed = 0;     // backoff jitter (0: random)
};

/// Cumulative, per target, for /metrics and the status.
struct target_counters {
  uint64_t units_sent = 0;
  uint64_t units_failed = 0;
  uint64_t units_superseded = 0;  // offered or queued units dropped (TD1, TD2, TD3)
  uint64_t entries_superseded = 0;
  uint64_t resyncs = 0;           // probes that succeeded (each followed by a re-report)
  uint64_t probes_failed = 0;
  uint64_t reconnects = 0;
  uint64_t lag_overflows = 0;     // TD2
};

/// The estimated memory of a unit waiting in a target's queue (TD2).
size_t unit_bytes(const emit_unit& u) noexcept;

class target_delivery {
 public:
  /// `serial` is unique among the debouncer's targets, ever: it tags this target's timer
  /// generations. A target that is not `live` joins with a resync (TD5).
  target_delivery(std::string name, uint32_t serial, target_options o, bool live, moment now,
                  actions& out);

  /// What a result meant to the debouncer.
  enum class outcome : uint8_t { none, ok, failed, probe_acked, final_answered };

  /// TD1, TD2: a unit taken from pending, `bytes` its unit_bytes.
  void offer(const emit_unit_ptr& u, size_t bytes, moment now, actions& out);
  /// TD8: the shutdown's ALL_CLEARED.
  void offer_final(const emit_unit_ptr& u, actions& out);
  outcome on_result(const emit_result& r, moment now, actions& out);
  /// The timer this target armed (gen_serial(gen) == serial()); stale generations are ignored.
  void on_timer(uint64_t gen, moment now, actions& out);
  void on_reconnected(moment now, actions& out);
  /// TD7.
  void on_emitter_replaced(moment now, actions& out);
  /// TD5: a resync for `why` (no-op while one runs or while draining).
  void start_resync(const char* why, moment now, actions& out);
  /// TD8.
  void drain();

  static uint32_t gen_serial(uint64_t gen) noexcept { return static_cast<uint32_t>(gen >> 32); }

  // -- what the debouncer and the status read ------------------------------------------------
  const std::string& name() const noexcept { return name_; }
  uint32_t serial() const noexcept { return serial_; }
  bool healthy() const noexcept { return healthy_; }
  /// TD1: units offered now queue.
  bool live() const noexcept { return healthy_ && !probe_wanted_ && probe_unit_ == 0; }
  /// Live with nothing waiting and a credit free: the debouncer may take another unit.
  bool wants_more() const noexcept {
    return live() && queue_.empty() && in_flight_.size() < opts_.credits;
  }
  bool resync_in_progress() const noexcept { return probe_wanted_ || probe_unit_ != 0; }
  /// Nothing waiting, nothing with the emitter.
  bool idle() const noexcept { return queue_.empty() && in_flight_.empty(); }
  bool up() const noexcept { return up_; }
  bool answered() const noexcept { return answered_; }
  /// Draining: something could not be delivered (keep mode's answer).
  bool drain_failed() const noexcept { return drain_failed_; }
  /// TD8: the final clear was answered (acknowledged or not).
  bool final_answered() const noexcept {
    return final_ == final_state::acked || final_ == final_state::failed;
  }
  bool final_acked() const noexcept { return final_ == final_state::acked; }
  size_t in_flight() const noexcept { return in_flight_.size(); }
  size_t queued_units() const noexcept { return queue_.size(); }
  size_t queued_bytes() const noexcept { return queued_bytes_; }
  const std::string& last_error() const noexcept { return last_error_; }
  const target_counters& stats() const noexcept { return c_; }

 private:
  struct queued {
    emit_unit_ptr unit;
    size_t bytes = 0;
  };

  void pump(moment now, actions& out);
  void send(emit_unit_ptr u, actions& out);
  void drop_queue();
  void failed(bool was_probe, const std::string& err, moment now, actions& out);
  void arm_probe(actions& out);
  void arm(ms delay, actions& out);
  void log(actions& out, log::level l, std::string text, std::vector<log::field> f = {});

  std::string name_;
  uint32_t serial_;
  target_options opts_;
  target_counters c_;

  std::deque<queued> queue_;
  size_t queued_bytes_ = 0;
  std::vector<uint64_t> in_flight_;

  bool healthy_ = true;
  bool up_ = false;
  bool answered_ = false;
  int64_t unhealthy_since_ms_ = 0;
  std::string last_error_;
  bool probe_wanted_ = false;
  uint64_t probe_unit_ = 0;
  uint64_t next_probe_id_ = 0;  // probes' ids have the top bit set: never a taken unit's id
  backoff backoff_;
  uint64_t timer_gen_ = 0;         // the low half of the current timer's generation
  bool deferred_resync_ = false;   // TD6
  std::optional<int64_t> last_resync_ms_;
  rate_limiter outage_log_{1, 10'000};
  uint64_t failed_since_log_ = 0;

  bool draining_ = false;
  bool drain_failed_ = false;
  enum class final_state : uint8_t { none, queued, sent, acked, failed };
  final_state final_ = final_state::none;
  emit_unit_ptr final_unit_;
};

}  // namespace kvrelay::debounce
