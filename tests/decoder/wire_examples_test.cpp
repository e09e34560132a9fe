// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Every hex dump of docs/spec/engine-wire.md §7, fed to the decoder as raw bytes.
#include "decoder_test_util.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace kvrelay::test {
namespace {

constexpr double kTs = 1767225600.5;
constexpr uint64_t kH = 0xbf17ef8473ec96e9ull;
constexpr uint64_t kP = 0x834ab12f98a3dcb0ull;
const uint64_t kHs = static_cast<uint64_t>(int64_t{-8529349790023047566});
const uint64_t kPs = static_cast<uint64_t>(int64_t{-5132147273039293687});
const uint64_t kEraA = static_cast<uint64_t>(int64_t{-3046181290577587917});

const std::vector<uint32_t> kTok = {151644, 872, 198, 100, 101, 102, 103, 104,
                                    105,    106, 107, 108, 109, 110, 111, 112};

// Wraps one event's bytes in `[ts, [event], 0]`.
std::string in_batch(const std::string& event_hex) {
  return hex("93 cb 41 da 55 6e 40 20 00 00 91") + hex(event_hex) + hex("00");
}

const kv_event& only_event(const decoded& d) {
  EXPECT_EQ(d.err, decode_error::none) << d.detail;
  EXPECT_EQ(d.batch.events.size(), 1u);
  static const kv_event none;
  return d.batch.events.empty() ? none : d.batch.events[0];
}

const char* const kEraAStored =
    "96 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 d3 d5 b9 ca 41 6d ae 91 33 c0 dc 00 10 ce 00 02 50 "
    "5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0";
const char* const kEraCStored =
    "97 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 73 ec 96 e9 cf 83 4a b1 2f 98 a3 dc "
    "b0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 "
    "50 55";

void expect_common_stored(const block_stored& s) {
  EXPECT_EQ(s.token_ids, kTok);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_FALSE(s.lora_id.has_value());
  EXPECT_FALSE(s.eagle_bigram);
  EXPECT_EQ(s.first_tainted_block, s.block_hashes.size());
}

TEST(WireExamples, EraAStored) {
  const auto d = decode(in_batch(kEraAStored));
  const auto& e = only_event(d);
  ASSERT_EQ(e.type, event_type::stored);
  ASSERT_EQ(e.stored.block_hashes.size(), 1u);
  EXPECT_EQ(e.stored.block_hashes[0], engine_hash::from_int(kEraA));
  EXPECT_FALSE(e.stored.parent.has_value());
  EXPECT_EQ(e.stored.medium.tier, tier::t1);  // no medium slot: GPU
  EXPECT_TRUE(e.stored.medium.known());
  expect_common_stored(e.stored);
}

TEST(WireExamples, EraARemovedTwoElementEnvelope) {
  const auto d = decode(hex(
      "92 cb 41 da 55 6e 40 20 00 00 91 92 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 d3 d5 b9 ca "
      "41 6d ae 91 33"));
  const auto& e = only_event(d);
  EXPECT_EQ(d.batch.ts, kTs);
  EXPECT_FALSE(d.batch.dp_rank.has_value());
  ASSERT_EQ(e.type, event_type::removed);
  ASSERT_EQ(e.removed.block_hashes.size(), 1u);
  EXPECT_EQ(e.removed.block_hashes[0].value, kEraA);
  EXPECT_FALSE(e.removed.group_idx.has_value());
}

TEST(WireExamples, EraBRemovedWithRank) {
  const auto d = decode(hex(
      "93 cb 41 da 55 6e 40 20 00 00 91 92 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 d3 d5 b9 ca "
      "41 6d ae 91 33 00"));
  const auto& e = only_event(d);
  EXPECT_EQ(d.batch.ts, kTs);
  EXPECT_EQ(d.batch.dp_rank, 0);
  EXPECT_EQ(e.removed.block_hashes.at(0).value, kEraA);
}

TEST(WireExamples, EraCStoredIntHashes) {
  const auto d = decode(in_batch(kEraCStored));
  const auto& e = only_event(d);
  ASSERT_EQ(e.type, event_type::stored);
  EXPECT_EQ(e.stored.block_hashes.at(0), engine_hash::from_int(kH));
  ASSERT_TRUE(e.stored.parent.has_value());
  EXPECT_EQ(*e.stored.parent, engine_hash::from_int(kP));
  EXPECT_EQ(e.stored.medium.tier, tier::t1);
  expect_common_stored(e.stored);
}

TEST(WireExamples, EraCStoredBinHashes) {
  const auto d = decode(in_batch(
      "97 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 c4 20 89 a1 a9 8e 70 9f a6 72 37 4b 46 3b bd 8d "
      "59 46 ff 4f 53 0c 5e 65 be 07 bf 17 ef 84 73 ec 96 e9 c4 20 b8 c6 f3 3f 17 80 d3 09 77 c5 e9 "
      "64 f6 2e 79 59 10 2a 36 94 f1 c2 8a e0 83 4a b1 2f 98 a3 dc b0 dc 00 10 ce 00 02 50 5c cd 03 "
      "68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55"));
  const auto& e = only_event(d);
  const auto& h = e.stored.block_hashes.at(0);
  EXPECT_TRUE(h.is_bytes());
  EXPECT_EQ(h.bytes, hex("89 a1 a9 8e 70 9f a6 72 37 4b 46 3b bd 8d 59 46 ff 4f 53 0c 5e 65 be 07 "
                         "bf 17 ef 84 73 ec 96 e9"));
  ASSERT_TRUE(e.stored.parent.has_value());
  EXPECT_EQ(e.stored.parent->bytes, hex("b8 c6 f3 3f 17 80 d3 09 77 c5 e9 64 f6 2e 79 59 10 2a 36 "
                                        "94 f1 c2 8a e0 83 4a b1 2f 98 a3 dc b0"));
  expect_common_stored(e.stored);
}

TEST(WireExamples, EraCRemovedEnvelope) {
  const auto d = decode(hex(
      "93 cb 41 da 55 6e 40 20 00 00 91 93 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 cf bf 17 ef "
      "84 73 ec 96 e9 a3 47 50 55 00"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.removed.block_hashes.at(0).value, kH);
  EXPECT_EQ(e.removed.medium.tier, tier::t1);
}

TEST(WireExamples, EraDStoredLoraNameNil) {
  std::string ev = kEraCStored;
  ev.replace(0, 2, "98");
  const auto d = decode(in_batch(ev + " c0"));
  const auto& e = only_event(d);
  EXPECT_FALSE(e.stored.lora_name.has_value());
  expect_common_stored(e.stored);
}

TEST(WireExamples, EraEStoredExtraKeysNil) {
  std::string ev = kEraCStored;
  ev.replace(0, 2, "99");
  const auto d = decode(in_batch(ev + " c0 91 c0"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.stored.first_tainted_block, 1u);  // clean
  expect_common_stored(e.stored);
}

TEST(WireExamples, EraESaltedFirstBlockIsTainted) {
  // "salted first block would end … c0 91 91 a8 "tenant-a" with parent c0"
  std::string ev = kEraCStored;
  ev.replace(0, 2, "99");
  const std::string parent = "cf 83 4a b1 2f 98 a3 dc b0";
  ev.replace(ev.find(parent), parent.size(), "c0");
  const auto d = decode(in_batch(ev + " c0 91 91 a8 74 65 6e 61 6e 74 2d 61"));
  const auto& e = only_event(d);
  EXPECT_FALSE(e.stored.parent.has_value());
  EXPECT_EQ(e.stored.first_tainted_block, 0u);
}

TEST(WireExamples, EraFStoredGroupZero) {
  std::string ev = kEraCStored;
  ev.replace(0, 2, "9a");
  const auto d = decode(in_batch(ev + " c0 91 c0 00"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.stored.group_idx, 0);
  EXPECT_EQ(e.stored.kind, group_kind::unspecified);
}

TEST(WireExamples, EraFRemovedEnvelope) {
  const auto d = decode(hex(
      "93 cb 41 da 55 6e 40 20 00 00 91 94 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 cf bf 17 ef "
      "84 73 ec 96 e9 a3 47 50 55 00 00"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.removed.group_idx, 0);
  EXPECT_EQ(d.batch.dp_rank, 0);
}

TEST(WireExamples, EraGFullAttention) {
  std::string ev = kEraCStored;
  ev.replace(0, 2, "9c");
  const auto d = decode(
      in_batch(ev + " c0 91 c0 00 ae 66 75 6c 6c 5f 61 74 74 65 6e 74 69 6f 6e c0"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.stored.kind, group_kind::main);
  EXPECT_FALSE(e.stored.sliding_window.has_value());
  EXPECT_EQ(e.stored.group_idx, 0);
}

TEST(WireExamples, EraGSlidingWindowGroup) {
  std::string ev = kEraCStored;
  ev.replace(0, 2, "9c");
  const auto d = decode(
      in_batch(ev + " c0 91 c0 01 ae 73 6c 69 64 69 6e 67 5f 77 69 6e 64 6f 77 cc 80"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.stored.kind, group_kind::other);
  EXPECT_EQ(e.stored.sliding_window, 128);
  EXPECT_EQ(e.stored.group_idx, 1);
}

TEST(WireExamples, EraHMapStored) {
  const auto d = decode(in_batch(
      "8b a4 74 79 70 65 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 ac 62 6c 6f 63 6b 5f 68 61 73 68 65 "
      "73 91 cf bf 17 ef 84 73 ec 96 e9 b1 70 61 72 65 6e 74 5f 62 6c 6f 63 6b 5f 68 61 73 68 cf 83 "
      "4a b1 2f 98 a3 dc b0 a9 74 6f 6b 65 6e 5f 69 64 73 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 "
      "65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 aa 62 6c 6f 63 6b 5f 73 69 7a 65 10 a7 6c 6f 72 61 5f 69 "
      "64 c0 a6 6d 65 64 69 75 6d a3 47 50 55 a9 6c 6f 72 61 5f 6e 61 6d 65 c0 aa 65 78 74 72 61 5f "
      "6b 65 79 73 91 c0 a9 67 72 6f 75 70 5f 69 64 78 00 b2 6b 76 5f 63 61 63 68 65 5f 73 70 65 63 "
      "5f 6b 69 6e 64 ae 66 75 6c 6c 5f 61 74 74 65 6e 74 69 6f 6e"));
  const auto& e = only_event(d);
  ASSERT_EQ(e.type, event_type::stored);
  EXPECT_EQ(e.stored.block_hashes.at(0).value, kH);
  EXPECT_EQ(e.stored.parent->value, kP);
  EXPECT_EQ(e.stored.group_idx, 0);
  EXPECT_EQ(e.stored.kind, group_kind::main);
  EXPECT_FALSE(e.stored.lora_name.has_value());
  expect_common_stored(e.stored);
}

TEST(WireExamples, EraHMapRemovedInArrayEnvelope) {
  const auto d = decode(hex(
      "93 cb 41 da 55 6e 40 20 00 00 91 84 a4 74 79 70 65 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 ac "
      "62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 cf bf 17 ef 84 73 ec 96 e9 a6 6d 65 64 69 75 6d a3 47 "
      "50 55 a9 67 72 6f 75 70 5f 69 64 78 00 00"));
  const auto& e = only_event(d);
  ASSERT_EQ(e.type, event_type::removed);
  EXPECT_EQ(e.removed.block_hashes.at(0).value, kH);
  EXPECT_EQ(e.removed.group_idx, 0);
}

TEST(WireExamples, AllBlocksClearedArrayAndMap) {
  const auto a = decode(in_batch("91 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64"));
  EXPECT_EQ(only_event(a).type, event_type::cleared);
  const auto m = decode(
      in_batch("81 a4 74 79 70 65 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64"));
  EXPECT_EQ(only_event(m).type, event_type::cleared);
}

TEST(WireExamples, HypotheticalMapEnvelope) {
  const auto d = decode(hex(
      "83 a2 74 73 cb 41 da 55 6e 40 20 00 00 a6 65 76 65 6e 74 73 91 81 a4 74 79 70 65 b0 41 6c 6c "
      "42 6c 6f 63 6b 73 43 6c 65 61 72 65 64 b2 64 61 74 61 5f 70 61 72 61 6c 6c 65 6c 5f 72 61 6e "
      "6b 00"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.type, event_type::cleared);
  EXPECT_EQ(d.batch.ts, kTs);
  EXPECT_EQ(d.batch.dp_rank, 0);
}

const char* const kS1Stored =
    "96 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 d3 89 a1 a9 8e 70 9f a6 72 d3 b8 c6 f3 3f 17 80 d3 "
    "09 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0";

TEST(WireExamples, SGLangS1SignedHashes) {
  const auto d = decode(in_batch(kS1Stored));
  const auto& e = only_event(d);
  EXPECT_EQ(e.stored.block_hashes.at(0).value, kHs);
  EXPECT_EQ(e.stored.parent->value, kPs);
  expect_common_stored(e.stored);

  const auto r = decode(hex(
      "93 cb 41 da 55 6e 40 20 00 00 91 92 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 d3 89 a1 a9 "
      "8e 70 9f a6 72 00"));
  EXPECT_EQ(only_event(r).removed.block_hashes.at(0).value, kHs);
}

TEST(WireExamples, SGLangS2Medium) {
  std::string ev = kS1Stored;
  ev.replace(0, 2, "97");
  const auto d = decode(in_batch(ev + " a3 47 50 55"));
  const auto& e = only_event(d);
  EXPECT_EQ(e.stored.medium.tier, tier::t1);
  expect_common_stored(e.stored);
}

TEST(WireExamples, SGLangS3SaltedMetadataMap) {
  const auto d = decode(in_batch(
      "98 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 d3 89 a1 a9 8e 70 9f a6 72 c0 dc 00 10 ce 00 02 50 "
      "5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55 81 aa 63 61 63 68 "
      "65 5f 73 61 6c 74 a8 74 65 6e 61 6e 74 2d 61"));
  const auto& e = only_event(d);
  ASSERT_EQ(e.type, event_type::stored);
  EXPECT_FALSE(e.stored.lora_name.has_value());
  EXPECT_EQ(e.stored.first_tainted_block, 0u);
  EXPECT_EQ(e.stored.token_ids, kTok);
}

}  // namespace
}  // namespace kvrelay::test

namespace kvrelay::test {
namespace {

// The fuzz seed corpus (tests/fuzz/corpus/decoder, written by tests/fuzz/decoder/make_corpus.py)
// must stay valid input, or the fuzzer starts from rejects only.
TEST(WireExamples, FuzzSeedCorpusDecodes) {
  const std::filesystem::path dir =
      std::filesystem::path(KVRELAY_FIXTURES_DIR) / ".." / "fuzz" / "corpus" / "decoder";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    // Only the generated seeds; regression inputs added later may well be rejects.
    const std::string name = entry.path().filename().string();
    if (name.rfind("spec_", 0) != 0 && name.rfind("gen_", 0) != 0) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto d = decode(bytes);
    EXPECT_EQ(d.err, decode_error::none) << entry.path() << ": " << d.detail;
    EXPECT_FALSE(d.batch.events.empty()) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 20u);
}

}  // namespace
}  // namespace kvrelay::test
