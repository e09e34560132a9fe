// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Encodes engine EventBatches exactly as the engines put them on the wire, in every era of
// docs/spec/engine-wire.md §0 (vLLM tuple eras A..G, vLLM map eras H/I, SGLang tuple S1/S2 with
// the optional slot-7 metadata map or component_types, SGLang map S4), the producers of
// docs/producers.md (TensorRT-LLM's map events in a positional envelope, ROCm ATOM's 12- and
// 13-slot tuples), and the bin-wrapped events of an llm-d storage publisher. The fake engine
// and the tests use it to
// produce byte-exact payloads (spec §7) without a Python engine. Plain data in, bytes out; the
// msgpack headers stay in the .cpp.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvrelay::fake {

/// Wire era (spec §0). S1 = SGLang tuples without medium, S2 = with medium (salted stores add
/// the slot-7 metadata map, which is era S3 on the wire), S4 = SGLang tagged maps. trt =
/// TensorRT-LLM's native publisher (#17023; _torch/pyexecutor/kv_cache_events.py @ 13599e98c71c),
/// atom0 = ROCm ATOM #869 (atom/distributed/kv_events.py @ 0290bb3f917f: 12-slot tuples, one
/// frame, no sequence number), atom = ATOM #1316 (@ 757925479b3b: 13 slots, token_offset, framed
/// like vLLM). docs/producers.md has their bytes.
enum class wire_era : uint8_t { a, b, c, d, e, f, g, h, i, s1, s2, s4, trt, atom0, atom };

/// Parses "A".."I", "S1", "S2", "S3" (alias of S2), "S4", "TRT", "ATOM0", "ATOM"
/// (case-insensitive).
std::optional<wire_era> parse_era(const std::string& text);
const char* era_name(wire_era era) noexcept;
bool is_sglang(wire_era era) noexcept;
bool is_map_era(wire_era era) noexcept;
/// ATOM #869 builds publish one frame (two with a topic) and no sequence number.
bool is_unsequenced(wire_era era) noexcept;

/// An engine block hash as it goes on the wire: unsigned int (vLLM ≥ C), signed int (builtin
/// hash(), SGLang, TRT-LLM) or raw digest bytes (bin).
struct fake_hash {
  enum class kind : uint8_t { u64, i64, bin };
  kind k = kind::u64;
  uint64_t value = 0;  // the integer bits (two's complement for i64)
  std::string bytes;   // for bin

  static fake_hash u(uint64_t v) { return fake_hash{kind::u64, v, {}}; }
  static fake_hash i(int64_t v) { return fake_hash{kind::i64, static_cast<uint64_t>(v), {}}; }
  static fake_hash bin(std::string b) { return fake_hash{kind::bin, 0, std::move(b)}; }
};

/// One item of a block's extra_keys entry (spec §3 "extra_keys").
struct extra_key {
  enum class kind : uint8_t { str, integer, bin, mm_pair };
  kind k = kind::str;
  std::string text;     // str, bin bytes, or the identifier of an mm pair
  int64_t number = 0;   // integer, or the offset of an mm pair

  static extra_key str(std::string s) { return extra_key{kind::str, std::move(s), 0}; }
  static extra_key integer(int64_t v) { return extra_key{kind::integer, {}, v}; }
  static extra_key bin(std::string b) { return extra_key{kind::bin, std::move(b), 0}; }
  static extra_key mm(std::string id, int64_t offset) {
    return extra_key{kind::mm_pair, std::move(id), offset};
  }
};
using block_extra_keys = std::optional<std::vector<extra_key>>;  // nil or array

/// One multimodal segment of a block (TensorRT-LLM's `MultimodalKey`, tag "mm_key").
struct mm_key {
  std::string hash;                  // the item's digest, hex
  int64_t start_offset = 0;
  std::optional<std::string> uuid;   // omitted when absent (omit_defaults)
};

/// One event to encode. Fields an era does not have are simply not written.
struct fake_event {
  enum class type : uint8_t { stored, removed, cleared, unknown };
  type t = type::stored;
  std::string unknown_tag = "SomeFutureEvent";  // for type::unknown: [tag] / {"type": tag}

  std::vector<fake_hash> block_hashes;
  std::optional<fake_hash> parent;             // nil when absent
  std::vector<uint32_t> token_ids;
  /// TensorRT-LLM: token positions written as a string (a multimodal digest, hex) instead of
  /// the id at that position.
  std::vector<std::pair<size_t, std::string>> token_digests;
  /// SGLang EAGLE: when non-empty, written as [[a, b], ...] instead of token_ids.
  std::vector<std::pair<uint32_t, uint32_t>> bigram_tokens;
  bool token_ids_nil = false;                  // the reference fake engine's -omit-token-ids
  int64_t block_size = 16;
  std::optional<int64_t> lora_id;
  std::optional<std::string> lora_name;        // D+ and map eras
  std::optional<std::string> medium = std::string("GPU");  // C+ / S2+; nullopt → nil
  std::optional<std::vector<block_extra_keys>> extra_keys;  // E+; nullopt → nil
  std::optional<int64_t> group_idx;            // F+
  std::optional<std::string> spec_kind;        // G+: kv_cache_spec_kind
  std::optional<int64_t> sliding_window;       // G+: kv_cache_spec_sliding_window
  std::optional<std::string> cache_salt;       // SGLang: slot-7 metadata map / S4 key
  std::optional<std::string> locality;         // map era I only: "LOCAL" / "REMOTE"
  /// BlockRemoved, map era I only (vLLM #48933): copies left after this removal, per hash.
  std::optional<std::vector<uint32_t>> remaining_copy_counts;
  /// BlockStored, map era I only (vLLM #51699): "NEW" or "REUSED".
  std::optional<std::string> origin;
  /// BlockStored, map era I only (vLLM #51381): the request's session.
  std::optional<std::string> session_id;
  /// BlockStored, TensorRT-LLM: one list of multimodal segments per block (omitted when unset).
  std::optional<std::vector<std::vector<mm_key>>> mm_keys;
  /// BlockStored, SGLang tuple era S2 with --enable-kv-events-component-types: slot 7 (nil
  /// when the vector is empty is not how SGLang writes it; an empty list stays a list).
  std::optional<std::vector<std::string>> component_types;
  /// BlockStored, ATOM #1316: slot 12, the sequence position of the first block (nil unset).
  std::optional<int64_t> token_offset;
  /// AllBlocksCleared, ATOM: slot 1, the one medium cleared (nil: all).
  std::optional<std::string> cleared_medium;
  /// Fault injection for tuple eras: write only the first N slots (tag included), e.g. the
  /// reference e2e's truncated ["BlockStored", [h], nil]. Ignored for map eras.
  std::optional<size_t> truncate_slots;
};

struct encode_options {
  wire_era era = wire_era::c;
  double ts = 0.0;
  int64_t dp_rank = 0;       // envelope element 2 (eras with a 3-element envelope)
  /// The map envelope {"ts","events","data_parallel_rank"} no release emits (spec §2 H′).
  bool map_envelope = false;
  /// An llm-d storage publisher: every event msgpack-encoded inside a bin, in a 2-element
  /// envelope ([ts, [bin(event), ...]], spec §3 "Wrapped events").
  bool bin_wrapped = false;
};

/// Appends one event in the era's form (array or map) to `out`.
void encode_event(const fake_event& ev, wire_era era, std::string& out);
std::string encode_event(const fake_event& ev, wire_era era);

/// One whole EventBatch payload (the third frame of a live message).
std::string encode_batch(const std::vector<fake_event>& events, const encode_options& opt);

/// Lower-case hex with a space between bytes ("96 ab 42 …"), as the spec prints its dumps.
std::string to_hex(const std::string& bytes);
/// Parses hex digits, ignoring whitespace; nullopt on odd length or a non-hex character.
std::optional<std::string> from_hex(const std::string& text);

}  // namespace kvrelay::fake
