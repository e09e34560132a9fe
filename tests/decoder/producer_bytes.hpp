// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Batches of the producers in docs/producers.md, as each writes them (tests/fuzz/decoder/
// make_corpus.py --hex prints them; the fuzzer's corpus holds them too). Shared by the
// decoder's tests and the fake engine's encoder tests, which must reproduce them.

namespace kvrelay::test::producer {

/// TensorRT-LLM #17023 (kv_cache_events.py @ 13599e98): a map BlockStored in the
/// positional envelope; signed int64 hashes (first 8 bytes of the SHA-256 radix key).
inline constexpr const char* trt_stored_env =  // 159 B
    "93 cb 41 da 55 6e 40 20 00 00 91 88 a4 74 79 70 65 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 ac "
    "62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 d3 89 a1 a9 8e 70 9f a6 72 b1 70 61 72 65 6e 74 5f "
    "62 6c 6f 63 6b 5f 68 61 73 68 d3 b8 c6 f3 3f 17 80 d3 09 a9 74 6f 6b 65 6e 5f 69 64 73 dc "
    "00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 aa 62 6c 6f 63 "
    "6b 5f 73 69 7a 65 10 a7 6c 6f 72 61 5f 69 64 c0 a6 6d 65 64 69 75 6d a3 47 50 55 a9 6c 6f "
    "72 61 5f 6e 61 6d 65 c0 00";

/// TensorRT-LLM: BlockRemoved {type, block_hashes, medium}.
inline constexpr const char* trt_removed_env =  // 65 B
    "93 cb 41 da 55 6e 40 20 00 00 91 83 a4 74 79 70 65 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 "
    "ac 62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 d3 89 a1 a9 8e 70 9f a6 72 a6 6d 65 64 69 75 6d "
    "a3 47 50 55 00";

/// TensorRT-LLM with multimodal keys: token 3 is the item's digest as a hex string,
/// tokens 4.. are ids above the vocabulary, mm_keys has one tagged map for the block.
inline constexpr const char* trt_mm_env =  // 380 B
    "93 cb 41 da 55 6e 40 20 00 00 91 89 a4 74 79 70 65 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 ac "
    "62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 d3 89 a1 a9 8e 70 9f a6 72 b1 70 61 72 65 6e 74 5f "
    "62 6c 6f 63 6b 5f 68 61 73 68 d3 b8 c6 f3 3f 17 80 d3 09 a9 74 6f 6b 65 6e 5f 69 64 73 dc "
    "00 10 ce 00 02 50 5c cd 03 68 cc c6 d9 40 39 66 38 36 64 30 38 31 38 38 34 63 37 64 36 35 "
    "39 61 32 66 65 61 61 30 63 35 35 61 64 30 31 35 61 33 62 66 34 66 31 62 32 62 30 62 38 32 "
    "32 63 64 31 35 64 36 63 31 35 62 30 66 30 30 61 30 38 ce 00 02 51 81 ce 00 02 51 82 ce 00 "
    "02 51 83 ce 00 02 51 84 ce 00 02 51 85 ce 00 02 51 86 ce 00 02 51 87 ce 00 02 51 88 ce 00 "
    "02 51 89 ce 00 02 51 8a ce 00 02 51 8b ce 00 02 51 8c aa 62 6c 6f 63 6b 5f 73 69 7a 65 10 "
    "a7 6c 6f 72 61 5f 69 64 c0 a6 6d 65 64 69 75 6d a3 47 50 55 a9 6c 6f 72 61 5f 6e 61 6d 65 "
    "c0 a7 6d 6d 5f 6b 65 79 73 91 91 83 a4 74 79 70 65 a6 6d 6d 5f 6b 65 79 a4 68 61 73 68 d9 "
    "40 39 66 38 36 64 30 38 31 38 38 34 63 37 64 36 35 39 61 32 66 65 61 61 30 63 35 35 61 64 "
    "30 31 35 61 33 62 66 34 66 31 62 32 62 30 62 38 32 32 63 64 31 35 64 36 63 31 35 62 30 66 "
    "30 30 61 30 38 ac 73 74 61 72 74 5f 6f 66 66 73 65 74 00 00";

/// ROCm ATOM #869 (atom/distributed/kv_events.py @ 0290bb3f): 12-slot BlockStored
/// (group_idx defaults to 0), [BlockRemoved, hashes, medium, group], [AllBlocksCleared, medium].
inline constexpr const char* atom0_env =  // 129 B
    "93 cb 41 da 55 6e 40 20 00 00 93 9c ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 "
    "73 ec 96 e9 cf 83 4a b1 2f 98 a3 dc b0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 "
    "68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55 c0 c0 00 c0 c0 94 ac 42 6c 6f 63 6b 52 65 6d "
    "6f 76 65 64 91 cf bf 17 ef 84 73 ec 96 e9 a3 47 50 55 00 92 b0 41 6c 6c 42 6c 6f 63 6b 73 "
    "43 6c 65 61 72 65 64 c0 00";

/// ROCm ATOM #1316 (@ 75792547): 13 slots (trailing token_offset), a REMOTE store, a
/// removal, and an ATOM-only BlockTransferred (an unknown tag to kvrelay).
inline constexpr const char* atom_env =  // 213 B
    "93 cb 41 da 55 6e 40 20 00 00 94 9d ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 cf bf 17 ef 84 "
    "73 ec 96 e9 cf 83 4a b1 2f 98 a3 dc b0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 "
    "68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55 c0 c0 c0 c0 c0 10 9d ab 42 6c 6f 63 6b 53 74 "
    "6f 72 65 64 91 cf bf 17 ef 84 73 ec 96 ea c0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 "
    "66 67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a6 52 45 4d 4f 54 45 c0 c0 c0 c0 c0 00 94 ac 42 6c "
    "6f 63 6b 52 65 6d 6f 76 65 64 91 cf bf 17 ef 84 73 ec 96 e9 a3 47 50 55 c0 95 b0 42 6c 6f "
    "63 6b 54 72 61 6e 73 66 65 72 72 65 64 91 cf bf 17 ef 84 73 ec 96 e9 a3 47 50 55 a3 43 50 "
    "55 c0 00";

/// vLLM #51243 (offloading/events.py @ 896c8e6e): a Mamba / sliding-window group's
/// placeholder offload store: no tokens, block_size 0, its group's index, no kind.
inline constexpr const char* vllm_placeholder_env =  // 137 B
    "93 cb 41 da 55 6e 40 20 00 00 91 89 a4 74 79 70 65 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 ac "
    "62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 cf bf 17 ef 84 73 ec 96 e9 b1 70 61 72 65 6e 74 5f "
    "62 6c 6f 63 6b 5f 68 61 73 68 c0 a9 74 6f 6b 65 6e 5f 69 64 73 90 aa 62 6c 6f 63 6b 5f 73 "
    "69 7a 65 00 a7 6c 6f 72 61 5f 69 64 c0 a6 6d 65 64 69 75 6d a3 43 50 55 a9 6c 6f 72 61 5f "
    "6e 61 6d 65 c0 a9 67 72 6f 75 70 5f 69 64 78 01 00";

/// vLLM #51381: session_id on a GPU BlockStored (map era; key position unverified).
inline constexpr const char* vllm_session_env =  // 235 B
    "93 cb 41 da 55 6e 40 20 00 00 91 8c a4 74 79 70 65 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 ac "
    "62 6c 6f 63 6b 5f 68 61 73 68 65 73 91 cf bf 17 ef 84 73 ec 96 e9 b1 70 61 72 65 6e 74 5f "
    "62 6c 6f 63 6b 5f 68 61 73 68 cf 83 4a b1 2f 98 a3 dc b0 a9 74 6f 6b 65 6e 5f 69 64 73 dc "
    "00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 aa 62 6c 6f 63 "
    "6b 5f 73 69 7a 65 10 a7 6c 6f 72 61 5f 69 64 c0 a6 6d 65 64 69 75 6d a3 47 50 55 a9 6c 6f "
    "72 61 5f 6e 61 6d 65 c0 aa 65 78 74 72 61 5f 6b 65 79 73 91 c0 a9 67 72 6f 75 70 5f 69 64 "
    "78 00 b2 6b 76 5f 63 61 63 68 65 5f 73 70 65 63 5f 6b 69 6e 64 ae 66 75 6c 6c 5f 61 74 74 "
    "65 6e 74 69 6f 6e aa 73 65 73 73 69 6f 6e 5f 69 64 a6 73 65 73 73 2d 31 00";

/// SGLang component_types (#32514; slot 7): [full, swa], [mamba], nil, and
/// [full] followed by the salted metadata map at slot 8 (inferred).
inline constexpr const char* sglang_components_env =  // 281 B
    "93 cb 41 da 55 6e 40 20 00 00 94 98 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 91 d3 89 a1 a9 8e "
    "70 9f a6 72 c0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f "
    "70 10 c0 a3 47 50 55 92 a4 66 75 6c 6c a3 73 77 61 98 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 "
    "91 d3 89 a1 a9 8e 70 9f a6 72 c0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 "
    "6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55 91 a5 6d 61 6d 62 61 98 ab 42 6c 6f 63 6b 53 74 6f "
    "72 65 64 91 d3 89 a1 a9 8e 70 9f a6 72 c0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 "
    "67 68 69 6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55 c0 99 ab 42 6c 6f 63 6b 53 74 6f 72 65 64 "
    "91 d3 89 a1 a9 8e 70 9f a6 72 c0 dc 00 10 ce 00 02 50 5c cd 03 68 cc c6 64 65 66 67 68 69 "
    "6a 6b 6c 6d 6e 6f 70 10 c0 a3 47 50 55 91 a4 66 75 6c 6c 81 aa 63 61 63 68 65 5f 73 61 6c "
    "74 a8 74 65 6e 61 6e 74 2d 61 00";

}  // namespace kvrelay::test::producer
