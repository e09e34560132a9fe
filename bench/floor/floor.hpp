// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The same-run floor of docs/spec/design-rules.md DR38: what any consumer of these payloads must
// pay at least — a msgpack-cxx parse of every payload plus XXH3 (content + chain) over the same
// token bytes — and, as a second floor, that plus the one cost no index design avoids: putting
// each block's key into a table of the resident size (a cache miss per block once it outgrows
// the cache), and taking the oldest out once the resident set is full. Measured over the exact payloads the end-to-end harness publishes, so the pipeline
// figures can be stated as ratios to it within one run on one (noisy, shared) machine.
// msgpack headers stay in the .cpp.

#include <cstdint>
#include <string>
#include <vector>

namespace kvrelay::bench {

struct floor_input {
  std::vector<std::string> payloads;  // whole EventBatch payloads (the third ZMQ frame)
  std::vector<uint32_t> tokens;       // every stored block's tokens, in order, block_size each
  int64_t block_size = 16;
  /// Blocks one engine holds at most (the loadgen's --capacity): the index floor's table holds
  /// this many keys, sized as ours is (at most 3/4 full), oldest out first beyond it. 0: every
  /// block stays (a table sized for all of them).
  uint64_t resident = 0;
};

/// Nanoseconds per stored block (best of `repeats` passes; the machine is shared and noisy, the
/// minimum is the least disturbed pass). Zero blocks gives all zeros.
struct floor_result {
  uint64_t blocks = 0;               // tokens.size() / block_size
  uint64_t payload_bytes = 0;
  double visitor_parse_ns = 0;       // msgpack::v2::parse with a visitor touching every scalar
  double unpack_ns = 0;              // msgpack::unpack into an object tree
  double xxh3_ns = 0;                // fingerprint::content + chain per block
  double floor_ns = 0;               // visitor_parse_ns + xxh3_ns: the floor the budget uses
  double index_ns = 0;               // a plain linear-probing insert of each block's key into a
                                     // presized table of `resident` keys (20-byte slots), and the
                                     // erase of the oldest key beyond it
  double floor_index_ns = 0;         // floor_ns + index_ns: the floor with the unavoidable insert
  uint64_t index_slots = 0;          // the index floor's table size
  double decode_fp_ns = 0;           // ours: wire_decoder + content + chain (no index)
  bool parse_ok = true;              // every payload parsed by both msgpack and our decoder
};

floor_result measure_floor(const floor_input& in, int repeats = 3);

/// One line of JSON with every field (keys as the struct's names).
std::string to_json(const floor_result& r);

}  // namespace kvrelay::bench
