// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The one msgpack integer reader (base/msgpack_int.hpp): every encoding at its edges, a truncated
// body, and what is not an integer.

#include "base/msgpack_int.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kvrelay {
namespace {

struct read_result {
  msgpack_read r;
  msgpack_int v;
  size_t used = 0;
};

read_result read(std::vector<uint8_t> bytes) {
  read_result out{};
  out.r = read_msgpack_int(bytes.data(), bytes.size(), out.v, out.used);
  return out;
}

void expect_value(std::vector<uint8_t> bytes, int64_t value, bool negative) {
  const auto x = read(bytes);
  ASSERT_EQ(x.r, msgpack_read::ok) << "tag " << int(bytes[0]);
  EXPECT_EQ(x.used, bytes.size()) << "tag " << int(bytes[0]);
  EXPECT_EQ(x.v.negative, negative) << "tag " << int(bytes[0]);
  int64_t v = 0;
  ASSERT_TRUE(x.v.to_int64(v));
  EXPECT_EQ(v, value) << "tag " << int(bytes[0]);
}

TEST(MsgpackInt, EveryEncodingAtItsEdges) {
  expect_value({0x00}, 0, false);
  expect_value({0x7f}, 127, false);
  expect_value({0xe0}, -32, true);
  expect_value({0xff}, -1, true);
  expect_value({0xcc, 0xff}, 255, false);
  expect_value({0xcd, 0x01, 0x02}, 0x0102, false);
  expect_value({0xce, 0xff, 0xff, 0xff, 0xff}, 0xffffffffLL, false);
  expect_value({0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, INT64_MAX, false);
  expect_value({0xd0, 0x80}, -128, true);
  expect_value({0xd0, 0x7f}, 127, false);
  expect_value({0xd1, 0x80, 0x00}, -32768, true);
  expect_value({0xd2, 0xff, 0xff, 0xff, 0xfe}, -2, true);
  expect_value({0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}, INT64_MIN, true);
}

TEST(MsgpackInt, AUint64AboveInt64IsKeptButNotAnInt64) {
  const auto x = read({0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe});
  ASSERT_EQ(x.r, msgpack_read::ok);
  EXPECT_EQ(x.v.bits, UINT64_MAX - 1);
  EXPECT_FALSE(x.v.negative);
  int64_t v = 0;
  EXPECT_FALSE(x.v.to_int64(v));
}

TEST(MsgpackInt, ABodyCutShortIsTruncatedAndNothingIsUsed) {
  for (uint8_t tag = 0xcc; tag <= 0xd3; ++tag) {
    const size_t width = size_t{1} << ((tag - 0xcc) & 3);
    std::vector<uint8_t> bytes(width - 1, 0x01);  // one byte short
    bytes.insert(bytes.begin(), tag);
    const auto x = read(bytes);
    EXPECT_EQ(x.r, msgpack_read::truncated) << "tag " << int(tag);
    EXPECT_EQ(x.used, 0u) << "tag " << int(tag);
    bytes.push_back(0x01);
    EXPECT_EQ(read(bytes).r, msgpack_read::ok) << "tag " << int(tag);
  }
  EXPECT_EQ(read({}).r, msgpack_read::truncated);
}

TEST(MsgpackInt, OtherTypesAreNotIntegers) {
  for (uint8_t tag : {0x80, 0x90, 0xa0, 0xc0, 0xc2, 0xc3, 0xc4, 0xca, 0xcb, 0xd4, 0xd9, 0xdc,
                      0xdf})
    EXPECT_EQ(read({tag, 0, 0, 0, 0, 0, 0, 0, 0}).r, msgpack_read::not_an_integer)
        << "tag " << int(tag);
}

}  // namespace
}  // namespace kvrelay
