// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The producers of docs/producers.md, byte for byte as each writes them (producer_bytes.hpp):
// TensorRT-LLM's native publisher, ROCm ATOM's two eras, vLLM's offload placeholders and
// session_id, SGLang's component_types. None of their well-formed events is a fault (WD2).
#include "actors/decoder/batch_router.hpp"
#include "decoder_test_util.hpp"
#include "producer_bytes.hpp"

#include <gtest/gtest.h>

namespace kvrelay::test {
namespace {

const std::vector<uint32_t> toks = [] {
  std::vector<uint32_t> t{151644, 872, 198};
  for (uint32_t v = 100; v <= 112; ++v) t.push_back(v);
  return t;
}();
constexpr uint64_t H = 0xbf17ef8473ec96e9ULL;
constexpr uint64_t P = 0x834ab12f98a3dcb0ULL;
constexpr int64_t Hs = -8529349790023047566LL;
constexpr int64_t Ps = -5132147273039293687LL;

decoded clean_bytes(const std::string& bytes) {
  auto d = decode(bytes);
  EXPECT_EQ(d.err, decode_error::none) << d.detail;
  EXPECT_TRUE(d.faults.empty()) << (d.faults.empty() ? "" : d.faults[0].what);
  return d;
}
decoded clean(const char* dump) { return clean_bytes(hex(dump)); }

TEST(Producers, TensorRtLlmStoreAndRemoval) {
  const auto d = clean(producer::trt_stored_env);
  ASSERT_EQ(d.batch.events.size(), 1u);
  const auto& s = d.batch.events[0].stored;
  // Signed int64 hashes keep their two's complement: the identity the removal names.
  EXPECT_EQ(s.block_hashes,
            std::vector<engine_hash>{engine_hash::from_int(static_cast<uint64_t>(Hs))});
  EXPECT_EQ(s.parent, engine_hash::from_int(static_cast<uint64_t>(Ps)));
  EXPECT_EQ(s.token_ids, toks);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_EQ(s.medium.id, medium_id::gpu);
  EXPECT_EQ(s.first_tainted_block, 1u);
  EXPECT_EQ(d.batch.dp_rank, 0);
  const auto r = clean(producer::trt_removed_env);
  ASSERT_EQ(r.batch.events.size(), 1u);
  EXPECT_EQ(r.batch.events[0].removed.block_hashes.at(0), s.block_hashes.at(0));
}

// A TensorRT-LLM BlockStored of two 2-token blocks with the given token_ids and mm_keys.
std::string trt_two_blocks(item tokens, item mm_keys) {
  return batch({M({{"type", S("BlockStored")},
                   {"block_hashes", Hashes({1, 2})},
                   {"parent_block_hash", Nil()},
                   {"token_ids", std::move(tokens)},
                   {"block_size", I(2)},
                   {"lora_id", Nil()},
                   {"medium", S("GPU")},
                   {"lora_name", Nil()},
                   {"mm_keys", std::move(mm_keys)}})});
}

// WD5: TensorRT-LLM's mm_keys and string token ids taint the blocks they cover.
TEST(Producers, TensorRtLlmMultimodalTokensAndKeysTaint) {
  const auto d = clean(producer::trt_mm_env);
  ASSERT_EQ(d.batch.events.size(), 1u);
  const auto& s = d.batch.events[0].stored;
  ASSERT_EQ(s.token_ids.size(), 16u);
  EXPECT_EQ(s.token_ids[3], 0u) << "the digest string reads as 0";
  EXPECT_EQ(s.token_ids[4], 151937u);
  EXPECT_EQ(s.first_tainted_block, 0u) << "fail-closed like vLLM's multimodal extra_keys";

  // Two blocks, the second multimodal: the first stays indexable, by either signal alone.
  const item key = A({M({{"type", S("mm_key")}, {"hash", S("ab")}, {"start_offset", I(0)}})});
  const item ints = A({I(1), I(2), I(3), I(4)});
  auto first_tainted = [](const std::string& bytes) {
    return clean_bytes(bytes).batch.events.at(0).stored.first_tainted_block;
  };
  EXPECT_EQ(first_tainted(trt_two_blocks(ints, A({A({}), key}))), 1u) << "mm_keys";
  EXPECT_EQ(first_tainted(trt_two_blocks(A({I(1), I(2), S("ab"), I(4)}), Nil())), 1u)
      << "a digest token in block 1";
  EXPECT_EQ(first_tainted(trt_two_blocks(ints, A({A({}), A({})}))), 2u) << "empty lists: clean";
  EXPECT_EQ(first_tainted(trt_two_blocks(ints, A({A({})}))), 1u) << "too short: unknown";
  EXPECT_EQ(first_tainted(trt_two_blocks(ints, A({Nil(), Nil()}))), 2u);
  // mm_keys that is not a list is no mm_keys at all: a fault, like a bad extra_keys.
  const auto bad = decode(trt_two_blocks(ints, S("x")));
  ASSERT_EQ(bad.faults.size(), 1u);
  EXPECT_EQ(bad.faults[0].reason, decode_error::bad_extra_keys);
}

TEST(Producers, AtomSingleFrameEra) {
  const auto d = clean(producer::atom0_env);
  ASSERT_EQ(d.batch.events.size(), 3u);
  const auto& s = d.batch.events[0].stored;
  EXPECT_EQ(s.block_hashes, std::vector<engine_hash>{engine_hash::from_int(H)});
  EXPECT_EQ(s.parent, engine_hash::from_int(P));
  EXPECT_EQ(s.group_idx, 0) << "#869 defaults group_idx to 0";
  EXPECT_EQ(s.kind, group_kind::unspecified);
  EXPECT_EQ(d.batch.events[1].removed.group_idx, 0);
  EXPECT_EQ(d.batch.events[2].type, event_type::cleared) << "[AllBlocksCleared, nil medium]";
}

TEST(Producers, AtomTokenOffsetRemoteAndTransferredEvents) {
  const auto d = clean(producer::atom_env);
  ASSERT_EQ(d.batch.events.size(), 3u);
  EXPECT_EQ(d.batch.events[0].stored.token_ids, toks) << "token_offset (slot 12) is ignored";
  EXPECT_FALSE(d.batch.events[0].stored.group_idx.has_value());
  const auto& remote = d.batch.events[1].stored;
  EXPECT_EQ(remote.medium.id, medium_id::remote);
  EXPECT_EQ(remote.medium.tier, tier::t3);
  EXPECT_EQ(d.batch.events[2].type, event_type::removed);
  EXPECT_EQ(d.batch.skipped_unknown, 1u) << "BlockTransferred: ATOM-only, skipped and counted";
}

TEST(Producers, VllmOffloadPlaceholderIsWellFormed) {
  const auto d = clean(producer::vllm_placeholder_env);
  ASSERT_EQ(d.batch.events.size(), 1u);
  const auto& s = d.batch.events[0].stored;
  EXPECT_TRUE(s.token_ids.empty());
  EXPECT_EQ(s.block_size, 0);
  EXPECT_EQ(s.group_idx, 1);
  EXPECT_EQ(s.kind, group_kind::unspecified);
  EXPECT_EQ(s.medium.tier, tier::t2);
  // Through the router: once the engine stated its groups, the placeholder of an unknown or
  // non-main group is filtered, not indexed, and not a fault.
  batch_router r;
  const std::string learn = batch({M({{"type", S("BlockStored")}, {"block_hashes", Hashes({7})},
                                      {"token_ids", Toks(iota_tokens(0, 16))},
                                      {"block_size", I(16)}, {"group_idx", I(0)},
                                      {"kv_cache_spec_kind", S("full_attention")}}),
                                   M({{"type", S("BlockStored")}, {"block_hashes", Hashes({8})},
                                      {"token_ids", Toks(iota_tokens(0, 16))},
                                      {"block_size", I(16)}, {"group_idx", I(1)},
                                      {"kv_cache_spec_kind", S("mamba")}})});
  router_output out;
  r.on_batch(learn.data(), learn.size(), out);
  const uint64_t filtered = r.stats().group_filtered;
  const std::string placeholder = hex(producer::vllm_placeholder_env);
  r.on_batch(placeholder.data(), placeholder.size(), out);
  EXPECT_TRUE(out.steps.empty());
  EXPECT_TRUE(out.malformed.empty());
  EXPECT_EQ(r.stats().group_filtered, filtered + 1);
}

TEST(Producers, VllmSessionIdIsIgnored) {
  const auto d = clean(producer::vllm_session_env);
  ASSERT_EQ(d.batch.events.size(), 1u);
  EXPECT_EQ(d.batch.events[0].stored.kind, group_kind::main);
  EXPECT_EQ(d.batch.events[0].stored.first_tainted_block, 1u) << "a session is no salt";
}

// WD5: SGLang's component_types without the full component make the store unindexable.
TEST(Producers, SGLangComponentTypes) {
  const auto d = clean(producer::sglang_components_env);
  ASSERT_EQ(d.batch.events.size(), 4u);
  EXPECT_EQ(d.batch.events[0].stored.kind, group_kind::unspecified) << "[full, swa]: indexable";
  EXPECT_FALSE(d.batch.events[0].stored.lora_name.has_value());
  EXPECT_EQ(d.batch.events[1].stored.kind, group_kind::other) << "[mamba]: no full KV here";
  EXPECT_EQ(d.batch.events[2].stored.kind, group_kind::unspecified) << "nil: the whole block";
  EXPECT_EQ(d.batch.events[3].stored.first_tainted_block, 0u) << "salt map after the list";
  // A component that is not a string is a fault, the rest of the batch stays.
  const auto bad = decode(batch({A({S("BlockStored"), Hashes({1}), Nil(), Toks(toks), I(16),
                                    Nil(), S("GPU"), A({I(1)})}),
                                 A({S("BlockRemoved"), Hashes({1})})}));
  ASSERT_EQ(bad.faults.size(), 1u);
  EXPECT_EQ(bad.faults[0].reason, decode_error::bad_components);
  EXPECT_EQ(bad.batch.events.size(), 1u);
  // Map form (S4): the key.
  const auto map = clean_bytes(batch({M({{"type", S("BlockStored")}, {"block_hashes", Hashes({1})},
                                          {"token_ids", Toks(toks)}, {"block_size", I(16)},
                                          {"component_types", A({S("SWA")})}})}));
  EXPECT_EQ(map.batch.events.at(0).stored.kind, group_kind::other);
}

}  // namespace
}  // namespace kvrelay::test
