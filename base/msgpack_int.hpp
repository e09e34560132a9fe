// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// One reader of a msgpack integer (fixints and every sized int and uint): the wire decoder's
// fields and the ingress' ring-span check both read through it. The token arrays keep a faster
// path of their own (only non-negative u32 ids; actors/decoder/wire_decoder.cpp).

#include <cstddef>
#include <cstdint>

#include "base/big_endian.hpp"

namespace kvrelay {

/// A msgpack integer as it was on the wire: `bits` is its u64 two's complement and `negative`
/// says the value was below zero (only then does bits >= 2^63 mean a negative number).
struct msgpack_int {
  uint64_t bits = 0;
  bool negative = false;
  /// The value as int64, or false when it is an unsigned value above INT64_MAX.
  bool to_int64(int64_t& v) const noexcept {
    if (!negative && bits > uint64_t{INT64_MAX}) return false;
    v = static_cast<int64_t>(bits);
    return true;
  }
};

enum class msgpack_read : uint8_t { ok, not_an_integer, truncated };

/// Reads the integer that starts at p[0] of n bytes; on ok, `used` is its size in bytes. n == 0
/// is truncated.
inline msgpack_read read_msgpack_int(const uint8_t* p, size_t n, msgpack_int& v,
                                     size_t& used) noexcept {
  if (n == 0) return msgpack_read::truncated;
  const uint8_t b = p[0];
  if (b <= 0x7f || b >= 0xe0) {  // positive and negative fixint
    v = {static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(b))), b >= 0xe0};
    used = 1;
    return msgpack_read::ok;
  }
  if (b < 0xcc || b > 0xd3) return msgpack_read::not_an_integer;
  const size_t width = size_t{1} << ((b - 0xcc) & 3);  // 0xcc-0xcf uint8-64, 0xd0-0xd3 int8-64
  if (n < 1 + width) return msgpack_read::truncated;
  const uint8_t* q = p + 1;
  uint64_t u;
  int64_t s;
  switch (width) {
    case 1: u = q[0]; s = static_cast<int8_t>(q[0]); break;
    case 2: u = load_be16(q); s = static_cast<int16_t>(u); break;
    case 4: u = load_be32(q); s = static_cast<int32_t>(u); break;
    default: u = load_be64(q); s = static_cast<int64_t>(u); break;
  }
  v = b <= 0xcf ? msgpack_int{u, false} : msgpack_int{static_cast<uint64_t>(s), s < 0};
  used = 1 + width;
  return msgpack_read::ok;
}

}  // namespace kvrelay
