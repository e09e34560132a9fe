// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Reference behaviours D01–D22 (docs/spec/reference-behaviour.md §1.1) and docs/spec/engine-wire.md's WA1-WA11 /
// "SHOULD reject" lists, built with msgpack-cxx's packer. Long because it walks those lists item
// by item.
#include "decoder_test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace kvrelay::test {
namespace {

// WD1: asserts the payload was rejected with `code` and came back empty.
void expect_reject(const std::string& bytes, decode_error code, const char* why = "") {
  const auto d = decode(bytes);
  EXPECT_EQ(d.err, code) << why << " got " << to_string(d.err) << " (" << d.detail << ")";
  EXPECT_TRUE(d.batch.events.empty()) << why;
  EXPECT_TRUE(d.faults.empty()) << why;
  EXPECT_EQ(d.batch.skipped_unknown, 0u) << why;
  EXPECT_FALSE(d.detail.empty()) << why;
}

// WD2: asserts the batch decoded with exactly one event skipped for `code`, and `good` others
// kept.
void expect_skipped(const std::string& bytes, decode_error code, const char* why = "",
                    size_t good = 0) {
  const auto d = decode(bytes);
  EXPECT_EQ(d.err, decode_error::none) << why << ": " << to_string(d.err) << " (" << d.detail
                                       << ")";
  ASSERT_EQ(d.faults.size(), 1u) << why;
  EXPECT_EQ(d.faults[0].reason, code) << why << " got " << to_string(d.faults[0].reason) << " ("
                                      << d.faults[0].what << ")";
  EXPECT_NE(std::string(d.faults[0].what), "") << why;
  EXPECT_EQ(d.batch.events.size(), good) << why;
}

decoded ok(const std::string& bytes) {
  auto d = decode(bytes);
  EXPECT_EQ(d.err, decode_error::none) << to_string(d.err) << ": " << d.detail;
  return d;
}

const std::vector<uint32_t> k16 = iota_tokens(1, 16);

item stored16(item parent = Nil()) { return stored_tuple({42}, std::move(parent), k16, 16); }

// ---- reference D01–D22 ----------------------------------------------------------------------

// WD3: an unknown tag skips its event and is counted in skipped_unknown, not a fault.
TEST(WireDecoderReference, D01_TupleBatchKeepsOrderAndSkipsUnknown) {
  const auto d = ok(enc(A({F64(1779901681.5),
                           A({stored_tuple({10, 11}, Nil(), {0, 1, 2, 3}, 128),
                              A({S("BlockRemoved"), Hashes({10})}), A({S("AllBlocksCleared")}),
                              A({S("SomeFutureEvent"), I(1), S("x")})})})));
  EXPECT_EQ(d.batch.ts, 1779901681.5);
  ASSERT_EQ(d.batch.events.size(), 3u);
  EXPECT_EQ(d.batch.skipped_unknown, 1u);
  const auto& s = d.batch.events[0];
  ASSERT_EQ(s.type, event_type::stored);
  EXPECT_EQ(s.stored.block_hashes,
            (std::vector<engine_hash>{engine_hash::from_int(10), engine_hash::from_int(11)}));
  EXPECT_EQ(s.stored.block_size, 128);
  EXPECT_EQ(s.stored.token_ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_FALSE(s.stored.parent.has_value());
  EXPECT_EQ(d.batch.events[1].type, event_type::removed);
  EXPECT_EQ(d.batch.events[2].type, event_type::cleared);
}

TEST(WireDecoderReference, D02_MapEventsIgnoreExtraKeys) {
  const auto d = ok(batch({
      M({{"type", S("BlockStored")},
         {"block_hashes", Hashes({10, 11})},
         {"parent_block_hash", U(7)},
         {"token_ids", Toks(iota_tokens(0, 32))},
         {"block_size", I(16)},
         {"lora_id", I(4)},
         {"medium", S("GPU")},
         {"group_idx", I(0)},
         {"kv_cache_spec_kind", S("full_attention")},
         {"kv_cache_spec_sliding_window", Nil()},
         {"locality", S("LOCAL")}}),
      M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({10})}, {"medium", S("GPU")}}),
      M({{"type", S("AllBlocksCleared")}}),
      M({{"type", S("FutureThing")}, {"block_size", S("not even an int")}}),
  }));
  ASSERT_EQ(d.batch.events.size(), 3u);
  EXPECT_EQ(d.batch.skipped_unknown, 1u);
  const auto& s = d.batch.events[0].stored;
  EXPECT_EQ(s.parent, engine_hash::from_int(7));
  EXPECT_EQ(s.lora_id, 4);
  EXPECT_EQ(s.block_hashes.size(), 2u);
  EXPECT_EQ(d.batch.events[1].type, event_type::removed);
  EXPECT_EQ(d.batch.events[2].type, event_type::cleared);
}

TEST(WireDecoderReference, D03_MapBlockStoredRequiresBlockSize) {
  const auto d = decode(batch({M({{"type", S("BlockStored")},
                                  {"block_hashes", Hashes({1})},
                                  {"token_ids", Toks(k16)}})}));
  EXPECT_EQ(d.err, decode_error::none);
  ASSERT_EQ(d.faults.size(), 1u);
  EXPECT_EQ(d.faults[0].reason, decode_error::missing_field);
  EXPECT_EQ(d.faults[0].kind, event_kind::stored);
  EXPECT_STREQ(d.faults[0].what, "block_size is required");
  EXPECT_TRUE(d.batch.events.empty());
}

TEST(WireDecoderReference, D04_MapRequiredAndOptionalKeys) {
  // token_ids must be present as a key, nil allowed; parent and lora_id optional.
  const auto d = ok(batch({M({{"type", S("BlockStored")},
                              {"block_hashes", Hashes({1})},
                              {"token_ids", Nil()},
                              {"block_size", I(16)}})}));
  EXPECT_TRUE(d.batch.events.at(0).stored.token_ids.empty());
  EXPECT_FALSE(d.batch.events.at(0).stored.parent.has_value());
  expect_skipped(batch({M({{"type", S("BlockStored")}, {"block_hashes", Hashes({1})},
                          {"block_size", I(16)}})}),
                decode_error::missing_field, "no token_ids key");
  expect_skipped(batch({M({{"type", S("BlockStored")}, {"token_ids", Toks(k16)},
                          {"block_size", I(16)}})}),
                decode_error::missing_field, "stored without block_hashes");
  expect_skipped(batch({M({{"type", S("BlockRemoved")}, {"medium", S("GPU")}})}),
                decode_error::missing_field, "removed without block_hashes");
  expect_skipped(batch({M({{"block_hashes", Hashes({1})}})}), decode_error::missing_field,
                "no type");
  expect_skipped(batch({M({{"type", I(3)}})}), decode_error::bad_tag, "non-string type");
}

TEST(WireDecoderReference, D05_ParentAndTokensKept) {
  const auto d = ok(batch({stored_tuple({1}, U(7), {5, 6, 7}, 3)}));
  const auto& s = d.batch.events.at(0).stored;
  EXPECT_EQ(s.parent, engine_hash::from_int(7));
  EXPECT_EQ(s.token_ids, (std::vector<uint32_t>{5, 6, 7}));
}

TEST(WireDecoderReference, D06_LargeUint64HashIntact) {
  const auto d = ok(batch({stored_tuple({17927488143086849986ull}, Nil(), k16, 16)}));
  EXPECT_EQ(d.batch.events.at(0).stored.block_hashes.at(0).value, 17927488143086849986ull);
}

TEST(WireDecoderReference, D07_BinHashesVerbatim) {
  const std::string b4("\x01\x02\x00\x04", 4);
  const std::string b2("\xff\x00", 2);
  const auto d = ok(batch({
      A({S("BlockStored"), A({Bin(b4), Bin(b2)}), Nil(), Toks(iota_tokens(0, 32)), I(16)}),
      A({S("BlockRemoved"), A({Bin(b4), Bin(b2)})}),
  }));
  const auto& s = d.batch.events.at(0).stored;
  EXPECT_EQ(s.block_hashes.at(0).bytes, b4);
  EXPECT_EQ(s.block_hashes.at(1).bytes, b2);
  EXPECT_EQ(d.batch.events.at(1).removed.block_hashes.at(0).bytes, b4);
  EXPECT_EQ(d.batch.events.at(1).removed.block_hashes.at(1).bytes, b2);
}

TEST(WireDecoderReference, D08_StrHashIsRawBytesAndInt8IsInt) {
  const auto d = ok(batch({A({S("BlockRemoved"),
                              A({S("raw-bytes"), [](packer& p) { p.pack_fix_int8(5); }})})}));
  const auto& h = d.batch.events.at(0).removed.block_hashes;
  EXPECT_EQ(h.at(0).bytes, "raw-bytes");
  EXPECT_EQ(h.at(1), engine_hash::from_int(5));
}

TEST(WireDecoderReference, D09_NegativeHashTwosComplementAndBadTypes) {
  const auto d = ok(batch({A({S("BlockRemoved"), A({I(-1), I(-3046181290577587917)})})}));
  EXPECT_EQ(d.batch.events.at(0).removed.block_hashes.at(0).value, ~uint64_t{0});
  EXPECT_EQ(d.batch.events.at(0).removed.block_hashes.at(1).value,
            static_cast<uint64_t>(int64_t{-3046181290577587917}));
  for (const item& bad : {F64(1.5), Bool(true), A({I(1)}), M({{"a", I(1)}}), Bin(""), S("")}) {
    expect_skipped(batch({A({S("BlockRemoved"), A({bad})})}), decode_error::bad_hash,
                  "hash of a wrong type");
  }
}

TEST(WireDecoderReference, D10_NilHashCostsItsEvent) {
  expect_skipped(batch({stored16(), A({S("BlockStored"), A({I(1), Nil()}), Nil(),
                                       Toks(iota_tokens(0, 32)), I(16)})}),
                 decode_error::bad_hash, "nil hash", 1);
}

TEST(WireDecoderReference, D11_TruncatedTupleRejected) {
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil()})}), decode_error::missing_field);
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16)})}),
                decode_error::missing_field, "4 fields");
}

TEST(WireDecoderReference, D12_NoLoraFieldOrNilLora) {
  const auto five = ok(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), I(16)})}));
  EXPECT_FALSE(five.batch.events.at(0).stored.lora_id.has_value());
  const auto six = ok(batch({stored16()}));
  EXPECT_FALSE(six.batch.events.at(0).stored.lora_id.has_value());
}

TEST(WireDecoderReference, D13_NonPositiveBlockSizeWithTokensRejected) {
  expect_skipped(batch({stored_tuple({1}, Nil(), k16, 0)}), decode_error::bad_block_size, "bs 0");
  expect_skipped(batch({stored_tuple({1}, Nil(), k16, -1)}), decode_error::bad_block_size,
                "bs -1");
  expect_skipped(batch({M({{"type", S("BlockStored")},
                          {"block_hashes", Hashes({1})},
                          {"token_ids", Toks(k16)},
                          {"block_size", I(0)}})}),
                decode_error::bad_block_size, "map bs 0");
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), S("16")})}),
                decode_error::bad_block_size, "string bs");
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), Nil()})}),
                decode_error::bad_block_size, "nil bs");
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), A({I(16)})})}),
                decode_error::bad_block_size, "list bs (early example subscriber)");
}

TEST(WireDecoderReference, D13_Exception_EmptyTokensAcceptAnyBlockSize) {
  // Legacy CPU-offload location updates: token_ids=[] and block_size 0 (engine-wire §3).
  const auto d = ok(batch({A({S("BlockStored"), Hashes({1, 2}), Nil(), A({}), I(0), Nil(),
                              S("CPU")})}));
  const auto& s = d.batch.events.at(0).stored;
  EXPECT_TRUE(s.token_ids.empty());
  EXPECT_EQ(s.block_size, 0);
  EXPECT_EQ(s.medium.tier, tier::t2);
  ok(batch({A({S("BlockStored"), Hashes({1}), Nil(), Nil(), I(-1)})}));
}

TEST(WireDecoderReference, D14_LoraIdCarried) {
  const auto d = ok(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), I(16), I(7)})}));
  EXPECT_EQ(d.batch.events.at(0).stored.lora_id, 7);
}

TEST(WireDecoderReference, D15_UndecodableLoraIdCostsItsEvent) {
  // Never decoded as "no adapter": the event goes (WD2), the rest of the batch stays.
  expect_skipped(batch({stored16(), A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), I(16),
                                       A({I(1)})})}),
                 decode_error::bad_lora, "array lora_id", 1);
}

TEST(WireDecoderReference, D16_LoraIdWidths) {
  auto with_lora = [](item lora) {
    return batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), I(16), std::move(lora)})});
  };
  EXPECT_EQ(ok(with_lora(I(-5))).batch.events.at(0).stored.lora_id, -5);
  EXPECT_EQ(ok(with_lora([](packer& p) { p.pack_fix_uint64(9); })).batch.events.at(0).stored.lora_id,
            9);
  EXPECT_EQ(ok(with_lora([](packer& p) { p.pack_fix_int16(-300); }))
                .batch.events.at(0)
                .stored.lora_id,
            -300);
  EXPECT_EQ(ok(with_lora(U(uint64_t{1} << 63 >> 1))).batch.events.at(0).stored.lora_id,
            int64_t{1} << 62);
  EXPECT_EQ(ok(with_lora(I(std::numeric_limits<int64_t>::min()))).batch.events.at(0).stored.lora_id,
            std::numeric_limits<int64_t>::min());
  expect_skipped(with_lora(U(uint64_t{1} << 63)), decode_error::bad_lora, "uint > 2^63-1");
  expect_skipped(with_lora(S("7")), decode_error::bad_lora, "str");
  expect_skipped(with_lora(F64(7.0)), decode_error::bad_lora, "float");
  expect_skipped(with_lora(Bool(false)), decode_error::bad_lora, "bool");
}

TEST(WireDecoderReference, D17_TokenRangeAndNilTokens) {
  auto with_tokens = [](item toks) {
    return batch({A({S("BlockStored"), Hashes({1}), Nil(), std::move(toks), I(1)})});
  };
  expect_skipped(with_tokens(A({I(1), I(-1)})), decode_error::bad_tokens, "negative");
  expect_skipped(with_tokens(A({U(uint64_t{1} << 32)})), decode_error::bad_tokens, "2^32");
  const auto d = decode(with_tokens(A({I(-1)})));
  ASSERT_EQ(d.faults.size(), 1u);
  EXPECT_NE(std::string(d.faults[0].what).find("token id out of uint32 range"), std::string::npos);
  const auto max = ok(with_tokens(A({U(4294967295u), [](packer& p) { p.pack_fix_uint64(7); },
                                     [](packer& p) { p.pack_fix_int32(9); }})));
  EXPECT_EQ(max.batch.events.at(0).stored.token_ids,
            (std::vector<uint32_t>{4294967295u, 7, 9}));
  EXPECT_TRUE(ok(with_tokens(Nil())).batch.events.at(0).stored.token_ids.empty());
  expect_skipped(with_tokens(A({F64(1.0)})), decode_error::bad_tokens, "float token");
  expect_skipped(with_tokens(S("abc")), decode_error::bad_tokens, "str token_ids");
}

TEST(WireDecoderReference, D17_TokensOfEveryEncodingRoundTrip) {
  // Boundaries of each msgpack width, in every position relative to the payload end (the decoder
  // has a fast path that needs 5 bytes of look-ahead and a careful tail).
  std::vector<uint32_t> toks = {0, 1, 127, 128, 255, 256, 65535, 65536, 151935, 4294967295u};
  uint32_t x = 12345;
  for (int i = 0; i < 300; ++i) {
    x = x * 1103515245u + 12345u;
    toks.push_back(x >> (x % 32));
  }
  for (size_t len = 0; len <= toks.size(); len += 7) {
    const std::vector<uint32_t> part(toks.begin(), toks.begin() + static_cast<long>(len));
    // Token list last in the payload: a 2-element envelope with the event's tokens at the end.
    const std::string bytes = enc(A({F64(1), A({A({S("BlockStored"), Hashes({1}), Nil(), Toks(part),
                                                    I(1)})})}));
    const auto d = ok(bytes);
    ASSERT_EQ(d.batch.events.size(), 1u);
    EXPECT_EQ(d.batch.events[0].stored.token_ids, part) << "len " << len;
  }
  // Non-minimal encodings (legal msgpack) take the slow path and decode the same.
  const auto d = ok(batch({A({S("BlockStored"), Hashes({1}), Nil(),
                              A({[](packer& p) { p.pack_fix_uint32(5); },
                                 [](packer& p) { p.pack_fix_uint16(6); },
                                 [](packer& p) { p.pack_fix_int8(7); },
                                 [](packer& p) { p.pack_fix_int64(8); }}),
                              I(1)})}));
  EXPECT_EQ(d.batch.events.at(0).stored.token_ids, (std::vector<uint32_t>{5, 6, 7, 8}));
}

TEST(WireDecoderReference, D17_SlowEncodingsAtEveryPositionOfTheFastPath) {
  // The fast path reads tokens two at a time, the second header found inside the first's 8-byte
  // load: an encoding it does not take (here uint64 and int64 ones, legal for small ids) must
  // hand over to the slow path whether it is a pair's first or second, and wherever the pair
  // stands, with bytes of later fields after the list.
  const std::vector<uint32_t> toks = {3, 200, 70000, 300, 127, 4294967295u, 128, 65535, 65536,
                                      9, 151935, 0, 256, 255, 1, 2, 100000, 77};
  for (size_t at = 0; at < toks.size(); ++at) {
    for (const bool int64_form : {false, true}) {
      std::vector<item> list;
      for (size_t i = 0; i < toks.size(); ++i) {
        const uint32_t v = toks[i];
        if (i != at) {
          list.push_back(U(v));
        } else if (int64_form) {
          list.push_back([v](packer& p) { p.pack_fix_int64(static_cast<int64_t>(v)); });
        } else {
          list.push_back([v](packer& p) { p.pack_fix_uint64(v); });
        }
      }
      const auto d = ok(batch({A({S("BlockStored"), Hashes({1}), Nil(), A(std::move(list)), I(1)}),
                               A({S("BlockRemoved"), Hashes({1})})}));
      ASSERT_EQ(d.batch.events.size(), 2u);
      EXPECT_EQ(d.batch.events[0].stored.token_ids, toks) << "at " << at << " int64 " << int64_form;
    }
  }
}

TEST(WireDecoderReference, D18_GarbageAndShortEnvelope) {
  expect_reject(hex("ff 00 01"), decode_error::bad_envelope, "garbage");
  expect_reject(enc(A({F64(1.0)})), decode_error::bad_envelope, "[1.0]");
  expect_reject(enc(A({})), decode_error::bad_envelope, "[]");
  expect_reject("", decode_error::truncated, "empty payload");
}

TEST(WireDecoderReference, D19_SGLangEnvelopeRank3) {
  const auto d = ok(batch({stored_tuple({1}, Nil(), iota_tokens(0, 64), 64),
                           A({S("BlockRemoved"), Hashes({1})}), A({S("AllBlocksCleared")})},
                          3, 1779901681.25));
  EXPECT_EQ(d.batch.ts, 1779901681.25);
  EXPECT_EQ(d.batch.dp_rank, 3);
  ASSERT_EQ(d.batch.events.size(), 3u);
  EXPECT_EQ(d.batch.events[0].stored.block_size, 64);
  EXPECT_EQ(d.batch.events[0].stored.token_ids, iota_tokens(0, 64));
}

// Deliberately not the reference (D20 dropped the whole batch): WD2, one bad event costs one.
TEST(WireDecoderReference, D20_AMalformedEventCostsOnlyItself) {
  const item good = stored16();
  expect_skipped(batch({good, A({})}), decode_error::bad_event, "empty tuple", 1);
  expect_skipped(batch({good, A({I(1), Hashes({1})})}), decode_error::bad_tag, "int tag", 1);
  expect_skipped(batch({good, A({S("BlockRemoved")})}), decode_error::missing_field,
                 "short BlockRemoved", 1);
  expect_skipped(batch({good, Nil()}), decode_error::bad_event, "nil event", 1);
  expect_skipped(batch({good, M({{"block_hashes", Hashes({1})}})}), decode_error::missing_field,
                 "map without type", 1);
  expect_skipped(batch({good, I(5)}), decode_error::bad_event, "int event", 1);
}

TEST(WireDecoderReference, D21_ExtraFieldsIgnoredAndNilEvents) {
  const auto d = ok(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), I(16), Nil(),
                              S("GPU"), Nil(), Nil(), I(0), S("full_attention"), Nil(),
                              S("future slot"), M({{"x", A({I(1), I(2)})}})}),
                           A({S("AllBlocksCleared"), I(1), S("extra")})}));
  ASSERT_EQ(d.batch.events.size(), 2u);
  EXPECT_EQ(d.batch.events[0].stored.kind, group_kind::main);
  EXPECT_EQ(d.batch.events[1].type, event_type::cleared);
  const auto nil_events = ok(enc(A({F64(1.0), Nil(), I(0)})));
  EXPECT_TRUE(nil_events.batch.events.empty());
}

TEST(WireDecoderReference, D22_DecoderRecoversAfterBadBatch) {
  wire_decoder dec;
  kv_event_batch out;
  const std::string bad = batch({stored16(), A({S("BlockStored"), A({Nil()}), Nil(), Nil(), I(1)})});
  const std::string broken = batch({stored16()}) + "\x01";
  const std::string good = batch({stored16()});
  EXPECT_EQ(dec.decode(good.data(), good.size(), out), decode_error::none);
  EXPECT_EQ(out.events.size(), 1u);
  EXPECT_EQ(dec.decode(bad.data(), bad.size(), out), decode_error::none);  // WD2
  EXPECT_EQ(out.events.size(), 1u);
  EXPECT_EQ(dec.faults().size(), 1u);
  EXPECT_EQ(dec.decode(broken.data(), broken.size(), out), decode_error::trailing_bytes);
  EXPECT_TRUE(out.events.empty());
  EXPECT_EQ(dec.decode(good.data(), good.size(), out), decode_error::none);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].stored.token_ids, k16);
}

// ---- MUST accept -----------------------------------------------------------------------------

TEST(WireDecoderAccept, EnvelopeShapesAndRankKeys) {
  EXPECT_FALSE(ok(batch({stored16()}, std::nullopt)).batch.dp_rank.has_value());
  EXPECT_EQ(ok(batch({stored16()}, 2)).batch.dp_rank, 2);
  // Extra envelope elements ignored; a nil rank is no rank.
  EXPECT_EQ(ok(enc(A({F64(1), A({}), I(5), S("x"), A({I(1)})}))).batch.dp_rank, 5);
  EXPECT_FALSE(ok(enc(A({F64(1), A({}), Nil()}))).batch.dp_rank.has_value());
  EXPECT_FALSE(ok(enc(A({F64(1), A({}), S("r1")}))).batch.dp_rank.has_value());
  for (const char* key : {"data_parallel_rank", "attn_dp_rank", "dp_rank"}) {
    const auto d = ok(enc(M({{"events", A({stored16()})}, {key, I(4)}, {"ts", F64(2.5)},
                             {"unknown", A({I(1)})}})));
    EXPECT_EQ(d.batch.dp_rank, 4) << key;
    EXPECT_EQ(d.batch.ts, 2.5);
    EXPECT_EQ(d.batch.events.size(), 1u);
  }
  expect_reject(enc(M({{"ts", F64(1)}})), decode_error::bad_envelope, "map without events");
}

TEST(WireDecoderAccept, TimestampForms) {
  EXPECT_EQ(ok(enc(A({F32(2.5f), A({})}))).batch.ts, 2.5);
  EXPECT_EQ(ok(enc(A({I(1767225600), A({})}))).batch.ts, 1767225600.0);
  EXPECT_EQ(ok(enc(A({I(-3), A({})}))).batch.ts, -3.0);
  EXPECT_EQ(ok(enc(A({F64(std::nan("")), A({})}))).batch.ts, 0.0);
  expect_reject(enc(A({S("now"), A({})})), decode_error::bad_timestamp);
  expect_reject(enc(A({Nil(), A({})})), decode_error::bad_timestamp);
}

TEST(WireDecoderAccept, MapEventsAnyKeyOrderAndMixedForms) {
  const auto d = ok(batch({
      M({{"block_size", I(16)},
         {"token_ids", Toks(k16)},
         {"lora_name", S("sql-lora")},
         {"extra_keys", A({A({S("sql-lora")})})},
         {"block_hashes", Hashes({9})},
         {"type", S("BlockStored")}}),
      stored16(),
      M({{"block_hashes", Hashes({9})}, {"type", S("BlockRemoved")}, {"ownership", S("x")}}),
  }));
  ASSERT_EQ(d.batch.events.size(), 3u);
  const auto& s = d.batch.events[0].stored;
  EXPECT_EQ(s.lora_name, std::string("sql-lora"));
  EXPECT_EQ(s.first_tainted_block, 1u);  // lora-only extra key is clean even though it came first
  EXPECT_EQ(s.block_hashes.at(0).value, 9u);
  EXPECT_EQ(d.batch.events[2].removed.block_hashes.at(0).value, 9u);
}

TEST(WireDecoderAccept, IntHashesOfEveryWidth) {
  const auto d = ok(batch({A({S("BlockRemoved"),
                              A({[](packer& p) { p.pack_fix_uint8(200); },
                                 [](packer& p) { p.pack_fix_uint16(60000); },
                                 [](packer& p) { p.pack_fix_uint32(4000000000u); },
                                 [](packer& p) { p.pack_fix_int16(-2); },
                                 [](packer& p) { p.pack_fix_int32(-70000); }, I(-31), I(0)})})}));
  const auto& h = d.batch.events.at(0).removed.block_hashes;
  ASSERT_EQ(h.size(), 7u);
  EXPECT_EQ(h[0].value, 200u);
  EXPECT_EQ(h[1].value, 60000u);
  EXPECT_EQ(h[2].value, 4000000000u);
  EXPECT_EQ(h[3].value, static_cast<uint64_t>(int64_t{-2}));
  EXPECT_EQ(h[4].value, static_cast<uint64_t>(int64_t{-70000}));
  EXPECT_EQ(h[5].value, static_cast<uint64_t>(int64_t{-31}));
  EXPECT_EQ(h[6].value, 0u);
  EXPECT_FALSE(h[6].is_bytes());
}

TEST(WireDecoderAccept, BinHashesOfAnyLength) {
  const std::string b64(64, '\x5a');
  const std::string b16(16, '\x01');
  const auto d = ok(batch({A({S("BlockRemoved"), A({Bin(b16), Bin(b64), Bin(std::string(1, '\0'))})})}));
  const auto& h = d.batch.events.at(0).removed.block_hashes;
  EXPECT_EQ(h.at(0).bytes, b16);
  EXPECT_EQ(h.at(1).bytes, b64);
  EXPECT_EQ(h.at(2).bytes, std::string(1, '\0'));
}

TEST(WireDecoderAccept, ParentForms) {
  EXPECT_FALSE(ok(batch({stored16(Nil())})).batch.events[0].stored.parent.has_value());
  const auto zero = ok(batch({stored16(I(0))})).batch.events[0].stored.parent;
  ASSERT_TRUE(zero.has_value());  // 0 is a real parent
  EXPECT_EQ(*zero, engine_hash::from_int(0));
  EXPECT_EQ(ok(batch({stored16(I(-9))})).batch.events[0].stored.parent,
            engine_hash::from_int(static_cast<uint64_t>(int64_t{-9})));
  EXPECT_EQ(ok(batch({stored16(Bin("abcd"))})).batch.events[0].stored.parent->bytes, "abcd");
  EXPECT_EQ(ok(batch({stored16(S("p"))})).batch.events[0].stored.parent->bytes, "p");
  expect_skipped(batch({stored16(F64(1))}), decode_error::bad_parent, "float parent");
  expect_skipped(batch({stored16(Bin(""))}), decode_error::bad_parent, "empty bin parent");
  expect_skipped(batch({stored16(A({}))}), decode_error::bad_parent, "array parent");
}

TEST(WireDecoderAccept, Slot7StrNilOrSGLangMetadataMap) {
  auto with7 = [](item slot7) {
    return batch({A({S("BlockStored"), Hashes({1, 2}), Nil(), Toks(iota_tokens(0, 32)), I(16),
                     Nil(), S("GPU"), std::move(slot7)})});
  };
  EXPECT_EQ(ok(with7(S("chat"))).batch.events[0].stored.lora_name, std::string("chat"));
  EXPECT_EQ(ok(with7(S("chat"))).batch.events[0].stored.first_tainted_block, 2u);
  EXPECT_FALSE(ok(with7(Nil())).batch.events[0].stored.lora_name.has_value());
  const auto salted = ok(with7(M({{"cache_salt", S("t")}, {"session_id", S("s")}})));
  EXPECT_EQ(salted.batch.events[0].stored.first_tainted_block, 0u);
  EXPECT_FALSE(salted.batch.events[0].stored.lora_name.has_value());
  const auto unsalted = ok(with7(M({{"session_id", S("s")}, {"cache_salt", Nil()}})));
  EXPECT_EQ(unsalted.batch.events[0].stored.first_tainted_block, 2u);
  expect_skipped(with7(I(3)), decode_error::bad_lora, "int lora_name");
}

TEST(WireDecoderAccept, TopLevelCacheSaltInMapTaints) {
  auto with_salt = [](item salt) {
    return batch({M({{"type", S("BlockStored")},
                     {"block_hashes", Hashes({1, 2})},
                     {"token_ids", Toks(iota_tokens(0, 32))},
                     {"block_size", I(16)},
                     {"cache_salt", std::move(salt)},
                     {"session_id", S("abc")}})});
  };
  EXPECT_EQ(ok(with_salt(S("tenant-a"))).batch.events[0].stored.first_tainted_block, 0u);
  EXPECT_EQ(ok(with_salt(Nil())).batch.events[0].stored.first_tainted_block, 2u);
}

TEST(WireDecoderAccept, EagleBigramTokensFlattened) {
  const auto d = ok(batch({A({S("BlockStored"), Hashes({1}), Nil(),
                              A({A({I(1), I(2)}), A({I(3), U(4000000000u)})}), I(2)})}));
  const auto& s = d.batch.events.at(0).stored;
  EXPECT_TRUE(s.eagle_bigram);
  EXPECT_EQ(s.token_ids, (std::vector<uint32_t>{1, 2, 3, 4000000000u}));
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil(), A({A({I(1), I(2)}), I(3)}),
                          I(2)})}),
                decode_error::bad_tokens, "mixed ints and pairs");
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil(), A({A({I(1), I(-2)})}), I(2)})}),
                decode_error::bad_tokens, "negative in pair");
  expect_skipped(batch({A({S("BlockStored"), Hashes({1}), Nil(), A({A({I(1), I(2), I(3)})}),
                          I(2)})}),
                decode_error::bad_tokens, "triple");
}

TEST(WireDecoderAccept, ExtraKeysTaintRules) {
  auto with_extra = [](item extra, item lora_name = S("sql-lora")) {
    return batch({A({S("BlockStored"), Hashes({1, 2, 3}), Nil(), Toks(iota_tokens(0, 48)), I(16),
                     Nil(), S("GPU"), std::move(lora_name), std::move(extra)})});
  };
  auto first = [](const decoded& d) { return d.batch.events.at(0).stored.first_tainted_block; };
  EXPECT_EQ(first(ok(with_extra(Nil()))), 3u);
  EXPECT_EQ(first(ok(with_extra(A({Nil(), Nil(), Nil()})))), 3u);
  EXPECT_EQ(first(ok(with_extra(A({A({S("sql-lora")}), A({S("sql-lora")}), A({})})))), 3u);
  // salt on block 0
  EXPECT_EQ(first(ok(with_extra(A({A({S("sql-lora"), S("tenant-a")}), Nil(), Nil()})))), 0u);
  // multimodal [identifier, offset] pair on block 1
  EXPECT_EQ(first(ok(with_extra(A({Nil(), A({A({S("ab12"), I(7)})}), Nil()})))), 1u);
  // bare multimodal hash string without a lora_name
  EXPECT_EQ(first(ok(with_extra(A({Nil(), Nil(), A({S("deadbeef")})}), Nil()))), 2u);
  // prompt-embeds digest, ints, floats, bools
  EXPECT_EQ(first(ok(with_extra(A({Nil(), A({Bin(std::string(32, 'e'))}), Nil()})))), 1u);
  EXPECT_EQ(first(ok(with_extra(A({A({I(3), F64(1.5), Bool(true)}), Nil(), Nil()})))), 0u);
  // shorter than block_hashes: the undescribed blocks are not shown clean
  EXPECT_EQ(first(ok(with_extra(A({Nil()})))), 1u);
  // longer: the surplus is ignored
  EXPECT_EQ(first(ok(with_extra(A({Nil(), Nil(), Nil(), A({S("x")})})))), 3u);
  // a bare non-array entry is not clean
  EXPECT_EQ(first(ok(with_extra(A({Nil(), S("salt"), Nil()})))), 1u);
  expect_skipped(with_extra(S("oops")), decode_error::bad_extra_keys, "str extra_keys");
  expect_skipped(with_extra(I(1)), decode_error::bad_extra_keys, "int extra_keys");
}

TEST(WireDecoderAccept, MediumMapping) {
  auto tier_of = [](item medium) {
    const auto d = ok(batch({A({S("BlockRemoved"), Hashes({1}), std::move(medium)})}));
    return d.batch.events.at(0).removed.medium;
  };
  struct row {
    const char* s;
    tier t;
    medium_id id;
  };
  // engine-wire §3: vLLM, SGLang, LMCache and Dynamo's aliases, case-insensitive.
  for (const row& r : std::vector<row>{{"GPU", tier::t1, medium_id::gpu},
                                       {"gpu", tier::t1, medium_id::gpu},
                                       {"CPU", tier::t2, medium_id::cpu},
                                       {"cpu", tier::t2, medium_id::cpu},
                                       {"CPU_PINNED", tier::t2, medium_id::cpu_pinned},
                                       {"lmcache-l1", tier::t2, medium_id::lmcache_l1},
                                       {"LMCACHE-L1", tier::t2, medium_id::lmcache_l1},
                                       {"CPU_TIER1", tier::t2, medium_id::cpu_tier1},
                                       {"CPU_TIER2", tier::t3, medium_id::cpu_tier2},
                                       {"DISK", tier::t3, medium_id::disk},
                                       {"FS", tier::t3, medium_id::fs},
                                       {"OBJ", tier::t3, medium_id::obj},
                                       {"STORAGE", tier::t3, medium_id::storage},
                                       {"EXTERNAL", tier::t3, medium_id::external},
                                       {"lmcache-l2", tier::t3, medium_id::lmcache_l2},
                                       {"lmcache-l2-redis", tier::t3, medium_id::lmcache_l2},
                                       {"lmcache-l2-s3", tier::t3, medium_id::lmcache_l2},
                                       {"NVME", tier::t3, medium_id::nvme},
                                       {"remote", tier::t3, medium_id::remote},
                                       {"QUANTUM_FOAM", tier::t3, medium_id::unknown},
                                       {"lmcache-l3", tier::t3, medium_id::unknown},
                                       {"", tier::t3, medium_id::unknown}}) {
    const medium_info m = tier_of(S(r.s));
    EXPECT_EQ(m.tier, r.t) << r.s;
    EXPECT_EQ(m.id, r.id) << r.s;
    EXPECT_EQ(m.known(), r.id != medium_id::unknown) << r.s;
    EXPECT_EQ(m.text, r.id == medium_id::unknown ? std::string(r.s) : std::string()) << r.s;
  }
  EXPECT_EQ(tier_of(Nil()).tier, tier::t1);
  EXPECT_EQ(tier_of(Nil()).id, medium_id::none);
  EXPECT_TRUE(tier_of(Nil()).known());
  EXPECT_EQ(tier_of(S(std::string(300, 'x'))).text.size(), 64u) << "unknown text is bounded";
  expect_skipped(batch({A({S("BlockRemoved"), Hashes({1}), I(1)})}), decode_error::bad_medium);
}

TEST(WireDecoderAccept, RemoteLocalityIsNeverWarmerThanT3) {
  auto stored_with = [](std::vector<std::pair<std::string, item>> extra) {
    std::vector<std::pair<std::string, item>> kv{
        {"type", S("BlockStored")}, {"block_hashes", Hashes({1})}, {"parent_block_hash", Nil()},
        {"token_ids", Toks(k16)},    {"block_size", I(16)},         {"lora_id", Nil()},
        {"lora_name", Nil()}};
    kv.insert(kv.end(), extra.begin(), extra.end());
    return ok(batch({M(kv)})).batch.events.at(0).stored.medium;
  };
  // Either key order: locality before medium must survive the medium's classification.
  auto m = stored_with({{"locality", S("REMOTE")}, {"medium", S("GPU")}});
  EXPECT_EQ(m.tier, tier::t3);
  EXPECT_TRUE(m.remote);
  EXPECT_EQ(m.id, medium_id::gpu);
  m = stored_with({{"medium", S("CPU")}, {"locality", S("REMOTE")}});
  EXPECT_EQ(m.tier, tier::t3);
  m = stored_with({{"medium", S("GPU")}, {"locality", S("LOCAL")}});
  EXPECT_EQ(m.tier, tier::t1);
  EXPECT_FALSE(m.remote);
  m = stored_with({{"medium", S("CPU")}, {"locality", Nil()}});
  EXPECT_EQ(m.tier, tier::t2);
  m = stored_with({{"medium", S("GPU")}, {"locality", S("ELSEWHERE")}});
  EXPECT_EQ(m.tier, tier::t3) << "an unknown locality is treated as remote";
  const auto rm = ok(batch({M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({1})},
                               {"medium", S("STORAGE")}, {"locality", S("REMOTE")}})}));
  EXPECT_EQ(rm.batch.events.at(0).removed.medium.tier, tier::t3);
  EXPECT_TRUE(rm.batch.events.at(0).removed.medium.remote);
  expect_skipped(batch({M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({1})},
                          {"medium", S("GPU")}, {"locality", I(1)}})}),
                decode_error::bad_medium);
}

TEST(WireDecoderAccept, OriginOfAStore) {
  auto origin_of = [](item origin) {
    return ok(batch({M({{"type", S("BlockStored")}, {"block_hashes", Hashes({1})},
                        {"parent_block_hash", Nil()}, {"token_ids", Toks(k16)},
                        {"block_size", I(16)}, {"lora_id", Nil()}, {"medium", S("GPU")},
                        {"lora_name", Nil()}, {"origin", std::move(origin)}})}))
        .batch.events.at(0)
        .stored.origin;
  };
  EXPECT_EQ(origin_of(S("REUSED")), store_origin::reused);
  EXPECT_EQ(origin_of(S("reused")), store_origin::reused);
  EXPECT_EQ(origin_of(S("NEW")), store_origin::fresh);
  EXPECT_EQ(origin_of(S("SOMETHING_ELSE")), store_origin::unspecified);
  EXPECT_EQ(origin_of(Nil()), store_origin::unspecified);
  expect_skipped(batch({M({{"type", S("BlockStored")}, {"block_hashes", Hashes({1})},
                          {"parent_block_hash", Nil()}, {"token_ids", Toks(k16)},
                          {"block_size", I(16)}, {"origin", I(3)}})}),
                decode_error::bad_origin);
}

TEST(WireDecoderAccept, RemainingCopyCountsOnARemoval) {
  auto removed_with = [](item counts) {
    return M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({1, 2})},
              {"medium", S("GPU")}, {"remaining_copy_counts", std::move(counts)}});
  };
  auto d = ok(batch({removed_with(A({I(2), I(0)}))}));
  const block_removed& rm = d.batch.events.at(0).removed;
  EXPECT_TRUE(rm.has_remaining_copies);
  EXPECT_EQ(rm.remaining_copies, (std::vector<uint32_t>{2, 0}));
  d = ok(batch({removed_with(Nil())}));
  EXPECT_FALSE(d.batch.events.at(0).removed.has_remaining_copies);
  d = ok(batch({removed_with(A({U(uint64_t{1} << 40), I(1)}))}));
  EXPECT_EQ(d.batch.events.at(0).removed.remaining_copies.at(0), 0xffffffffu) << "saturates";
  // Its length is the index's business: decoded as sent.
  d = ok(batch({removed_with(A({I(1)}))}));
  EXPECT_EQ(d.batch.events.at(0).removed.remaining_copies.size(), 1u);
  expect_skipped(batch({removed_with(A({I(-1), I(0)}))}), decode_error::bad_copy_counts);
  expect_skipped(batch({removed_with(A({S("1"), I(0)}))}), decode_error::bad_copy_counts);
  expect_skipped(batch({removed_with(I(1))}), decode_error::bad_copy_counts);
  // A reused event slot carries no stale counts.
  wire_decoder dec;
  kv_event_batch out;
  const auto with = batch({removed_with(A({I(3), I(3)}))});
  const auto without = batch({M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({1})}})});
  ASSERT_EQ(dec.decode(with.data(), with.size(), out), decode_error::none);
  ASSERT_EQ(dec.decode(without.data(), without.size(), out), decode_error::none);
  EXPECT_FALSE(out.events.at(0).removed.has_remaining_copies);
  EXPECT_TRUE(out.events.at(0).removed.remaining_copies.empty());
}

TEST(WireDecoderAccept, BinWrappedEventsDecodeLikeAnyOther) {
  // An llm-d storage publisher: [ts, [bin(event), ...]], 2-element envelope.
  const std::string stored = enc(stored16());
  const std::string removed = enc(A({S("BlockRemoved"), Hashes({42}), S("STORAGE")}));
  const std::string cleared = enc(M({{"type", S("AllBlocksCleared")}}));
  auto d = ok(batch({Bin(stored), Bin(removed), A({S("BlockRemoved"), Hashes({7})}), Bin(cleared)},
                    std::nullopt));
  ASSERT_EQ(d.batch.events.size(), 4u);
  EXPECT_EQ(d.batch.events[0].type, event_type::stored);
  EXPECT_EQ(d.batch.events[0].stored.block_hashes.at(0).value, 42u);
  EXPECT_EQ(d.batch.events[0].stored.token_ids, k16);
  EXPECT_EQ(d.batch.events[1].type, event_type::removed);
  EXPECT_EQ(d.batch.events[1].removed.medium.tier, tier::t3);
  EXPECT_EQ(d.batch.events[2].removed.block_hashes.at(0).value, 7u);
  EXPECT_EQ(d.batch.events[3].type, event_type::cleared);
  // Unknown tags inside a bin are skipped like unwrapped ones.
  d = ok(batch({Bin(enc(A({S("SomeFutureEvent"), I(1)}))), Bin(stored)}));
  EXPECT_EQ(d.batch.skipped_unknown, 1u);
  EXPECT_EQ(d.batch.events.size(), 1u);
  // A wrapped event that is malformed, has bytes after it, is not msgpack or wraps a bin again
  // costs itself (WD2): the bin delimits it.
  expect_skipped(batch({Bin(enc(A({S("BlockStored"), Hashes({1})})))}), decode_error::missing_field);
  expect_skipped(batch({Bin(stored + "\x01")}), decode_error::bad_event, "trailing");
  expect_skipped(batch({Bin(stored.substr(0, stored.size() - 3))}), decode_error::truncated);
  expect_skipped(batch({Bin(std::string("\xc1"))}), decode_error::bad_event, "not msgpack");
  expect_skipped(batch({Bin(enc(Bin(stored)))}), decode_error::bad_event, "nested");
  expect_skipped(batch({Bin("")}), decode_error::truncated, "empty bin");
  // The same limits: the hashes inside bins add up per batch.
  wire_decoder::limits l;
  l.max_hashes_per_batch = 2;
  EXPECT_EQ(decode(batch({Bin(stored), Bin(stored), Bin(stored)}), l).err,
            decode_error::too_many_hashes);
  l = {};
  l.max_events = 2;
  EXPECT_EQ(decode(batch({Bin(stored), Bin(stored), Bin(stored)}), l).err,
            decode_error::too_many_events);
}

TEST(WireDecoderAccept, GroupAndSpecFields) {
  auto with = [](item group, item kind, item window) {
    return batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(k16), I(16), Nil(), S("GPU"),
                     Nil(), Nil(), std::move(group), std::move(kind), std::move(window)})});
  };
  auto s0 = [](const decoded& d) { return d.batch.events.at(0).stored; };
  EXPECT_EQ(s0(ok(with(I(3), S("mla_attention"), Nil()))).kind, group_kind::main);
  EXPECT_EQ(s0(ok(with(I(3), S("sink_full_attention"), Nil()))).kind, group_kind::main);
  EXPECT_EQ(s0(ok(with(I(3), S("mamba"), Nil()))).kind, group_kind::other);
  EXPECT_EQ(s0(ok(with(I(3), S("something_new"), Nil()))).kind, group_kind::other);
  EXPECT_EQ(s0(ok(with(Nil(), Nil(), Nil()))).kind, group_kind::unspecified);
  EXPECT_EQ(s0(ok(with(I(1), S("sliding_window"), I(4096)))).sliding_window, 4096);
  expect_skipped(with(I(-1), Nil(), Nil()), decode_error::bad_group, "negative group");
  expect_skipped(with(S("0"), Nil(), Nil()), decode_error::bad_group, "str group");
  expect_skipped(with(U(uint64_t{1} << 63), Nil(), Nil()), decode_error::bad_group, "huge group");
  expect_skipped(with(I(0), I(1), Nil()), decode_error::bad_spec, "int kind");
  expect_skipped(with(I(0), Nil(), S("w")), decode_error::bad_spec, "str window");
  expect_skipped(batch({A({S("BlockRemoved"), Hashes({1}), Nil(), I(-2)})}),
                decode_error::bad_group, "removed negative group");
}

TEST(WireDecoderAccept, EmptyEventsAndEmptyHashes) {
  EXPECT_TRUE(ok(batch({})).batch.events.empty());
  const auto d = ok(batch({A({S("BlockRemoved"), A({})})}));
  EXPECT_TRUE(d.batch.events.at(0).removed.block_hashes.empty());
}

TEST(WireDecoderAccept, UnknownTagsSkippedAndCounted) {
  const auto d = ok(batch({A({S("Future1")}), stored16(), M({{"type", S("Future2")}}),
                           A({S("blockstored"), I(1)})}));
  EXPECT_EQ(d.batch.events.size(), 1u);
  EXPECT_EQ(d.batch.skipped_unknown, 3u);
}

TEST(WireDecoderAccept, ExtTypesInSkippedFieldsAreValid) {
  // A foreign producer's unknown key holding msgpack ext values must not break decoding.
  const std::string ext = hex("d4 01 ff d5 02 00 01 c7 03 05 61 62 63 d8 07") + std::string(16, 'x');
  const auto d = ok(batch({M({{"type", S("BlockRemoved")},
                              {"future", Raw(hex("94") + ext)},
                              {"block_hashes", Hashes({1})}})}));
  EXPECT_EQ(d.batch.events.size(), 1u);
}

// ---- SHOULD reject ---------------------------------------------------------------------------

TEST(WireDecoderReject, NotMsgpackTrailingAndTruncated) {
  const std::string good = batch({stored16()});
  expect_reject(good + hex("c0"), decode_error::trailing_bytes, "trailing nil");
  for (size_t cut = 1; cut < good.size(); ++cut) {
    const auto d = decode(good.substr(0, cut));
    EXPECT_NE(d.err, decode_error::none) << "cut at " << cut;
    EXPECT_TRUE(d.batch.events.empty());
  }
  // An event whose bytes are not msgpack has no end to skip to: WD1.
  expect_reject(hex("92 cb 41 da 55 6e 40 20 00 00 91 c1"), decode_error::not_msgpack, "c1 event");
  expect_reject(enc(A({F64(1), A({M({{"type", S("X")}, {"a", Raw(hex("c1"))}})})})),
                decode_error::not_msgpack, "c1 in a skipped value");
  expect_reject(hex("c1"), decode_error::bad_envelope, "c1 top level");
  expect_reject(enc(S("hello")), decode_error::bad_envelope, "str top level");
  expect_reject(enc(A({F64(1), S("events")})), decode_error::bad_events, "events is a str");
  expect_reject(enc(A({F64(1), M({})})), decode_error::bad_events, "events is a map");
}

TEST(WireDecoderReject, LyingLengthHeadersFailBeforeAllocation) {
  // array32 claiming 2^32-1 events/hashes/tokens in a few bytes.
  expect_reject(hex("92 cb 41 da 55 6e 40 20 00 00 dd ff ff ff ff"), decode_error::truncated,
                "events count");
  expect_reject(batch({Raw(hex("92 ac") + "BlockRemoved" + hex("dd ff ff ff ff 01"))}),
                decode_error::truncated, "hash count");
  expect_reject(batch({Raw(hex("95 ab") + "BlockStored" + hex("91 01 c0 dd 7f ff ff ff 01 10"))}),
                decode_error::truncated, "token count");
  expect_reject(batch({Raw(hex("92 ac") + "BlockRemoved" + hex("91 c6 ff ff ff ff 00"))}),
                decode_error::truncated, "bin length");
  expect_reject(batch({M({{"type", S("X")}, {"skip", Raw(hex("df ff ff ff ff"))}})}),
                decode_error::truncated, "map count in skipped value");
}

TEST(WireDecoderReject, DeepNestingDoesNotRecurse) {
  // 200k nested arrays inside an unknown field: skipped iteratively, then trailing check.
  std::string deep(200000, '\x91');
  deep += hex("c0");
  const auto d = decode(batch({M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({1})},
                                  {"future", Raw(deep)}})}));
  EXPECT_EQ(d.err, decode_error::none) << d.detail;
  expect_reject(batch({M({{"type", S("X")}, {"future", Raw(std::string(200000, '\x91'))}})}),
                decode_error::truncated, "unterminated nesting");
}

// ---- WD2: one bad event costs one event ------------------------------------------------------

// The report: one map-era batch of a good store, a store whose block_hashes is a str and
// whose token_ids is a map, and a good store on a new root. Both good ones decode.
TEST(WireDecoderFaults, IssueBatchKeepsBothGoodStores) {
  auto good = [](uint64_t h, uint32_t first) {
    return M({{"type", S("BlockStored")}, {"block_hashes", Hashes({h})},
              {"parent_block_hash", Nil()}, {"token_ids", Toks(iota_tokens(first, 16))},
              {"block_size", I(16)}, {"lora_id", Nil()}, {"medium", S("GPU")},
              {"lora_name", Nil()}});
  };
  const auto d = decode(batch({good(1, 0), M({{"type", S("BlockStored")},
                                              {"block_hashes", S("deadbeef")},
                                              {"parent_block_hash", Nil()},
                                              {"token_ids", M({{"a", I(1)}})},
                                              {"block_size", I(16)}}),
                               good(2, 100)}));
  ASSERT_EQ(d.err, decode_error::none) << d.detail;
  ASSERT_EQ(d.batch.events.size(), 2u);
  EXPECT_EQ(d.batch.events[0].stored.block_hashes.at(0).value, 1u);
  EXPECT_EQ(d.batch.events[1].stored.block_hashes.at(0).value, 2u);
  EXPECT_EQ(d.batch.events[1].stored.token_ids, iota_tokens(100, 16));
  ASSERT_EQ(d.faults.size(), 1u);
  EXPECT_EQ(d.faults[0].index, 1u);
  EXPECT_EQ(d.faults[0].kind, event_kind::stored);
  EXPECT_EQ(d.faults[0].reason, decode_error::bad_hash);
}

// One undecodable event of each kind, between good ones: the good ones decode in order, the bad
// ones are reported by index, kind and reason, and where they sat among the good ones.
TEST(WireDecoderFaults, OneBadOfEachKindTheRestInOrder) {
  const auto d = decode(batch({
      stored_tuple({1}, Nil(), k16, 16),                                          // 0 good
      A({S("BlockStored"), Hashes({2}), Nil(), Toks(k16), S("16")}),              // 1 stored
      A({S("BlockRemoved"), Hashes({1})}),                                        // 2 good
      A({S("BlockRemoved"), S("not a list")}),                                    // 3 removed
      M({{"type", S("AllBlocksCleared")}, {"medium", A({})}}),                    // 4 cleared
      stored_tuple({3}, Nil(), k16, 16),                                          // 5 good
      A({F64(2.5), Hashes({1})}),                                                 // 6 unknown
      A({S("FutureEvent"), M({{"x", A({Nil(), F64(1)})}}), S("bad fields")}),     // 7 skipped
      M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({3})}}),            // 8 good
  }));
  ASSERT_EQ(d.err, decode_error::none) << d.detail;
  ASSERT_EQ(d.batch.events.size(), 4u);
  EXPECT_EQ(d.batch.events[0].stored.block_hashes.at(0).value, 1u);
  EXPECT_EQ(d.batch.events[1].type, event_type::removed);
  EXPECT_EQ(d.batch.events[2].stored.block_hashes.at(0).value, 3u);
  EXPECT_EQ(d.batch.events[3].removed.block_hashes.at(0).value, 3u);
  EXPECT_EQ(d.batch.skipped_unknown, 1u) << "an unknown tag is no fault, whatever its fields (WD3)";
  ASSERT_EQ(d.faults.size(), 4u);
  const struct {
    uint32_t index, before;
    event_kind kind;
    decode_error reason;
  } want[] = {{1, 1, event_kind::stored, decode_error::bad_block_size},
              {3, 2, event_kind::removed, decode_error::bad_hash},
              {4, 2, event_kind::cleared, decode_error::bad_medium},
              {6, 3, event_kind::unknown, decode_error::bad_tag}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(d.faults[i].index, want[i].index) << i;
    EXPECT_EQ(d.faults[i].decoded_before, want[i].before) << i;
    EXPECT_EQ(d.faults[i].kind, want[i].kind) << i;
    EXPECT_EQ(d.faults[i].reason, want[i].reason) << i << ": " << d.faults[i].what;
  }
}

TEST(WireDecoderFaults, AFailedEventLeavesNothingInTheNextOne) {
  // The bad store fails after its hashes and tokens were read into the slot the next event gets.
  const auto d = decode(batch({A({S("BlockStored"), Hashes({7, 8}), U(9), Toks(iota_tokens(0, 32)),
                                  I(16), A({I(1)})}),
                               A({S("BlockStored"), Hashes({5}), Nil(), Toks(k16), I(16)})}));
  ASSERT_EQ(d.batch.events.size(), 1u);
  const auto& s = d.batch.events[0].stored;
  EXPECT_EQ(s.block_hashes, (std::vector<engine_hash>{engine_hash::from_int(5)}));
  EXPECT_FALSE(s.parent.has_value());
  EXPECT_EQ(s.token_ids, k16);
  EXPECT_EQ(d.faults.at(0).reason, decode_error::bad_lora);
}

TEST(WireDecoderFaults, FaultsAreForTheLastDecodeOnly) {
  wire_decoder dec;
  kv_event_batch out;
  const std::string bad = batch({A({S("BlockRemoved"), S("x")}), stored16()});
  ASSERT_EQ(dec.decode(bad.data(), bad.size(), out), decode_error::none);
  EXPECT_EQ(dec.faults().size(), 1u);
  const std::string good = batch({stored16()});
  ASSERT_EQ(dec.decode(good.data(), good.size(), out), decode_error::none);
  EXPECT_TRUE(dec.faults().empty());
  // A payload that is not a batch reports no faults even after bad events (WD1 wins).
  const std::string broken = bad + "x";
  ASSERT_EQ(dec.decode(broken.data(), broken.size(), out), decode_error::trailing_bytes);
  EXPECT_TRUE(dec.faults().empty());
  EXPECT_TRUE(out.events.empty());
}

// WD4: AllBlocksCleared with a medium clears every tier; array extras ignored, a map key checked.
TEST(WireDecoderFaults, ClearedMediumArrayExtrasIgnoredMapKeyChecked) {
  // ATOM #869: AllBlocksCleared may name a medium; kvrelay clears everything either way.
  auto d = decode(batch({A({S("AllBlocksCleared"), S("CPU")}), A({S("AllBlocksCleared"), Nil()}),
                         A({S("AllBlocksCleared"), I(1), S("extra")}),
                         M({{"type", S("AllBlocksCleared")}, {"medium", S("GPU")}}),
                         M({{"type", S("AllBlocksCleared")}, {"medium", Nil()}, {"x", I(1)}})}));
  EXPECT_EQ(d.batch.events.size(), 5u);
  EXPECT_TRUE(d.faults.empty());
  expect_skipped(batch({M({{"type", S("AllBlocksCleared")}, {"medium", I(3)}})}),
                 decode_error::bad_medium, "map medium of the wrong type");
}

// ---- limits and buffer reuse -----------------------------------------------------------------

TEST(WireDecoderLimits, EachLimitEnforced) {
  wire_decoder::limits l;
  l.max_events = 2;
  EXPECT_EQ(decode(batch({stored16(), stored16(), stored16()}), l).err,
            decode_error::too_many_events);
  EXPECT_EQ(decode(batch({stored16(), stored16()}), l).err, decode_error::none);

  // Per-event limits cost the event (WD2); batch totals cost the batch (WD1).
  l = {};
  l.max_hashes_per_event = 2;
  auto over = decode(batch({A({S("BlockRemoved"), Hashes({1, 2, 3})}), stored16()}), l);
  EXPECT_EQ(over.err, decode_error::none);
  ASSERT_EQ(over.faults.size(), 1u);
  EXPECT_EQ(over.faults[0].reason, decode_error::too_many_hashes);
  EXPECT_EQ(over.faults[0].kind, event_kind::removed);
  EXPECT_EQ(over.batch.events.size(), 1u);
  l = {};
  l.max_hashes_per_batch = 3;
  EXPECT_EQ(decode(batch({A({S("BlockRemoved"), Hashes({1, 2})}),
                          A({S("BlockRemoved"), Hashes({1, 2})})}),
                   l)
                .err,
            decode_error::too_many_hashes);
  l = {};
  l.max_tokens_per_event = 15;
  over = decode(batch({stored16()}), l);
  ASSERT_EQ(over.faults.size(), 1u);
  EXPECT_EQ(over.faults[0].reason, decode_error::too_many_tokens);
  l = {};
  l.max_tokens_per_event = 3;
  over = decode(batch({A({S("BlockStored"), Hashes({1}), Nil(), A({A({I(1), I(2)}), A({I(3), I(4)})}),
                          I(2)})}),
                l);
  ASSERT_EQ(over.faults.size(), 1u) << "EAGLE pairs count twice";
  EXPECT_EQ(over.faults[0].reason, decode_error::too_many_tokens);
  l = {};
  l.max_tokens_per_batch = 20;
  EXPECT_EQ(decode(batch({stored16(), stored16()}), l).err, decode_error::too_many_tokens);
  l = {};
  const std::string payload = batch({stored16()});
  l.max_payload_bytes = payload.size() - 1;
  const auto d = decode(payload, l);
  EXPECT_EQ(d.err, decode_error::too_large);
  EXPECT_TRUE(d.batch.events.empty());
}

TEST(WireDecoderLimits, ErrorNamesAreStableSnakeCase) {
  EXPECT_STREQ(to_string(decode_error::none), "none");
  EXPECT_STREQ(to_string(decode_error::bad_block_size), "bad_block_size");
  EXPECT_STREQ(to_string(decode_error::trailing_bytes), "trailing_bytes");
  for (size_t i = 0; i < decode_error_count; ++i) {
    const std::string s = to_string(static_cast<decode_error>(i));
    EXPECT_NE(s, "unknown");
    for (char c : s) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '_') << s;
  }
  EXPECT_STREQ(to_string(decode_error::bad_components), "bad_components");
  EXPECT_STREQ(to_string(event_kind::stored), "stored");
  EXPECT_STREQ(to_string(event_kind::removed), "removed");
  EXPECT_STREQ(to_string(event_kind::cleared), "cleared");
  EXPECT_STREQ(to_string(event_kind::unknown), "unknown");
}

TEST(WireDecoderReuse, BuffersReusedAcrossBatches) {
  wire_decoder dec;
  kv_event_batch out;
  const std::string p = batch({stored_tuple({1, 2, 3, 4}, Nil(), iota_tokens(0, 64), 16),
                               A({S("BlockRemoved"), Hashes({1})})});
  ASSERT_EQ(dec.decode(p.data(), p.size(), out), decode_error::none);
  const uint32_t* tokens = out.events[0].stored.token_ids.data();
  const engine_hash* hashes = out.events[0].stored.block_hashes.data();
  ASSERT_EQ(dec.decode(p.data(), p.size(), out), decode_error::none);
  EXPECT_EQ(out.events[0].stored.token_ids.data(), tokens);
  EXPECT_EQ(out.events[0].stored.block_hashes.data(), hashes);
  // An error in between parks the events; the next batch gets the same buffers back.
  const std::string bad = "\x91";
  ASSERT_NE(dec.decode(bad.data(), bad.size(), out), decode_error::none);
  ASSERT_EQ(dec.decode(p.data(), p.size(), out), decode_error::none);
  bool seen = false;
  for (const auto& e : out.events) seen = seen || e.stored.token_ids.data() == tokens;
  EXPECT_TRUE(seen);
}

TEST(WireDecoderReuse, ReusedEventCarriesNoStaleFields) {
  wire_decoder dec;
  kv_event_batch out;
  const std::string rich = batch({A({S("BlockStored"), Hashes({1, 2}), U(7), Toks(iota_tokens(0, 32)),
                                     I(16), I(3), S("CPU"), S("lora"), A({A({S("salt")}), Nil()}),
                                     I(2), S("sliding_window"), I(64)})});
  const std::string plain = batch({A({S("BlockStored"), Hashes({5}), Nil(), Toks(k16), I(16)})});
  ASSERT_EQ(dec.decode(rich.data(), rich.size(), out), decode_error::none);
  ASSERT_EQ(out.events[0].stored.first_tainted_block, 0u);
  ASSERT_EQ(dec.decode(plain.data(), plain.size(), out), decode_error::none);
  const auto& s = out.events.at(0).stored;
  EXPECT_EQ(s.block_hashes, (std::vector<engine_hash>{engine_hash::from_int(5)}));
  EXPECT_FALSE(s.parent.has_value());
  EXPECT_FALSE(s.lora_id.has_value());
  EXPECT_FALSE(s.lora_name.has_value());
  EXPECT_EQ(s.medium.tier, tier::t1);
  EXPECT_FALSE(s.group_idx.has_value());
  EXPECT_EQ(s.kind, group_kind::unspecified);
  EXPECT_FALSE(s.sliding_window.has_value());
  EXPECT_EQ(s.first_tainted_block, 1u);
  EXPECT_EQ(s.token_ids, k16);
}

}  // namespace
}  // namespace kvrelay::test
