// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The two time conversions the pipeline needs, in one place.

#include <chrono>
#include <cstdint>

namespace kvrelay {

/// Wall clock in µs (stats carry the daemon's clock; event age is measured against it).
inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// An engine batch time (float seconds) as the contract's timestamp_us: truncated toward zero,
/// and 0 ("now" to the server) when not positive (R08).
inline int64_t engine_ts_to_us(double ts) { return ts > 0 ? static_cast<int64_t>(ts * 1e6) : 0; }

}  // namespace kvrelay
