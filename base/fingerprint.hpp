// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The content fingerprint of docs/spec/policy-contract.md §3: XXH3-64 with seed 1337 over the
// block's token ids (u32 little-endian), chained block to block. The policy server's index keys
// are these values as 8 bytes big-endian. The adapter, tenant and hash scheme never enter it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/big_endian.hpp"

namespace kvrelay::fingerprint {

inline constexpr uint64_t seed = 1337;

/// Content hash of one block: XXH3-64(seed) over `count` token ids as u32 LE.
uint64_t content(const uint32_t* tokens, size_t count) noexcept;

/// One chain step: XXH3-64(seed) over prefix_le8 || content_le8.
uint64_t chain(uint64_t prefix, uint64_t content) noexcept;

/// Prefix hashes of every full block of `tokens`, chained from `parent` when has_parent (a parent
/// of 0 is a real parent). The partial tail is dropped; block_size <= 0 gives nothing.
std::vector<uint64_t> prefixes(const std::vector<uint32_t>& tokens, int64_t block_size,
                               bool has_parent = false, uint64_t parent = 0);

/// The 8-byte big-endian wire/key form of a prefix hash.
std::string to_be8(uint64_t v);
/// The same into a caller's buffer (no allocation: the emitter's per-entry hot path).
inline void write_be8(uint64_t v, char out[8]) noexcept { store_be64(v, out); }
uint64_t from_be8(const std::string& bytes);  // requires bytes.size() == 8

/// What a router puts in LookupRouteRequest.block_hashes / block_token_counts for a prompt:
/// BE8(prefix[i]) and, per block (not cumulative), block_size.
struct query_chain {
  std::vector<std::string> block_hashes;
  std::vector<int32_t> block_token_counts;
};
query_chain query(const std::vector<uint32_t>& prompt_tokens, int64_t block_size);

}  // namespace kvrelay::fingerprint
