// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The fake engine's encoder against every hex dump of docs/spec/engine-wire.md §7: the bytes a
// real vLLM/SGLang produces for the same values, reproduced exactly.
#include <gtest/gtest.h>

#include <msgpack.hpp>

#include "tests/decoder/producer_bytes.hpp"
#include "tools/fake-engine/wire_encoder.hpp"

namespace kvrelay::fake {
namespace {

const uint64_t H = 0xbf17ef8473ec96e9ULL;
const uint64_t P = 0x834ab12f98a3dcb0ULL;
const int64_t Hs = -8529349790023047566LL;
const int64_t Ps = -5132147273039293687LL;
const int64_t A_HASH = -3046181290577587917LL;
const double TS = 1767225600.5;

std::string bytes(const char* hex) {
  auto b = from_hex(hex);
  EXPECT_TRUE(b.has_value()) << hex;
  return b.value_or("");
}

std::vector<uint32_t> tok() {
  std::vector<uint32_t> t{151644, 872, 198};
  for (uint32_t v = 100; v <= 112; ++v) t.push_back(v);
  return t;
}

fake_event stored(fake_hash h, std::optional<fake_hash> parent) {
  fake_event ev;
  ev.t = fake_event::type::stored;
  ev.block_hashes = {h};
  ev.parent = parent;
  ev.token_ids = tok();
  ev.block_size = 16;
  ev.medium = std::string("GPU");
  return ev;
}

fake_event removed(fake_hash h) {
  fake_event ev;
  ev.t = fake_event::type::removed;
  ev.block_hashes = {h};
  ev.medium = std::string("GPU");
  return ev;
}

std::string batch(const fake_event& ev, wire_era era) {
  encode_options o;
  o.era = era;
  o.ts = TS;
  o.dp_rank = 0;
  return encode_batch({ev}, o);
}

// Compares as hex so a failure shows where the bytes differ.
void expect_bytes(const std::string& got, const char* want_hex, size_t want_size) {
  EXPECT_EQ(to_hex(got), to_hex(bytes(want_hex)));
  EXPECT_EQ(got.size(), want_size);
}

const char* C_STORED =
    "97 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 73 ec 96 e9 cf 83 4a b1 2f 98 a3 dc b0"
    "dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55";

TEST(WireEncoder, EraAStoredTupleWithSignedHash) {
  auto ev = stored(fake_hash::i(A_HASH), std::nullopt);
  expect_bytes(encode_event(ev, wire_era::a),
               "96 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 d3 d5 b9 ca 41 6d ae 91 33 c0 dc 00 10 ce "
               "00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0",
               52);
}

TEST(WireEncoder, EraATwoElementEnvelope) {
  expect_bytes(batch(removed(fake_hash::i(A_HASH)), wire_era::a),
               "92 cb 41 da 55 6e 40 20 00 00 91 92 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 d3 d5 "
               "b9 ca 41 6d ae 91 33",
               35);
}

TEST(WireEncoder, EraBThreeElementEnvelope) {
  expect_bytes(batch(removed(fake_hash::i(A_HASH)), wire_era::b),
               "93 cb 41 da 55 6e 40 20 00 00 91 92 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 d3 d5 "
               "b9 ca 41 6d ae 91 33 00",
               36);
}

TEST(WireEncoder, EraCStoredIntHashes) {
  expect_bytes(encode_event(stored(fake_hash::u(H), fake_hash::u(P)), wire_era::c), C_STORED, 64);
}

TEST(WireEncoder, EraCStoredBinHashes) {
  const auto h = bytes(
      "89 a1 a9 8e 70 9f a6 72 37 4b 46 3b bd 8d 59 46 ff 4f 53 0c 5e 65 be 07 bf 17 ef 84 73 ec 96 "
      "e9");
  const auto p = bytes(
      "b8 c6 f3 3f 17 80 d3 09 77 c5 e9 64 f6 2e 79 59 10 2a 36 94 f1 c2 8a e0 83 4a b1 2f 98 a3 dc "
      "b0");
  expect_bytes(encode_event(stored(fake_hash::bin(h), fake_hash::bin(p)), wire_era::c),
               "97 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 c4 20 89 a1 a9 8e 70 9f a6 72 37 4b 46 3b "
               "bd 8d 59 46 ff 4f 53 0c 5e 65 be 07 bf 17 ef 84 73 ec 96 e9 c4 20 b8 c6 f3 3f 17 80 "
               "d3 09 77 c5 e9 64 f6 2e 79 59 10 2a 36 94 f1 c2 8a e0 83 4a b1 2f 98 a3 dc b0 dc 00 "
               "10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 "
               "50 55",
               114);
}

TEST(WireEncoder, EraCDERemovedEnvelopesAreIdentical) {
  const char* want =
      "93 cb 41 da 55 6e 40 20 00 00 91 93 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 cf bf 17 ef 84 "
      "73 ec 96 e9 a3 47 50 55 00";
  for (auto era : {wire_era::c, wire_era::d, wire_era::e}) {
    SCOPED_TRACE(era_name(era));
    expect_bytes(batch(removed(fake_hash::u(H)), era), want, 40);
  }
}

TEST(WireEncoder, EraDAddsLoraName) {
  expect_bytes(encode_event(stored(fake_hash::u(H), fake_hash::u(P)), wire_era::d),
               "98 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 73 ec 96 e9 cf 83 4a b1 2f "
               "98 a3 dc b0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e "
               "6f 70 10 c0 a3 47 50 55 c0",
               65);
}

TEST(WireEncoder, EraEAddsExtraKeys) {
  auto ev = stored(fake_hash::u(H), fake_hash::u(P));
  ev.extra_keys = std::vector<block_extra_keys>{std::nullopt};
  expect_bytes(encode_event(ev, wire_era::e),
               "99 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 73 ec 96 e9 cf 83 4a b1 2f "
               "98 a3 dc b0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e "
               "6f 70 10 c0 a3 47 50 55 c0 91 c0",
               67);
}

TEST(WireEncoder, EraESaltedFirstBlock) {
  auto ev = stored(fake_hash::u(H), std::nullopt);
  ev.extra_keys = std::vector<block_extra_keys>{std::vector<extra_key>{extra_key::str("tenant-a")}};
  const auto got = encode_event(ev, wire_era::e);
  const auto tail = bytes("c0 91 91 a8 74 65 6e 61 6e 74 2d 61");
  ASSERT_GE(got.size(), tail.size());
  EXPECT_EQ(to_hex(got.substr(got.size() - tail.size())), to_hex(tail));
  EXPECT_EQ(to_hex(got.substr(23, 1)), "c0");  // the nil parent right after the hash
}

TEST(WireEncoder, EraFAddsGroupIdx) {
  auto ev = stored(fake_hash::u(H), fake_hash::u(P));
  ev.extra_keys = std::vector<block_extra_keys>{std::nullopt};
  ev.group_idx = 0;
  expect_bytes(encode_event(ev, wire_era::f),
               "9a ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 73 ec 96 e9 cf 83 4a b1 2f "
               "98 a3 dc b0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e "
               "6f 70 10 c0 a3 47 50 55 c0 91 c0 00",
               68);
}

TEST(WireEncoder, EraFGRemovedEnvelopes) {
  auto ev = removed(fake_hash::u(H));
  ev.group_idx = 0;
  const char* want =
      "93 cb 41 da 55 6e 40 20 00 00 91 94 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 cf bf 17 ef 84 "
      "73 ec 96 e9 a3 47 50 55 00 00";
  expect_bytes(batch(ev, wire_era::f), want, 41);
  expect_bytes(batch(ev, wire_era::g), want, 41);
}

fake_event g_event() {
  auto ev = stored(fake_hash::u(H), fake_hash::u(P));
  ev.extra_keys = std::vector<block_extra_keys>{std::nullopt};
  ev.group_idx = 0;
  ev.spec_kind = std::string("full_attention");
  return ev;
}

TEST(WireEncoder, EraGAddsSpecKind) {
  expect_bytes(encode_event(g_event(), wire_era::g),
               "9c ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 73 ec 96 e9 cf 83 4a b1 2f "
               "98 a3 dc b0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e "
               "6f 70 10 c0 a3 47 50 55 c0 91 c0 00 ae 66 75 6c 6c 5f 61 74 74 65 6e 74 69 6f 6e c0",
               84);
}

TEST(WireEncoder, EraGSlidingWindowGroup) {
  auto ev = g_event();
  ev.group_idx = 1;
  ev.spec_kind = std::string("sliding_window");
  ev.sliding_window = 128;
  const auto got = encode_event(ev, wire_era::g);
  const auto tail = bytes("c0 91 c0 01 ae 73 6c 69 64 69 6e 67 5f 77 69 6e 64 6f 77 cc 80");
  ASSERT_GE(got.size(), tail.size());
  EXPECT_EQ(to_hex(got.substr(got.size() - tail.size())), to_hex(tail));
}

TEST(WireEncoder, EraHMapStored) {
  expect_bytes(
      encode_event(g_event(), wire_era::h),
      "8b a4 74 79 70 65 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 ac 62 6c 6f 63 6b 5f 68 61 73 68 65 73 "
      "91 cf bf 17 ef 84 73 ec 96 e9 b1 70 61 72 65 6e 74 5f 62 6c 6f 63 6b 5f 68 61 73 68 cf 83 4a "
      "b1 2f 98 a3 dc b0 a9 74 6f 6b 65 6e 5f 69 64 73 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 "
      "66 67 68 69 6a 6b 6c 6d 6e 6f 70 aa 62 6c 6f 63 6b 5f 73 69 7a 65 10 a7 6c 6f 72 61 5f 69 64 "
      "c0 a6 6d 65 64 69 75 6d a3 47 50 55 a9 6c 6f 72 61 5f 6e 61 6d 65 c0 aa 65 78 74 72 61 5f 6b "
      "65 79 73 91 c0 a9 67 72 6f 75 70 5f 69 64 78 00 b2 6b 76 5f 63 61 63 68 65 5f 73 70 65 63 5f "
      "6b 69 6e 64 ae 66 75 6c 6c 5f 61 74 74 65 6e 74 69 6f 6e",
      205);
}

TEST(WireEncoder, EraHMapRemovedInArrayEnvelope) {
  auto ev = removed(fake_hash::u(H));
  ev.group_idx = 0;
  expect_bytes(batch(ev, wire_era::h),
               "93 cb 41 da 55 6e 40 20 00 00 91 84 a4 74 79 70 65 ac 42 6c 6f 63 6b 52 65 6d 6f 76 "
               "65 64 ac 62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 cf bf 17 ef 84 73 ec 96 e9 a6 6d 65 "
               "64 69 75 6d a3 47 50 55 a9 67 72 6f 75 70 5f 69 64 78 00 00",
               76);
}

TEST(WireEncoder, AllBlocksClearedBothForms) {
  fake_event ev;
  ev.t = fake_event::type::cleared;
  expect_bytes(encode_event(ev, wire_era::c),
               "91 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64", 18);
  expect_bytes(encode_event(ev, wire_era::h),
               "81 a4 74 79 70 65 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64", 23);
}

TEST(WireEncoder, HypotheticalMapEnvelope) {
  fake_event ev;
  ev.t = fake_event::type::cleared;
  encode_options o;
  o.era = wire_era::h;
  o.ts = TS;
  o.map_envelope = true;
  expect_bytes(encode_batch({ev}, o),
               "83 a2 74 73 cb 41 da 55 6e 40 20 00 00 a6 65 76 65 6e 74 73 91 81 a4 74 79 70 65 b0 "
               "41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64 b2 64 61 74 61 5f 70 61 72 61 6c 6c "
               "65 6c 5f 72 61 6e 6b 00",
               64);
}

const char* S1_STORED =
    "96 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 d3 89 a1 a9 8e 70 9f a6 72 d3 b8 c6 f3 3f 17 80 d3 09"
    "dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0";

TEST(WireEncoder, SGLangS1SignedHashes) {
  auto ev = stored(fake_hash::i(Hs), fake_hash::i(Ps));
  expect_bytes(encode_event(ev, wire_era::s1), S1_STORED, 60);
  expect_bytes(batch(removed(fake_hash::i(Hs)), wire_era::s1),
               "93 cb 41 da 55 6e 40 20 00 00 91 92 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 91 d3 89 "
               "a1 a9 8e 70 9f a6 72 00",
               36);
}

TEST(WireEncoder, SGLangS2AddsMedium) {
  auto want = bytes(S1_STORED);
  want[0] = static_cast<char>(0x97);
  want += bytes("a3 47 50 55");
  const auto got = encode_event(stored(fake_hash::i(Hs), fake_hash::i(Ps)), wire_era::s2);
  EXPECT_EQ(to_hex(got), to_hex(want));
  EXPECT_EQ(got.size(), 64u);
}

TEST(WireEncoder, SGLangS3SaltedMetadataMapAtSlot7) {
  auto ev = stored(fake_hash::i(Hs), std::nullopt);
  ev.cache_salt = std::string("tenant-a");
  expect_bytes(encode_event(ev, wire_era::s2),
               "98 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 d3 89 a1 a9 8e 70 9f a6 72 c0 dc 00 10 ce "
               "00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55 "
               "81 aa 63 61 63 68 65 5f 73 61 6c 74 a8 74 65 6e 61 6e 74 2d 61",
               77);
}

// Eras without a byte dump: decode the bytes generically and check the shape.
msgpack::object_handle unpack(const std::string& b) {
  return msgpack::unpack(b.data(), b.size());
}

TEST(WireEncoder, SGLangS4MapWithSaltAndNoVllmOnlyKeys) {
  auto ev = g_event();
  ev.lora_name = std::string("x");
  ev.cache_salt = std::string("tenant-a");
  auto oh = unpack(encode_event(ev, wire_era::s4));
  const auto& m = oh.get();
  ASSERT_EQ(m.type, msgpack::type::MAP);
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < m.via.map.size; ++i) keys.push_back(m.via.map.ptr[i].key.as<std::string>());
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "block_hashes", "parent_block_hash", "token_ids",
                                            "block_size", "lora_id", "medium", "cache_salt"}));
}

TEST(WireEncoder, EraIAddsLocalityOnlyInI) {
  auto ev = g_event();
  ev.locality = std::string("LOCAL");
  auto h = unpack(encode_event(ev, wire_era::h));
  auto i = unpack(encode_event(ev, wire_era::i));
  EXPECT_EQ(h.get().via.map.size, 11u);
  ASSERT_EQ(i.get().via.map.size, 12u);
  EXPECT_EQ(i.get().via.map.ptr[11].key.as<std::string>(), "locality");
}

TEST(WireEncoder, EraIRemovedCarriesRemainingCopyCountsAndStoredItsOrigin) {
  fake_event rm;
  rm.t = fake_event::type::removed;
  rm.block_hashes = {fake_hash::u(H), fake_hash::u(P)};
  rm.remaining_copy_counts = std::vector<uint32_t>{2, 0};
  rm.locality = std::string("REMOTE");
  auto i = unpack(encode_event(rm, wire_era::i));
  const auto& m = i.get().via.map;
  ASSERT_EQ(m.size, 5u);
  EXPECT_EQ(m.ptr[3].key.as<std::string>(), "locality");
  EXPECT_EQ(m.ptr[4].key.as<std::string>(), "remaining_copy_counts");
  EXPECT_EQ(m.ptr[4].val.as<std::vector<uint32_t>>(), (std::vector<uint32_t>{2, 0}));
  EXPECT_EQ(unpack(encode_event(rm, wire_era::h)).get().via.map.size, 3u) << "era I only";
  auto st = g_event();
  st.origin = std::string("REUSED");
  auto si = unpack(encode_event(st, wire_era::i));
  const auto& sm = si.get().via.map;
  EXPECT_EQ(sm.ptr[sm.size - 1].key.as<std::string>(), "origin");
  EXPECT_EQ(sm.ptr[sm.size - 1].val.as<std::string>(), "REUSED");
}

TEST(WireEncoder, BinWrappedEventsInATwoElementEnvelope) {
  encode_options o;
  o.era = wire_era::c;
  o.ts = TS;
  o.bin_wrapped = true;
  const auto ev = stored(fake_hash::u(H), fake_hash::u(P));
  const auto payload = encode_batch({ev, ev}, o);
  auto oh = unpack(payload);
  const auto& env = oh.get().via.array;
  ASSERT_EQ(env.size, 2u) << "[ts, events]";
  ASSERT_EQ(env.ptr[1].via.array.size, 2u);
  const auto& bin = env.ptr[1].via.array.ptr[0];
  ASSERT_EQ(bin.type, msgpack::type::BIN);
  EXPECT_EQ(std::string(bin.via.bin.ptr, bin.via.bin.size), encode_event(ev, wire_era::c));
}

TEST(WireEncoder, EagleBigramTokensAndNilTokens) {
  auto ev = stored(fake_hash::i(Hs), std::nullopt);
  ev.bigram_tokens = {{1, 2}, {3, 4}};
  auto oh = unpack(encode_event(ev, wire_era::s2));
  const auto& tokens = oh.get().via.array.ptr[3];
  ASSERT_EQ(tokens.type, msgpack::type::ARRAY);
  ASSERT_EQ(tokens.via.array.size, 2u);
  EXPECT_EQ(tokens.via.array.ptr[1].via.array.ptr[0].as<uint32_t>(), 3u);
  ev.bigram_tokens.clear();
  ev.token_ids_nil = true;
  auto nil = unpack(encode_event(ev, wire_era::s1));
  EXPECT_TRUE(nil.get().via.array.ptr[3].is_nil());
}

TEST(WireEncoder, LoraAndMultimodalExtraKeys) {
  auto ev = stored(fake_hash::u(H), std::nullopt);
  ev.lora_id = 7;
  ev.lora_name = std::string("sql-lora");
  ev.extra_keys = std::vector<block_extra_keys>{std::vector<extra_key>{
      extra_key::str("sql-lora"), extra_key::mm("abcd", 7), extra_key::integer(-1),
      extra_key::bin(std::string(32, '\x01'))}};
  auto oh = unpack(encode_event(ev, wire_era::e));
  const auto& a = oh.get().via.array;
  EXPECT_EQ(a.ptr[5].as<int64_t>(), 7);
  EXPECT_EQ(a.ptr[7].as<std::string>(), "sql-lora");
  const auto& keys = a.ptr[8].via.array.ptr[0].via.array;
  ASSERT_EQ(keys.size, 4u);
  EXPECT_EQ(keys.ptr[1].via.array.ptr[0].as<std::string>(), "abcd");
  EXPECT_EQ(keys.ptr[1].via.array.ptr[1].as<int64_t>(), 7);
  EXPECT_EQ(keys.ptr[3].type, msgpack::type::BIN);
}

TEST(WireEncoder, UnknownTagEvent) {
  fake_event ev;
  ev.t = fake_event::type::unknown;
  auto tuple = unpack(encode_event(ev, wire_era::c));
  EXPECT_EQ(tuple.get().via.array.ptr[0].as<std::string>(), "SomeFutureEvent");
  auto map = unpack(encode_event(ev, wire_era::h));
  EXPECT_EQ(map.get().via.map.ptr[0].val.as<std::string>(), "SomeFutureEvent");
}

TEST(WireEncoder, TruncatedTupleForFaultInjection) {
  // The reference e2e's undecodable payload: ["BlockStored", [0xE000], nil].
  fake_event ev;
  ev.block_hashes = {fake_hash::i(0xE000)};
  ev.truncate_slots = 3;
  EXPECT_EQ(to_hex(encode_event(ev, wire_era::a)),
            "93 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cd e0 00 c0");
  auto full = stored(fake_hash::i(Hs), fake_hash::i(Ps));
  full.truncate_slots = 100;  // longer than the tuple: unchanged
  expect_bytes(encode_event(full, wire_era::s1), S1_STORED, 60);
}

// ---- docs/producers.md: the fake engine writes each producer's bytes ------------------------

std::string batch_of(const std::vector<fake_event>& events, wire_era era) {
  encode_options o;
  o.era = era;
  o.ts = TS;
  o.dp_rank = 0;
  return encode_batch(events, o);
}

TEST(WireEncoder, TensorRtLlmMapEventsInAPositionalEnvelope) {
  namespace pb = kvrelay::test::producer;
  EXPECT_EQ(to_hex(batch_of({stored(fake_hash::i(Hs), fake_hash::i(Ps))}, wire_era::trt)),
            to_hex(bytes(pb::trt_stored_env)));
  EXPECT_EQ(to_hex(batch_of({removed(fake_hash::i(Hs))}, wire_era::trt)),
            to_hex(bytes(pb::trt_removed_env)));
  auto mm = stored(fake_hash::i(Hs), fake_hash::i(Ps));
  const std::string digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  for (uint32_t i = 4; i < 16; ++i) mm.token_ids[i] = 151933 + i;
  mm.token_digests = {{3, digest}};
  mm.mm_keys = std::vector<std::vector<mm_key>>{{mm_key{digest, 0, std::nullopt}}};
  EXPECT_EQ(to_hex(batch_of({mm}, wire_era::trt)), to_hex(bytes(pb::trt_mm_env)));
}

TEST(WireEncoder, AtomBothEras) {
  namespace pb = kvrelay::test::producer;
  fake_event cleared;
  cleared.t = fake_event::type::cleared;
  EXPECT_EQ(to_hex(batch_of({stored(fake_hash::u(H), fake_hash::u(P)), removed(fake_hash::u(H)),
                             cleared},
                            wire_era::atom0)),
            to_hex(bytes(pb::atom0_env)));
  EXPECT_TRUE(is_unsequenced(wire_era::atom0));
  EXPECT_FALSE(is_unsequenced(wire_era::atom));
  // #1316: the same store with token_offset; the dump's first event.
  auto st = stored(fake_hash::u(H), fake_hash::u(P));
  st.token_offset = 16;
  auto remote = stored(fake_hash::u(H + 1), std::nullopt);
  remote.medium = std::string("REMOTE");
  remote.token_offset = 0;
  const std::string want = to_hex(bytes(pb::atom_env));
  const std::string got = to_hex(batch_of({st, remote, removed(fake_hash::u(H))}, wire_era::atom));
  // The dump ends with an ATOM-only BlockTransferred the fake engine does not write: compare
  // everything up to it (the events array header differs: 3 vs 4 events).
  const std::string head = "93 cb 41 da 55 6e 40 20 00 00 ";
  ASSERT_EQ(got.substr(0, head.size()), head);
  EXPECT_EQ(got.substr(head.size(), 2), "93");
  const std::string events = got.substr(head.size() + 3, got.size() - head.size() - 3 - 3);
  EXPECT_EQ(want.substr(head.size() + 3, events.size()), events);
}

TEST(WireEncoder, VllmPlaceholderSessionAndSGLangComponents) {
  namespace pb = kvrelay::test::producer;
  fake_event ph;
  ph.t = fake_event::type::stored;
  ph.block_hashes = {fake_hash::u(H)};
  ph.block_size = 0;
  ph.medium = std::string("CPU");
  ph.group_idx = 1;
  EXPECT_EQ(to_hex(batch_of({ph}, wire_era::i)), to_hex(bytes(pb::vllm_placeholder_env)));
  auto se = stored(fake_hash::u(H), fake_hash::u(P));
  se.extra_keys = std::vector<block_extra_keys>{std::nullopt};
  se.group_idx = 0;
  se.spec_kind = std::string("full_attention");
  se.session_id = std::string("sess-1");
  EXPECT_EQ(to_hex(batch_of({se}, wire_era::i)), to_hex(bytes(pb::vllm_session_env)));
  auto full = stored(fake_hash::i(Hs), std::nullopt);
  full.component_types = std::vector<std::string>{"full", "swa"};
  auto mamba = full;
  mamba.component_types = std::vector<std::string>{"mamba"};
  auto none = stored(fake_hash::i(Hs), std::nullopt);
  auto salted = full;
  salted.component_types = std::vector<std::string>{"full"};
  salted.cache_salt = std::string("tenant-a");
  // The dump's third store writes component_types nil (the option on, nothing to say): the
  // fake engine writes that store without the slot, so compare the others event by event.
  const std::string want = to_hex(bytes(pb::sglang_components_env));
  for (const auto* ev : {&full, &mamba, &salted}) {
    const std::string one = to_hex(encode_event(*ev, wire_era::s2));
    EXPECT_NE(want.find(one), std::string::npos) << one;
  }
  EXPECT_NE(want.find(to_hex(encode_event(none, wire_era::s2)).substr(3)), std::string::npos);
}

TEST(WireEncoder, ParseEraAndHex) {
  EXPECT_EQ(parse_era("trt"), wire_era::trt);
  EXPECT_EQ(parse_era("Atom0"), wire_era::atom0);
  EXPECT_EQ(parse_era("ATOM"), wire_era::atom);
  EXPECT_STREQ(era_name(wire_era::atom0), "ATOM0");
  EXPECT_TRUE(is_map_era(wire_era::trt));
  EXPECT_EQ(parse_era("a"), wire_era::a);
  EXPECT_EQ(parse_era("S3"), wire_era::s2);
  EXPECT_EQ(parse_era("s4"), wire_era::s4);
  EXPECT_FALSE(parse_era("J").has_value());
  EXPECT_FALSE(from_hex("abc").has_value());
  EXPECT_FALSE(from_hex("zz").has_value());
  EXPECT_EQ(to_hex(std::string("\x00\xff", 2)), "00 ff");
}

}  // namespace
}  // namespace kvrelay::fake
