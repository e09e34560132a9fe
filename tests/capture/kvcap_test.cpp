// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/capture/kvcap.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "tools/replay/replayer.hpp"

namespace kvrelay::capture {
namespace {

std::string be8(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}

struct KvcapFile : ::testing::Test {
  std::string path = ::testing::TempDir() + "kvcap_test_" + std::to_string(::getpid()) + ".kvcap";
  void TearDown() override { std::remove(path.c_str()); }

  std::string bytes() const {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void set_bytes(const std::string& b) const { std::ofstream(path, std::ios::binary) << b; }

  void write_sample() {
    auto w = writer::create(path, R"({"format":"kvrelay-capture"})");
    ASSERT_TRUE(w) << w.error().render();
    const std::string seq = be8(7), payload("\x93\xcb\x41\xda\x4c\x1a\x38\x00\x00\x00\x90\x00", 12);
    ASSERT_TRUE(w.value()->write(record_kind::live, 1000, {"kv", seq, payload}));
    ASSERT_TRUE(w.value()->write(record_kind::replay_reply, 2000, {be8(3), "old"}));
    ASSERT_TRUE(w.value()->write(record_kind::replay_reply, 3000, {be8(~uint64_t{0}), ""}));
    ASSERT_TRUE(w.value()->write(record_kind::live, 4000, {"only one frame"}));
    ASSERT_TRUE(w.value()->close());
    EXPECT_EQ(w.value()->bytes(), bytes().size());
  }
};

TEST_F(KvcapFile, RoundTripsEveryRecordWithItsKindTimeAndFrames) {
  write_sample();
  auto all = read_all(path);
  ASSERT_TRUE(all) << all.error().render();
  EXPECT_EQ(all.value().meta_json, R"({"format":"kvrelay-capture"})");
  EXPECT_FALSE(all.value().truncated);
  const auto& r = all.value().records;
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].kind, record_kind::live);
  EXPECT_EQ(r[0].recv_unix_ns, 1000);
  EXPECT_EQ(r[0].frames[0], "kv");
  EXPECT_EQ(live_seq(r[0]), 7);
  uint64_t seq = 0;
  std::string_view payload;
  ASSERT_TRUE(reply_batch(r[1], seq, payload));
  EXPECT_EQ(seq, 3u);
  EXPECT_EQ(payload, "old");
  EXPECT_FALSE(reply_batch(r[2], seq, payload)) << "the END marker is no batch";
  EXPECT_EQ(live_seq(r[3]), -1) << "a malformed message is kept, as it came";
  EXPECT_EQ(r[3].frames, std::vector<std::string>{"only one frame"});
}

TEST_F(KvcapFile, HeaderIsMagicVersionFlagsAndLengthPrefixedJson) {
  write_sample();
  const auto b = bytes();
  EXPECT_EQ(b.substr(0, 8), std::string("\x89KVCAP\r\n", 8));
  EXPECT_EQ(b.substr(8, 4), std::string("\x00\x01\x00\x00", 4)) << "version 1, no flags";
  EXPECT_EQ(b.substr(12, 4), std::string("\x00\x00\x00\x1c", 4)) << "JSON length";
  // First record: length, kind 1, time 1000, 3 frames, then "kv" with its length.
  EXPECT_EQ(b.substr(16 + 28, 4 + 1 + 8 + 2 + 4 + 2),
            std::string("\x00\x00\x00\x2d\x01\x00\x00\x00\x00\x00\x00\x03\xe8\x00\x03"
                        "\x00\x00\x00\x02kv",
                        4 + 1 + 8 + 2 + 4 + 2));
}

TEST_F(KvcapFile, ACaptureCutMidRecordKeepsWhatCameBefore) {
  write_sample();
  const auto b = bytes();
  set_bytes(b.substr(0, b.size() - 5));
  auto all = read_all(path);
  ASSERT_TRUE(all) << all.error().render();
  EXPECT_TRUE(all.value().truncated);
  EXPECT_EQ(all.value().records.size(), 3u);
  auto strict = read_all(path, false);
  ASSERT_FALSE(strict);
  EXPECT_NE(strict.error().context.find("cut short"), std::string::npos) << strict.error().context;
}

TEST_F(KvcapFile, RefusesWhatIsNotACaptureOrIsNewer) {
  set_bytes("hello, this is a text file\n");
  auto r = reader::open(path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().context.find("not a kvrelay capture"), std::string::npos);
  write_sample();
  auto b = bytes();
  b[9] = 2;
  set_bytes(b);
  r = reader::open(path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().context.find("version 2"), std::string::npos) << r.error().context;
  b[9] = 1;
  b[12] = '\x7f';  // a header description of 2 GiB
  set_bytes(b);
  EXPECT_FALSE(reader::open(path));
}

TEST_F(KvcapFile, BoundsEveryCountAndLengthBeforeAllocating) {
  write_sample();
  const auto good = bytes();
  const size_t rec = 16 + 28;  // first record
  auto b = good;
  b[rec + 4] = 9;  // unknown kind
  set_bytes(b);
  EXPECT_FALSE(read_all(path));
  b = good;
  b[rec + 13] = '\x11';  // 4353 frames
  set_bytes(b);
  EXPECT_FALSE(read_all(path));
  b = good;
  b.replace(rec + 15, 4, std::string("\x7f\xff\xff\xff", 4));  // a 2 GiB first frame
  set_bytes(b);
  auto all = read_all(path);
  ASSERT_FALSE(all);
  EXPECT_NE(all.error().context.find("overruns"), std::string::npos) << all.error().context;
  b = good;
  b.replace(rec, 4, std::string("\x00\x00\x00\x05", 4));  // shorter than its fixed part
  set_bytes(b);
  EXPECT_FALSE(read_all(path));
}

TEST_F(KvcapFile, WriterRefusesMessagesOverTheBounds) {
  auto w = writer::create(path, "{}");
  ASSERT_TRUE(w);
  std::vector<std::string_view> many(17, "x");
  EXPECT_FALSE(w.value()->write(record_kind::live, 0, many));
  EXPECT_FALSE(writer::create(path, std::string(70000, ' ')));
}

TEST(ReplayTimestamps, ShiftsTheEnvelopesFloatAndLeavesOtherShapesAlone) {
  // [1764590000.0, [], 0]
  std::string batch("\x93\xcb\x41\xda\x4b\x60\x6c\x00\x00\x00\x90\x00", 12);
  ASSERT_TRUE(shift_batch_timestamp(batch, 86400.0));
  EXPECT_EQ(batch, std::string("\x93\xcb\x41\xda\x4b\xb4\xcc\x00\x00\x00\x90\x00", 12));
  std::string map_envelope("\x83\xa2ts\xcb\x41\xda\x4b\xa3\x6c\x00\x00\x00", 12);
  const auto before = map_envelope;
  EXPECT_FALSE(shift_batch_timestamp(map_envelope, 1.0));
  EXPECT_EQ(map_envelope, before);
  std::string shorty("\x92\xcb", 2);
  EXPECT_FALSE(shift_batch_timestamp(shorty, 1.0));
}

}  // namespace
}  // namespace kvrelay::capture
