// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// How far back the engine's replay ring reaches, learnt from its replies instead of taken from
// configuration: the ring is sized by the engine's operator (vLLM and SGLang `buffer_steps`,
// 10 000 by default, 50 in some deployments), and a rate that turns it over in a second makes a
// configured size meaningless. Pure: the ZMQ thread feeds it what it sees, with its clock; no
// sockets, no time of its own.
//
// Rules (RS = ring span):
//  RS1 A request's reply is the ring's entries from the seq asked (or its oldest, if later) to
//      its newest, in one loop (engine-wire §1). A reply that ends with its END marker and
//      started later than asked is the whole of a full ring: its length is the ring's capacity,
//      exact. Any other reply (it started at the seq asked, or it was cut short: the engine drops
//      what its socket's queue cannot hold) shows a lower bound: the ring holds at least that
//      many entries.
//  RS2 An END carrying the ring's [oldest, latest] (ROCm ATOM) says the same without a reply:
//      exact when oldest > 0 (entries were dropped), a lower bound otherwise.
//  RS3 A capacity belongs to one engine process: an incarnation reset forgets it (the restarted
//      engine may be configured otherwise).
//  RS4 The batch rate is measured on live seqs over windows of at least one second and smoothed
//      (new = 0.7 old + 0.3 window); 0 until a window has closed.
//  RS5 The span in seconds is the capacity over the rate; the ring's first seq now is the
//      newest seq seen minus the capacity, plus one (exact capacity only).
//  RS6 The span used (for the snapshot interval, durable/format/snapshot_policy.hpp RD8): the exact
//      capacity once learnt; else the configured `ring_batches`, or the lower bound when it is
//      larger (the ring is at least that long).

#include <atomic>
#include <cstdint>
#include <optional>

namespace kvrelay::ingress {

struct ring_estimate {
  uint64_t capacity = 0;      // RS1/RS2: exact, or the lower bound (0: nothing learnt)
  bool exact = false;
  std::optional<uint64_t> first_seq;  // RS5 (exact only)
  uint64_t newest = 0;        // the highest seq seen
  double batches_per_second = 0;      // RS4
  /// RS5 (0 when the rate or the capacity is unknown).
  double seconds() const noexcept {
    return capacity > 0 && batches_per_second > 0
               ? static_cast<double>(capacity) / batches_per_second
               : 0.0;
  }
  /// RS6.
  uint64_t used(uint64_t configured) const noexcept {
    if (exact && capacity > 0) return capacity;
    return capacity > configured ? capacity : configured;
  }
};

class ring_span {
 public:
  /// A live batch at steady time `now_ns` (RS4).
  void on_live(uint64_t seq, uint64_t now_ns) noexcept;
  /// A replay request from `asked` goes out (one at a time; a new one ends the last).
  void on_request(uint64_t asked) noexcept;
  /// One reply of the outstanding request.
  void on_reply(uint64_t seq) noexcept;
  /// RS1: the outstanding request's END arrived (`complete`), or its reply stopped short.
  void on_reply_end(bool complete) noexcept;
  /// RS2: an END naming the ring's [oldest, latest].
  void on_span(uint64_t oldest, uint64_t latest) noexcept;
  /// A batch from elsewhere (the delta log's replay) moves only the newest seq.
  void on_seen(uint64_t seq) noexcept { note(seq); }
  /// RS3.
  void on_reset() noexcept;
  ring_estimate estimate() const noexcept;

 private:
  void note(uint64_t seq) noexcept {
    if (!seen_ || seq > newest_) newest_ = seq;
    seen_ = true;
  }
  void at_least(uint64_t n) noexcept {
    if (!exact_ && n > capacity_) capacity_ = n;
  }
  bool seen_ = false;
  uint64_t newest_ = 0;
  uint64_t capacity_ = 0;
  bool exact_ = false;
  // RS1: the outstanding request.
  std::optional<uint64_t> asked_;
  std::optional<uint64_t> first_;
  uint64_t last_ = 0;
  // RS4: the open window.
  bool window_open_ = false;
  uint64_t window_seq_ = 0;
  uint64_t window_ns_ = 0;
  double rate_ = 0;
};

/// The estimate shared by the ZMQ thread (writer) and the pipeline's supervisor (reader):
/// relaxed atomics, each field on its own (a reader may see a new capacity with an old rate).
class ring_gauge {
 public:
  void publish(const ring_estimate& e) noexcept;
  ring_estimate load() const noexcept;

 private:
  std::atomic<uint64_t> capacity_{0};
  std::atomic<bool> exact_{false};
  std::atomic<uint64_t> newest_{0};
  std::atomic<uint64_t> rate_bits_{0};
};

}  // namespace kvrelay::ingress
