// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Capped exponential backoff with "equal jitter": attempt n (from 1) waits a uniform time in
// [d/2, d] with d = min(max, initial · 2^(n−1)), so peers that fail together do not retry in
// lockstep. The one backoff of kvrelay (supervisor restarts, resyncs, replay retries). Pure: the
// caller owns the clock and decides when to wait.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace kvrelay {

class backoff {
 public:
  using ms = std::chrono::milliseconds;

  backoff(ms initial, ms max, uint64_t seed = std::random_device{}())
      : initial_(std::clamp(initial, ms(1), std::max(max, ms(1)))),
        max_(std::max(max, ms(1))),
        rng_(seed) {}

  /// The cap before jitter for attempt `n` (n >= 1).
  ms ceiling(uint32_t n) const noexcept {
    ms d = initial_;
    for (uint32_t i = 1; i < n && d < max_; ++i) d *= 2;  // doubling stops at the cap: no overflow
    return std::min(d, max_);
  }

  /// The delay for attempt `n` (n >= 1), jittered.
  ms delay(uint32_t n) {
    const auto d = ceiling(n).count();
    std::uniform_int_distribution<int64_t> pick(d / 2, d);
    return ms(pick(rng_));
  }

  /// The delay for the next attempt of this backoff's own sequence.
  ms next() { return delay(++attempts_); }
  /// Success: the next failure starts from `initial` again.
  void reset() noexcept { attempts_ = 0; }
  uint32_t attempts() const noexcept { return attempts_; }

 private:
  ms initial_;
  ms max_;
  std::mt19937_64 rng_;
  uint32_t attempts_ = 0;
};

}  // namespace kvrelay
