// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/fingerprint.hpp"

#include <xxhash.h>

#include <cstring>

namespace kvrelay::fingerprint {

namespace {

// Token ids and chain inputs are little-endian on the wire to the hash; this target is too, but
// say so once instead of relying on it silently.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "fingerprint inputs are little-endian; add byte swaps for big-endian hosts");

}  // namespace

uint64_t content(const uint32_t* tokens, size_t count) noexcept {
  return XXH3_64bits_withSeed(tokens, count * sizeof(uint32_t), seed);
}

uint64_t chain(uint64_t prefix, uint64_t content_hash) noexcept {
  unsigned char buf[16];
  std::memcpy(buf, &prefix, 8);
  std::memcpy(buf + 8, &content_hash, 8);
  return XXH3_64bits_withSeed(buf, sizeof buf, seed);
}

std::vector<uint64_t> prefixes(const std::vector<uint32_t>& tokens, int64_t block_size,
                               bool has_parent, uint64_t parent) {
  std::vector<uint64_t> out;
  if (block_size <= 0) return out;
  const size_t bs = static_cast<size_t>(block_size);
  const size_t blocks = tokens.size() / bs;
  out.reserve(blocks);
  bool chained = has_parent;
  uint64_t prev = parent;
  for (size_t i = 0; i < blocks; ++i) {
    const uint64_t c = content(tokens.data() + i * bs, bs);
    prev = chained ? chain(prev, c) : c;
    chained = true;
    out.push_back(prev);
  }
  return out;
}

std::string to_be8(uint64_t v) {
  std::string out(8, '\0');
  store_be64(v, out.data());
  return out;
}

uint64_t from_be8(const std::string& bytes) {
  return load_be(bytes.data(), static_cast<int>(bytes.size() < 8 ? bytes.size() : 8));
}

query_chain query(const std::vector<uint32_t>& prompt_tokens, int64_t block_size) {
  query_chain q;
  for (uint64_t p : prefixes(prompt_tokens, block_size)) {
    q.block_hashes.push_back(to_be8(p));
    q.block_token_counts.push_back(static_cast<int32_t>(block_size));
  }
  return q;
}

}  // namespace kvrelay::fingerprint
