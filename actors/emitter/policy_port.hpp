// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What the emitter shell sends through: the policy server as the sequencer's actions need it
// (a clear, a unit's stream, one eviction, a stats update), and the inbox that brings
// completions and channel changes back from the RPC threads. The real port speaks gRPC
// (make_grpc_port, in grpc_port.cpp); a shell test gives the emitter a fake through
// emitter_options::make_port. No gRPC or CAF here: actor code and tests include it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/emitter/policy_client.hpp"
#include "actors/emitter/unit_sequencer.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay::emitter {

/// One finished call, or a change of the channel's state.
struct port_event {
  enum class kind : uint8_t { completed, channel };
  kind what = kind::completed;
  uint64_t call = 0;
  int32_t code = 0;          // grpc::StatusCode
  bool accepted = false;     // Ack.accepted
  int64_t latency_us = 0;    // issue → completion
  std::string message;       // status message ("" on success)
  channel_state state = channel_state::idle;
};

/// Hands port events from RPC threads to the actor: one wake-up per batch of them, not one per
/// event (under eviction load the per-completion wake-ups were half the emitter's cost).
class port_inbox {
 public:
  /// Any thread. Wakes the bound actor once `min_batch` events are waiting (1: at once), unless
  /// a wake-up is already on its way. A caller that defers (min_batch > 1) must push its last
  /// event of a burst with min_batch 1, or the events wait for someone else's wake-up.
  void push(port_event e, size_t min_batch = 1);
  /// Moves every waiting event into `out` (cleared first; each side keeps its own buffer).
  void take(std::vector<port_event>& out);
  /// Wakes the bound actor if events are waiting and no wake-up is on its way: ends a burst
  /// whose events were pushed deferred.
  void flush();
  /// Sets the wake-up (the actor's "completions are waiting" message); wakes at once if events
  /// are already waiting. An empty function unbinds (the actor is going away).
  void bind(std::function<void()> wake);

 private:
  std::mutex mu_;
  std::vector<port_event> items_;
  bool woken_ = false;  // a wake-up was sent and its take() has not run yet
  std::function<void()> wake_;
};

/// rpc mode's eviction completions, handed to the inbox `batch` at a time. A completion is
/// pushed (deferred) before it is counted done, and the one that counts the last call in flight
/// done flushes the inbox, so whatever order the RPC threads run in, the end of a burst wakes the
/// actor for all of it. (Deciding "the last one" before pushing lost a wake-up: completion Y
/// counted last and woke the actor, X was pushed just after with a deferral, and with nothing
/// left in flight nobody ever woke the actor for X: the emitter stalled with its units queued.)
class deferred_completions {
 public:
  deferred_completions(std::shared_ptr<port_inbox> inbox, size_t batch)
      : inbox_(std::move(inbox)), batch_(batch == 0 ? 1 : batch) {}
  /// Before the call starts (the issuing thread).
  void issued() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  /// Once per issued call, any thread: arrive(e), then depart(). A failure wakes the actor at
  /// once.
  void completed(port_event e) {
    arrive(std::move(e));
    depart();
  }
  /// The two steps of completed(), in this order for each call (public for the tests, which
  /// run every interleaving of several calls' steps).
  void arrive(port_event e);  // pushed to the inbox, deferred unless it failed
  void depart();              // counted done; the last call in flight flushes the inbox

 private:
  std::shared_ptr<port_inbox> inbox_;
  size_t batch_;
  std::atomic<size_t> in_flight_{0};
};

/// The serialized streams of the units being sent, shared by every port of one emitter: a unit
/// offered to several targets is encoded once, whichever port streams it first.
/// Opaque here (grpc_port.cpp); any thread.
class unit_encodings;
std::shared_ptr<unit_encodings> make_unit_encodings();

/// Who reports, and how the stream's messages are cut.
struct port_config {
  client_options client;
  replica_identity identity;
  /// Entries per CacheStateUpdate at most, and a size budget per message, well under gRPC's
  /// 4 MiB default receive limit (adapter names make entries long).
  size_t max_entries_per_message = 16384;
  size_t max_bytes_per_message = size_t{1} << 20;
  /// rpc mode: eviction completions wake the actor this many at a time (the last one in flight
  /// and failures at once). A quarter of the in-flight cap keeps the window full.
  size_t evict_wake_batch = 16;
  /// Shared with the other ports of the same emitter (same identity and cut); null: the port
  /// keeps its own.
  std::shared_ptr<unit_encodings> encodings;
};

class policy_port {
 public:
  virtual ~policy_port() = default;

  /// PublishEvent(ALL_CLEARED) at `ts_us`.
  virtual void clear(uint64_t call, int64_t ts_us) = 0;
  /// The unit's ReportCacheState stream: adds, downgrade groups, and with `with_expirations`
  /// its evictions as entries stamped expired_ts_us (unit_sequencer.hpp, UQ3).
  virtual void stream(uint64_t call, emit_unit_ptr unit, bool with_expirations) = 0;
  /// PublishEvent(PREFIX_EVICTED) of one eviction.
  virtual void evict(uint64_t call, const prefix_evict& ev) = 0;
  /// A stats-only CacheStateUpdate stamped `ts_us`.
  virtual void stats(uint64_t call, const stats_sample& s, int64_t ts_us) = 0;
  /// The deadline of the calls started after this one (unit_sequencer.hpp, UQ11).
  virtual void set_deadline(int64_t ms) = 0;

  /// Starts connecting and following the channel's state (port_event::kind::channel). Never
  /// blocks.
  virtual void start() = 0;
  /// Calls issued and not completed yet.
  virtual size_t in_flight() const = 0;
};

/// Builds the port an emitter talks through; nullptr with `error` set when it cannot.
using port_factory = std::function<std::unique_ptr<policy_port>(
    const port_config&, std::shared_ptr<port_inbox>, std::string& error)>;

/// The gRPC port (policy_client). Fails only on invalid client options.
std::unique_ptr<policy_port> make_grpc_port(const port_config& cfg,
                                            std::shared_ptr<port_inbox> inbox,
                                            std::string& error);

}  // namespace kvrelay::emitter
