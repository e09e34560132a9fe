// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Event sources for the fake engine: a seeded random workload that behaves like a serving engine's
// prefix cache (shared system prompts, LoRA traffic, LRU evictions, clears, CPU offload, hybrid
// groups), and the reference fake engine's scripted scenario (docs/spec/reference-behaviour.md
// §6). Both produce fake_event lists for the wire encoder.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/fake-engine/wire_encoder.hpp"

namespace kvrelay::fake {

enum class hash_mode : uint8_t {
  u64,    // vLLM ≥ C default (int of the digest's last 8 bytes)
  i64,    // builtin hash(), SGLang, TRT-LLM (signed)
  bytes,  // VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: 32-byte digests as bin
};

struct workload_options {
  uint64_t seed = 1;
  int64_t block_size = 16;
  hash_mode hashes = hash_mode::u64;
  size_t system_prompts = 16;        // shared prefixes, picked with a Zipf law
  double zipf_s = 1.1;
  size_t system_blocks_min = 2, system_blocks_max = 24;
  size_t user_blocks_min = 1, user_blocks_max = 8;
  size_t requests_min = 1, requests_max = 4;  // requests finishing prefill per batch (step)
  size_t capacity_blocks = 4096;     // GPU blocks; LRU eviction beyond it
  size_t lora_adapters = 0;          // adapters in use; 0 = base model only
  double lora_fraction = 0.3;        // share of requests that use an adapter
  bool lora_ids = true;              // write lora_id
  bool lora_names = true;            // write lora_name (eras D+)
  double clear_probability = 0.0;    // per batch: AllBlocksCleared, cache emptied
  uint64_t clear_after_blocks = 0;   // one AllBlocksCleared once this many were stored (0: none)
  bool cpu_offload = false;          // copy stored blocks to a CPU tier (medium "CPU")
  size_t cpu_capacity_blocks = 16384;
  bool cpu_removals = true;          // false: CPU evictions are silent (LMCache MP, #5076)
  bool hybrid = false;               // group 0 full_attention + group 1 sliding_window
  int64_t sliding_window = 128;      // tokens kept by the sliding-window group
  uint32_t vocab = 32000;
};

/// A deterministic (seeded) random engine workload. Not thread-safe.
class workload {
 public:
  explicit workload(workload_options opt);
  ~workload();
  workload(const workload&) = delete;
  workload& operator=(const workload&) = delete;

  /// The events of the next engine step; never empty (engines never send empty batches).
  std::vector<fake_event> next_batch();

  /// The engine frees its whole GPU cache: one BlockRemoved (medium GPU, group 0) naming every
  /// resident block in the order its LRU would free them (least recently used first; within one
  /// use, the deeper block first, so a sequence's tail goes before its head). Empty hashes when
  /// nothing is resident. The CPU tier is untouched. For a benchmark's eviction phase: the
  /// caller splits it into engine-sized batches.
  fake_event evict_all();

  struct counters {
    uint64_t requests = 0;
    uint64_t blocks_stored = 0;
    uint64_t blocks_evicted = 0;
    uint64_t blocks_hit = 0;      // prefix-cache hits (already resident)
    uint64_t clears = 0;
    uint64_t cpu_stored = 0;
    uint64_t cpu_evicted = 0;
    size_t gpu_resident = 0;
    size_t cpu_resident = 0;
  };
  counters stats() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The reference fake engine's payload (spec §6): `num_blocks` blocks of `block_size` tokens
/// split over `events` BlockStored tuples, hashes 0xE000+i, parent-chained across events, tokens
/// start_token.. (or nil with omit_token_ids), lora nil, medium not written (era A tuples).
struct scripted_options {
  int64_t block_size = 128;
  int64_t num_blocks = 1;
  int64_t events = 1;
  int64_t start_token = 0;
  bool omit_token_ids = false;
};
std::vector<fake_event> scripted_events(const scripted_options& opt);

/// The reference's validation; an empty string when valid, else the reason.
std::string validate(const scripted_options& opt);

/// The "EXPECT ..." log lines the reference prints at start (one per block, or one "no index
/// entries" line with omit_token_ids). Prefix hashes come from the fingerprint (hex of BE8).
std::vector<std::string> expect_lines(const scripted_options& opt);

}  // namespace kvrelay::fake
