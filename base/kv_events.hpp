// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The typed form of one engine EventBatch, as the wire decoder produces it and the shards
// consume it. Plain data, no CAF, no msgpack: every layer above the decoder sees only this.
// See docs/spec/engine-wire.md for where each field comes from.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvrelay {

/// An engine block hash exactly as it was on the wire. Integer hashes (any msgpack width, signed
/// or not) are kept as their u64 two's complement; bin (and, for reference compatibility, str)
/// hashes keep their exact bytes. Never re-derived: it is an identity, not a key.
struct engine_hash {
  uint64_t value = 0;   // the integer form; unused when `bytes` is non-empty
  std::string bytes;    // non-empty iff the wire carried bin/str

  bool is_bytes() const noexcept { return !bytes.empty(); }
  friend bool operator==(const engine_hash& a, const engine_hash& b) noexcept {
    return a.value == b.value && a.bytes == b.bytes;
  }
  friend bool operator!=(const engine_hash& a, const engine_hash& b) noexcept {
    return !(a == b);
  }
  static engine_hash from_int(uint64_t v) { return engine_hash{v, {}}; }
};

/// The 64-bit key the index keeps a block under: an integer hash is its own key; a byte hash
/// (vLLM with int hashes off, LMCache's 32-byte digests) is folded with XXH3-64. The engine's
/// own int mode keeps only 8 bytes of the same digests, so folding loses nothing it keeps, and
/// one table of packed 64-bit slots holds every block (a byte key in a map of strings cost ~100
/// bytes). Deterministic across processes: a snapshot's keys stay valid.
uint64_t index_key(const engine_hash& h) noexcept;

/// Cache tier a medium maps to. Warmer is smaller; the numeric values equal the proto CacheTier.
enum class tier : uint8_t { t1 = 1, t2 = 2, t3 = 3 };

/// Every `medium` value seen in the wild (docs/spec/engine-wire.md §3 "medium values seen"),
/// plus `none` (nil or absent: GPU) and `unknown` (a string matching none of them: never indexed).
/// The values are bounded on purpose: they are the `medium` label of kvrelay_events_total and
/// kvrelay_blocks_total.
enum class medium_id : uint8_t {
  none, gpu, cpu, cpu_pinned, disk, fs, obj, storage, external, lmcache_l1, lmcache_l2,
  // Dynamo's and early SGLang's aliases (engine-wire §3)
  device, host, cpu_tier1, cpu_tier2, nvme, ssd, network, remote, shared,
  unknown,
};
inline constexpr size_t medium_count = static_cast<size_t>(medium_id::unknown) + 1;

/// The metric label of a medium: its canonical wire spelling ("GPU", "lmcache-l2", ...).
constexpr const char* medium_label(medium_id m) noexcept {
  switch (m) {
    case medium_id::none: return "none";
    case medium_id::gpu: return "GPU";
    case medium_id::cpu: return "CPU";
    case medium_id::cpu_pinned: return "CPU_PINNED";
    case medium_id::disk: return "DISK";
    case medium_id::fs: return "FS";
    case medium_id::obj: return "OBJ";
    case medium_id::storage: return "STORAGE";
    case medium_id::external: return "EXTERNAL";
    case medium_id::lmcache_l1: return "lmcache-l1";
    case medium_id::lmcache_l2: return "lmcache-l2";
    case medium_id::device: return "DEVICE";
    case medium_id::host: return "HOST";
    case medium_id::cpu_tier1: return "CPU_TIER1";
    case medium_id::cpu_tier2: return "CPU_TIER2";
    case medium_id::nvme: return "NVME";
    case medium_id::ssd: return "SSD";
    case medium_id::network: return "NETWORK";
    case medium_id::remote: return "REMOTE";
    case medium_id::shared: return "SHARED";
    case medium_id::unknown: return "unknown";
  }
  return "unknown";
}

/// Where `medium` (and `locality`) said the block lives. nil → GPU, T1.
struct medium_info {
  kvrelay::tier tier = tier::t1;  // after locality: a REMOTE block is never warmer than T3
  medium_id id = medium_id::none;
  bool remote = false;            // locality "REMOTE" (or a locality value we do not know)
  /// The wire string when id == unknown (for the per-value counter and the warning), else "".
  std::string text;

  bool known() const noexcept { return id != medium_id::unknown; }
};

/// `origin` on a BlockStored (vLLM #51699): how the block came to be stored. A re-announcement
/// of a block reused from the prefix cache (kv_cache_report_mode="full", #45261) is `reused`:
/// it refreshes the entry but is no new physical copy.
enum class store_origin : uint8_t { unspecified, fresh, reused };

/// What `kv_cache_spec_kind` (or the learned group table) says about a KV-cache group.
enum class group_kind : uint8_t {
  unspecified,  // the event carried no kind
  main,         // full_attention, mla_attention, sink_full_attention: indexable
  other,        // sliding_window, mamba, chunked_local_attention, ...: never indexed
};

struct block_stored {
  std::vector<engine_hash> block_hashes;
  std::optional<engine_hash> parent;   // nil parent → nullopt; int 0 is a real parent
  std::vector<uint32_t> token_ids;     // concatenated; EAGLE pairs are flattened (see below)
  int64_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::optional<std::string> lora_name;
  medium_info medium;
  std::optional<int64_t> group_idx;
  group_kind kind = group_kind::unspecified;
  std::optional<int64_t> sliding_window;
  /// Index of the first block whose extra_keys (or a cache_salt / SGLang metadata map) carry
  /// anything but the LoRA name: a cache salt, a multimodal identifier, prompt-embeds. That block
  /// and every block after it are not indexable under a token-only fingerprint.
  /// == block_hashes.size() when no block is tainted.
  uint32_t first_tainted_block = 0;
  /// SGLang EAGLE: token_ids were [a, b] bigram pairs; token_ids then holds 2 ids per position
  /// and the event is decoded but not indexable.
  bool eagle_bigram = false;
  store_origin origin = store_origin::unspecified;
};

struct block_removed {
  std::vector<engine_hash> block_hashes;
  medium_info medium;
  std::optional<int64_t> group_idx;
  /// vLLM #48933: physical copies of each hash left at this medium after this removal, aligned
  /// with block_hashes. Authoritative when present (has_remaining_copies); the decoder checks
  /// nothing about its length, the index ignores a list of the wrong length.
  std::vector<uint32_t> remaining_copies;
  bool has_remaining_copies = false;
};

struct all_blocks_cleared {};

enum class event_type : uint8_t { stored, removed, cleared };

/// One event. A tagged struct rather than std::variant keeps the hot path free of visitors.
struct kv_event {
  event_type type = event_type::cleared;
  block_stored stored;    // valid when type == stored
  block_removed removed;  // valid when type == removed
};

/// One decoded EventBatch (one ZMQ message).
struct kv_event_batch {
  double ts = 0.0;                 // engine wall clock, seconds
  std::optional<int64_t> dp_rank;  // envelope element 2 / data_parallel_rank / attn_dp_rank
  std::vector<kv_event> events;
  uint32_t skipped_unknown = 0;    // events with an unknown tag, skipped (counted, not fatal)
};

}  // namespace kvrelay
