// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The snapshot file format, rule by rule (durable/format/snapshot_format.hpp SF1-SF6).

#include "durable/format/snapshot_format.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <string>

namespace kvrelay::snapshot {
namespace {

pipeline_snapshot sample(size_t blocks = 3) {
  pipeline_snapshot s;
  s.who = identity{"vllm-0", "llama", "t1", "vllm", "tcp://10.0.0.1:5557", "kv", 1};
  s.engine.start_time = 1767225600.25;
  s.engine.lifetime_id = "3f2a";
  s.next_seq = 12345;
  s.history_from = 0;
  s.epoch = 7;
  s.incarnation = 2;
  s.generation = 5;
  s.taken_at_us = 1767225700000000;
  s.adapters = {{1, "sql-lora"}, {7, "chat"}};
  s.group_kinds = {{0, 1}, {1, 4}};
  partition_image base;
  for (size_t i = 0; i < blocks; ++i)
    base.blocks.push_back(block_record{0x9e3779b97f4a7c15ULL * (i + 1), i * 31 + 5,
                                       static_cast<uint32_t>(16 * (i + 1)) | (1u << 24)});
  base.byte_blocks.push_back(bytes_record{std::string(32, '\x07'), 99, 32 | (1u << 27)});
  partition_image lora;
  lora.adapter = "sql-lora";
  lora.blocks.push_back(block_record{0, 1, 16 | (1u << 24)});  // the zero hash is a hash too
  s.partitions = {base, lora};
  return s;
}

void expect_same(const pipeline_snapshot& a, const pipeline_snapshot& b) {
  EXPECT_EQ(a.who, b.who);
  EXPECT_EQ(a.engine.start_time, b.engine.start_time);
  EXPECT_EQ(a.engine.lifetime_id, b.engine.lifetime_id);
  EXPECT_EQ(a.next_seq, b.next_seq);
  EXPECT_EQ(a.history_from, b.history_from);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.incarnation, b.incarnation);
  EXPECT_EQ(a.generation, b.generation);
  EXPECT_EQ(a.taken_at_us, b.taken_at_us);
  EXPECT_EQ(a.adapters, b.adapters);
  EXPECT_EQ(a.group_kinds, b.group_kinds);
  ASSERT_EQ(a.partitions.size(), b.partitions.size());
  for (size_t p = 0; p < a.partitions.size(); ++p) {
    const auto& x = a.partitions[p];
    const auto& y = b.partitions[p];
    EXPECT_EQ(x.adapter, y.adapter);
    ASSERT_EQ(x.blocks.size(), y.blocks.size());
    for (size_t i = 0; i < x.blocks.size(); ++i) {  // packed: by value, not by reference
      EXPECT_EQ(uint64_t{x.blocks[i].hash}, uint64_t{y.blocks[i].hash});
      EXPECT_EQ(uint64_t{x.blocks[i].fingerprint}, uint64_t{y.blocks[i].fingerprint});
      EXPECT_EQ(uint32_t{x.blocks[i].meta}, uint32_t{y.blocks[i].meta});
    }
    ASSERT_EQ(x.byte_blocks.size(), y.byte_blocks.size());
    for (size_t i = 0; i < x.byte_blocks.size(); ++i) {
      EXPECT_EQ(x.byte_blocks[i].hash, y.byte_blocks[i].hash);
      EXPECT_EQ(x.byte_blocks[i].fingerprint, y.byte_blocks[i].fingerprint);
      EXPECT_EQ(x.byte_blocks[i].meta, y.byte_blocks[i].meta);
    }
  }
}

TEST(SnapshotFormat, RoundTripsEveryField) {
  const auto s = sample();
  const auto d = decode(encode(s));
  ASSERT_TRUE(d.snapshot) << d.detail;
  expect_same(*d.snapshot, s);
}

TEST(SnapshotFormat, AbsentOptionalsStayAbsent) {
  auto s = sample(0);
  s.engine.start_time.reset();
  s.history_from.reset();
  const auto d = decode(encode(s));
  ASSERT_TRUE(d.snapshot);
  EXPECT_FALSE(d.snapshot->engine.start_time);
  EXPECT_FALSE(d.snapshot->history_from);
}

// SF5
TEST(SnapshotFormat, EncodingIsDeterministicAndLittleEndian) {
  const auto a = encode(sample()), b = encode(sample());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.substr(0, 8), std::string("KVRSNAP\0", 8));
  EXPECT_EQ(a.substr(8, 4), std::string("\x02\0\0\0", 4)) << "version 2, little-endian";
}

// SF5: the streamed encoding is the same bytes, whatever the piece size.
TEST(SnapshotFormat, StreamedEncodingIsTheSameBytesInAnyPieces) {
  const auto s = sample(1000);
  const std::string whole = encode(s);
  for (size_t piece : {size_t{64}, size_t{100}, size_t{4096}, size_t{1} << 20}) {
    std::string joined;
    size_t calls = 0;
    encode(s, [&](std::string_view p) {
      joined.append(p.data(), p.size());
      ++calls;
    }, piece);
    EXPECT_EQ(joined, whole) << piece;
    if (piece == 64) {
      EXPECT_GT(calls, 100u) << "never the whole file at once";
    }
  }
}

// SF6: 20 bytes per int-keyed block, whatever the count.
TEST(SnapshotFormat, ABlockCostsTwentyBytes) {
  const auto small = encode(sample(10)).size();
  const auto big = encode(sample(10010)).size();
  EXPECT_EQ(big - small, 10000u * block_record_bytes);
  EXPECT_LT(small, 600u);
}

// SF1
TEST(SnapshotFormat, AnotherMagicIsNotASnapshotAndAnotherVersionIsRefused) {
  auto bytes = encode(sample());
  std::string other = bytes;
  other[0] = 'X';
  EXPECT_EQ(decode(other).why, fault::not_a_snapshot);
  EXPECT_EQ(decode("").why, fault::not_a_snapshot);
  EXPECT_EQ(decode("{\"json\": true}").why, fault::not_a_snapshot);
  std::string v1 = bytes;
  v1[8] = 1;  // the first release's format: no delta log generation
  const auto d = decode(v1);
  EXPECT_FALSE(d.snapshot);
  EXPECT_EQ(d.why, fault::other_version);
  EXPECT_NE(d.detail.find("version 1"), std::string::npos) << d.detail;
}

// SF2: every prefix of a file is truncated (what a torn write would leave), never a crash.
TEST(SnapshotFormat, EveryTruncationIsReportedAsSuch) {
  const auto bytes = encode(sample(40));
  for (size_t n = 8; n < bytes.size(); ++n) {
    const auto d = decode(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(d.snapshot) << n;
    ASSERT_EQ(d.why, fault::truncated) << n << ": " << d.detail;
  }
  EXPECT_EQ(decode(bytes + "x").why, fault::corrupt) << "bytes past its end";
}

// SF3: any flipped byte past the magic and version is caught by the checksum (or by SF1/SF2 for
// the version and length fields).
TEST(SnapshotFormat, EveryFlippedByteIsCaught) {
  const auto bytes = encode(sample(8));
  for (size_t i = 12; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    const auto d = decode(bad);
    ASSERT_FALSE(d.snapshot) << "byte " << i;
  }
}

// SF4: a body whose counts lie (with a checksum recomputed to match, as a bug or a hostile file
// could have) costs an error, never 2^40 entries' worth of memory.
TEST(SnapshotFormat, LyingCountsAreRejectedBeforeAllocating) {
  auto s = sample(2);
  s.adapters.clear();
  auto bytes = encode(s);
  // Offset of the adapters count: header, six strings, dp rank, start time (flag + f64), the
  // lifetime id, next_seq, history (flag + u64), epoch, incarnation, generation, taken_at.
  size_t at = header_bytes;
  for (const std::string* f : {&s.who.replica_id, &s.who.model_id, &s.who.tenant_id,
                               &s.who.hash_scheme, &s.who.endpoint, &s.who.topic})
    at += 4 + f->size();
  at += 8 + 1 + 8 + 4 + s.engine.lifetime_id.size() + 8 + 1 + 8 + 8 + 8 + 4 + 8;
  ASSERT_EQ(bytes.substr(at, 8), std::string(8, '\0'));
  bytes[at + 5] = 1;  // 2^40 adapters
  const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size() - trailer_bytes);
  for (size_t i = 0; i < 8; ++i)
    bytes[bytes.size() - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
  const auto d = decode(bytes);
  EXPECT_FALSE(d.snapshot);
  EXPECT_EQ(d.why, fault::corrupt);
  EXPECT_NE(d.detail.find("checksum matched"), std::string::npos) << d.detail;
}

// Random bytes behind a valid header never crash the decoder (a smoke fuzz; the fuzz preset is
// the lead's).
TEST(SnapshotFormat, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(7);
  const auto good = encode(sample(4));
  for (int round = 0; round < 2000; ++round) {
    std::string bytes = good.substr(0, 24);
    const size_t n = rng() % 200;
    for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(rng()));
    const auto d = decode(bytes);
    EXPECT_FALSE(d.snapshot);
  }
}

}  // namespace
}  // namespace kvrelay::snapshot
