// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Big-endian integers in bytes: the engine's sequence frames, msgpack's numbers, prefix hashes'
// wire form, the capture format. One implementation: a byte-wise expression the compiler turns
// into one load (or store) and a byte swap, with no alignment asked of the pointer.

#include <cstdint>

namespace kvrelay {

inline uint16_t load_be16(const void* at) noexcept {
  const auto* p = static_cast<const unsigned char*>(at);
  return static_cast<uint16_t>((uint16_t{p[0]} << 8) | uint16_t{p[1]});
}

inline uint32_t load_be32(const void* at) noexcept {
  const auto* p = static_cast<const unsigned char*>(at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

inline uint64_t load_be64(const void* at) noexcept {
  const auto* p = static_cast<const unsigned char*>(at);
  return (uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
}

/// An unsigned integer of `bytes` bytes (0 to 8), most significant first.
inline uint64_t load_be(const void* at, int bytes) noexcept {
  const auto* p = static_cast<const unsigned char*>(at);
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

inline void store_be64(uint64_t v, void* at) noexcept {
  auto* p = static_cast<unsigned char*>(at);
  for (int i = 7; i >= 0; --i) {
    p[i] = static_cast<unsigned char>(v & 0xff);
    v >>= 8;
  }
}

}  // namespace kvrelay
