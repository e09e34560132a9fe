// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/ingress/ring_span.hpp"

#include <cstring>

namespace kvrelay::ingress {

namespace {
constexpr uint64_t window_ns = 1'000'000'000;  // RS4
}

void ring_span::on_live(uint64_t seq, uint64_t now_ns) noexcept {
  note(seq);
  if (!window_open_ || seq < window_seq_ || now_ns < window_ns_) {
    window_open_ = true;
    window_seq_ = seq;
    window_ns_ = now_ns;
    return;
  }
  const uint64_t dt = now_ns - window_ns_;
  if (dt < window_ns) return;
  const double sample =
      static_cast<double>(seq - window_seq_) / (static_cast<double>(dt) / 1e9);
  rate_ = rate_ > 0 ? 0.7 * rate_ + 0.3 * sample : sample;
  window_seq_ = seq;
  window_ns_ = now_ns;
}

void ring_span::on_request(uint64_t asked) noexcept {
  asked_ = asked;
  first_.reset();
  last_ = 0;
}

void ring_span::on_reply(uint64_t seq) noexcept {
  note(seq);
  if (!asked_) return;
  if (!first_) first_ = seq;
  if (seq > last_) last_ = seq;
  at_least(last_ - *first_ + 1);  // RS1: whatever happens next, the ring held these
}

void ring_span::on_reply_end(bool complete) noexcept {
  if (asked_ && first_ && complete && *first_ > *asked_) {
    // RS1: a whole reply of a ring that has dropped entries is its capacity.
    capacity_ = last_ - *first_ + 1;
    exact_ = true;
  }
  asked_.reset();
  first_.reset();
}

void ring_span::on_span(uint64_t oldest, uint64_t latest) noexcept {
  if (latest < oldest) return;
  note(latest);
  const uint64_t n = latest - oldest + 1;
  if (oldest > 0) {  // RS2
    capacity_ = n;
    exact_ = true;
  } else if (!exact_ && n > capacity_) {
    capacity_ = n;
  }
}

void ring_span::on_reset() noexcept {
  capacity_ = 0;
  exact_ = false;
  asked_.reset();
  first_.reset();
  seen_ = false;
  newest_ = 0;
  window_open_ = false;  // RS4 restarts with the new process' seqs; the rate is kept
}

ring_estimate ring_span::estimate() const noexcept {
  ring_estimate e;
  e.capacity = capacity_;
  e.exact = exact_;
  e.newest = newest_;
  e.batches_per_second = rate_;
  if (exact_ && capacity_ > 0) e.first_seq = newest_ + 1 >= capacity_ ? newest_ + 1 - capacity_ : 0;
  return e;
}

void ring_gauge::publish(const ring_estimate& e) noexcept {
  uint64_t bits = 0;
  std::memcpy(&bits, &e.batches_per_second, sizeof bits);
  capacity_.store(e.capacity, std::memory_order_relaxed);
  exact_.store(e.exact, std::memory_order_relaxed);
  newest_.store(e.newest, std::memory_order_relaxed);
  rate_bits_.store(bits, std::memory_order_relaxed);
}

ring_estimate ring_gauge::load() const noexcept {
  ring_estimate e;
  e.capacity = capacity_.load(std::memory_order_relaxed);
  e.exact = exact_.load(std::memory_order_relaxed);
  e.newest = newest_.load(std::memory_order_relaxed);
  const uint64_t bits = rate_bits_.load(std::memory_order_relaxed);
  std::memcpy(&e.batches_per_second, &bits, sizeof bits);
  if (e.exact && e.capacity > 0)
    e.first_seq = e.newest + 1 >= e.capacity ? e.newest + 1 - e.capacity : 0;
  return e;
}

}  // namespace kvrelay::ingress
