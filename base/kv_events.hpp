#pragma once
// The typed form of one engine EventBatch, as the wire decoder produces it and the shards
// consume it. Plain data, no CAF, no msgpack: every layer above the decoder sees only this.
// See shared/spec/engine-wire.md for where each field comes from.

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

/// Cache tier a medium maps to. Warmer is smaller; the numeric values equal the proto CacheTier.
enum class tier : uint8_t { t1 = 1, t2 = 2, t3 = 3 };

/// Where `medium` said the block lives. nil → GPU.
struct medium_info {
  kvrelay::tier tier = tier::t1;
  bool known = true;  // false when the string matched no medium we know (mapped to T3)
};

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
};

struct block_removed {
  std::vector<engine_hash> block_hashes;
  medium_info medium;
  std::optional<int64_t> group_idx;
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
