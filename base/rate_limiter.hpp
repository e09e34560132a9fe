// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Lets through at most `burst` events per `period`, then counts what it suppressed and hands the
// count to the next event it lets through. The one rate limiter of kvrelay: per-batch warnings
// and per-RPC failures must never turn a flood into a log flood. Pure: time is an argument
// (steady milliseconds); `allow(suppressed)` reads the steady clock itself.

#include <chrono>
#include <cstdint>

namespace kvrelay {

class rate_limiter {
 public:
  explicit rate_limiter(uint32_t burst = 5, int64_t period_ms = 10'000)
      : burst_(burst == 0 ? 1 : burst), period_ms_(period_ms) {}

  /// True if one more event may pass at `now_ms`; `suppressed` then holds how many were held
  /// back since the last one that passed.
  bool allow(int64_t now_ms, uint64_t& suppressed) noexcept {
    if (!started_ || now_ms - window_start_ms_ >= period_ms_) {
      started_ = true;
      window_start_ms_ = now_ms;
      used_ = 0;
    }
    if (used_ < burst_) {
      ++used_;
      suppressed = suppressed_;
      suppressed_ = 0;
      return true;
    }
    ++suppressed_;
    return false;
  }

  bool allow(uint64_t& suppressed) noexcept { return allow(steady_ms(), suppressed); }

  /// Events held back since the last one let through.
  uint64_t suppressed() const noexcept { return suppressed_; }

  static int64_t steady_ms() noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  uint32_t burst_;
  int64_t period_ms_;
  bool started_ = false;
  int64_t window_start_ms_ = 0;
  uint32_t used_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace kvrelay
