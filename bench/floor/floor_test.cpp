// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The floor's bookkeeping (the timings themselves are never asserted: the machine is shared).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/floor/floor.hpp"
#include "tools/fake-engine/wire_encoder.hpp"

namespace {

using kvrelay::bench::floor_input;
using kvrelay::bench::measure_floor;

floor_input two_batches(int64_t block_size) {
  floor_input in;
  in.block_size = block_size;
  for (uint64_t b = 0; b < 2; ++b) {
    kvrelay::fake::fake_event ev;
    ev.block_size = block_size;
    for (uint64_t i = 0; i < 3; ++i) ev.block_hashes.push_back(kvrelay::fake::fake_hash::u(b * 10 + i));
    for (int64_t t = 0; t < 3 * block_size; ++t) ev.token_ids.push_back(static_cast<uint32_t>(t + 7));
    in.tokens.insert(in.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
    kvrelay::fake::encode_options eo;
    eo.era = kvrelay::fake::wire_era::g;
    eo.ts = 1.5;
    in.payloads.push_back(kvrelay::fake::encode_batch({ev}, eo));
  }
  return in;
}

TEST(MeasureFloor, CountsEveryBlockAndByteOfValidPayloads) {
  const auto in = two_batches(16);
  const auto r = measure_floor(in, 2);
  EXPECT_EQ(r.blocks, 6u);
  EXPECT_EQ(r.payload_bytes, in.payloads[0].size() + in.payloads[1].size());
  EXPECT_TRUE(r.parse_ok);
  EXPECT_GT(r.visitor_parse_ns, 0);
  EXPECT_GT(r.xxh3_ns, 0);
  EXPECT_GT(r.decode_fp_ns, 0);
  EXPECT_DOUBLE_EQ(r.floor_ns, r.visitor_parse_ns + r.xxh3_ns);
  EXPECT_GE(r.index_ns, 0);
}

TEST(MeasureFloor, TheIndexFloorHoldsTheResidentSetAtMostThreeQuartersFull) {
  auto in = two_batches(16);
  auto r = measure_floor(in, 1);
  EXPECT_EQ(r.index_slots, 16u) << "6 blocks, all resident: the smallest table";
  EXPECT_DOUBLE_EQ(r.floor_index_ns, r.floor_ns + r.index_ns);
  in.resident = 2;  // more blocks than the engine holds: a table for 2, the oldest out
  r = measure_floor(in, 1);
  EXPECT_EQ(r.index_slots, 16u);
  // 3 blocks of 16 tokens repeated, so enough keys to need a bigger table than 16 slots.
  floor_input big;
  big.block_size = 1;
  for (uint32_t t = 0; t < 100; ++t) big.tokens.push_back(t);
  big.payloads = in.payloads;
  r = measure_floor(big, 1);
  EXPECT_EQ(r.index_slots, 256u) << "100 keys at most 3/4 full";
  big.resident = 12;
  r = measure_floor(big, 1);
  EXPECT_EQ(r.index_slots, 16u) << "12 keys at most 3/4 full";
}

TEST(MeasureFloor, FlagsAPayloadThatDoesNotParse) {
  auto in = two_batches(16);
  in.payloads.push_back(std::string("\xc1", 1));  // a reserved msgpack byte
  EXPECT_FALSE(measure_floor(in, 1).parse_ok);
}

TEST(MeasureFloor, NoBlocksGivesZerosWithoutTouchingPayloads) {
  floor_input in;
  in.block_size = 0;
  in.tokens = {1, 2, 3};
  in.payloads = {"garbage"};
  const auto r = measure_floor(in, 1);
  EXPECT_EQ(r.blocks, 0u);
  EXPECT_EQ(r.floor_ns, 0);
  EXPECT_EQ(r.payload_bytes, 7u);
}

TEST(MeasureFloor, JsonNamesEveryField) {
  const auto j = kvrelay::bench::to_json(measure_floor(two_batches(64), 1));
  for (const char* key : {"\"blocks\":6", "\"payload_bytes\"", "\"visitor_parse_ns\"", "\"unpack_ns\"",
                          "\"xxh3_ns\"", "\"floor_ns\"", "\"decode_fp_ns\"", "\"parse_ok\":true"}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << " in " << j;
  }
}

}  // namespace
