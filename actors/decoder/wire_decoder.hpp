// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Decodes one engine EventBatch payload (msgpack, docs/spec/engine-wire.md §2-§4) into the typed
// kv_event_batch of messages/kv_events.hpp. Pure logic: no CAF, no sockets, no msgpack headers
// here (the reader is a small hand-written one over the bytes, so nothing in the payload can make
// it allocate more than the payload itself justifies).
//
// Rules (WD = wire decoder; the tests name them):
//  WD1. A payload that is not a batch is dropped whole: not msgpack, truncated, bytes after the
//       envelope, over a limit (payload size, event count, the batch totals of hashes and
//       tokens), a top level that is neither array nor map, a ts that is not a number, an
//       "events" that is neither array nor nil, or an event whose bytes are not msgpack (its end
//       cannot be found). decode() returns the reason and no events.
//  WD2. One bad event costs one event (reference D20 dropped the batch; Dynamo #14530 shows why
//       not): an event that is well-formed msgpack but no valid event (a field of the wrong
//       type, a required field missing, over a per-event limit, neither array nor map, a tag
//       that is not a string) is skipped and reported in faults() with its index, its kind (from
//       its tag; `unknown` when the tag cannot be read) and the reason. Every other event of the
//       batch is decoded, in order.
//  WD3. An unknown tag skips its event, whatever its fields hold, and counts it in
//       `skipped_unknown` (engine-wire "MUST accept" 10). It is not a fault.
//  WD4. AllBlocksCleared may carry a `medium` (ROCm ATOM #869): kvrelay clears every tier either
//       way (it has no per-tier clear). In the array form every slot after the tag is ignored
//       (reference D21: unnamed extras); in the map form a "medium" key must be nil or a string,
//       else the event is a fault (WD2), like any named field of the wrong type.
//  WD5. Producer extensions read without harm (docs/producers.md): TensorRT-LLM's `mm_keys` and
//       string token ids (multimodal digests) taint the blocks they cover; SGLang's
//       `component_types` (array slot 7, or a key) without the full component make the store
//       unindexable (kind `other`, like a non-main group), and an SGLang metadata map may then
//       follow at slot 8; ATOM's trailing `token_offset` and every unknown key or slot are
//       ignored.
//
// Field rules where the sources disagree, stated once here:
// - block_size: must be an integer. When token_ids is non-empty it must be > 0 (reference D13);
//   when token_ids is empty or nil, any value is accepted (legacy CPU-offload "location update"
//   events carry `token_ids=[]` with block_size 0, engine-wire §3 medium notes, and so do vLLM's
//   Mamba/sliding-window offload placeholders, #43468/#51243: well-formed, never a fault).
// - Map events need `block_hashes` (Stored and Removed); a map BlockStored also needs the keys
//   `token_ids` (value may be nil) and `block_size` (reference D03/D04). Array BlockStored needs at
//   least 5 slots (D11), array BlockRemoved at least 2 (D20).
// - The envelope's rank element is optional and ignored unless it is an integer (reference §1.1
//   "further elements are ignored"); ts may be float64/float32/int; a non-finite ts becomes 0
//   ("now" to the policy server) instead of dropping the batch.
// - extra_keys: an entry that is nil, empty, or holds only the event's lora_name string is clean;
//   anything else taints that block. When extra_keys is shorter than block_hashes the blocks it
//   does not describe are treated as tainted (we cannot tell they are clean). TensorRT-LLM's
//   `mm_keys` (one list of multimodal segments per block) is judged the same way: a nil or empty
//   entry is clean, anything else taints its block, a short list taints the blocks it misses.
// - token_ids items are u32 ints, [a, b] pairs (SGLang EAGLE) or strings: TensorRT-LLM writes a
//   multimodal digest as its hex string (#17023); the block holding it, and every later one, is
//   tainted (its id reads as 0).
// - A `cache_salt` (top-level map key, or in an SGLang slot-7 metadata map) that is not nil
//   taints every block of the event.
// - medium: every value in engine-wire §3 maps to a tier (medium_info.id names it); any other
//   string is `medium_id::unknown`, kept as text, and never indexed downstream. `locality`
//   (map events, vLLM #48281): "REMOTE", or any value but "LOCAL", makes the tier T3.
// - origin (vLLM #51699): "NEW" / "REUSED" (case-insensitive); another string is unspecified.
// - remaining_copy_counts (BlockRemoved map key, vLLM #48933): nil or non-negative ints, values
//   above 2^32-1 saturate; its length is not checked here (the index ignores a wrong one). The
//   array form carries neither: no array-era producer has them.
// - Bin-wrapped events (an llm-d storage publisher: `[ts, [bin(event), ...]]`): the bin holds
//   exactly one msgpack event, decoded like any other under the same limits; a bin inside it,
//   or bytes after the event, make that event a fault (WD2).

#include "base/kv_events.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvrelay {

/// Why a payload was rejected. The to_string() values are stable: they are metric label values.
enum class decode_error : uint8_t {
  none,
  not_msgpack,      // a byte that is no msgpack type (0xc1)
  truncated,        // a header or value runs past the end of the payload
  trailing_bytes,   // bytes left after the envelope
  too_large,        // payload larger than limits::max_payload_bytes
  too_many_events,  // more events than limits::max_events
  too_many_hashes,  // more block hashes in one event than limits::max_hashes_per_event
  too_many_tokens,  // more token ids in one event than limits::max_tokens_per_event
  bad_envelope,     // top level not array/map, array shorter than 2, map without "events"
  bad_timestamp,    // ts not a number
  bad_events,       // "events" neither array nor nil
  bad_event,        // an event neither array nor map, or a too-short array event
  bad_tag,          // array tag / map "type" not a string
  missing_field,    // a required field/key is absent
  bad_hash,         // a block hash that is not int / non-empty bin / non-empty str
  bad_parent,       // parent_block_hash that is not nil / int / non-empty bin / non-empty str
  bad_tokens,       // token_ids not an array of u32 ints or [a, b] pairs
  bad_block_size,   // block_size not an int, or <= 0 while tokens are present
  bad_lora,         // lora_id not nil/int64, lora_name not nil/str (or map at array slot 7)
  bad_medium,       // medium neither str nor nil
  bad_extra_keys,   // extra_keys neither nil nor array
  bad_group,        // group_idx not nil / non-negative int
  bad_spec,         // kv_cache_spec_kind not nil/str, or sliding window not nil/int
  bad_origin,       // origin not nil/str
  bad_copy_counts,  // remaining_copy_counts not nil / an array of non-negative ints
  bad_components,   // component_types not nil / an array of strings (SGLang, WD5)
};

/// Stable snake_case name of `e` ("none" for decode_error::none).
const char* to_string(decode_error e) noexcept;
/// decode_error values, for arrays indexed by one.
inline constexpr size_t decode_error_count = static_cast<size_t>(decode_error::bad_components) + 1;

/// What an event was by its tag, for WD2's faults. `unknown`: the tag could not be read (not a
/// string, no "type" key, an event that is neither array nor map).
enum class event_kind : uint8_t { stored, removed, cleared, unknown };
inline constexpr size_t event_kind_count = 4;
/// "stored", "removed", "cleared", "unknown": metric label values.
const char* to_string(event_kind k) noexcept;

/// One event WD2 skipped.
struct event_fault {
  uint32_t index = 0;        // its position in the batch's events
  uint32_t decoded_before = 0;  // how many decoded events precede it (where it sits among them)
  event_kind kind = event_kind::unknown;
  decode_error reason = decode_error::none;
  const char* what = "";     // a short static text, e.g. "block_size is required"
};

/// Not thread-safe: one instance per pipeline (it keeps released events for reuse).
class wire_decoder {
 public:
  /// Caps that keep a hostile or broken engine from making us allocate without bound (a
  /// one-byte hash on the wire is a 40-byte engine_hash in memory, hence the per-batch totals).
  /// The defaults are far above anything an engine sends (a 1 M-token prompt at block size 16
  /// is 65 536 hashes) and keep the worst case near 100 MB.
  struct limits {
    size_t max_payload_bytes = size_t{64} << 20;
    uint32_t max_events = 1u << 16;
    uint32_t max_hashes_per_event = 1u << 18;
    uint32_t max_tokens_per_event = 1u << 22;
    uint64_t max_hashes_per_batch = uint64_t{1} << 20;
    uint64_t max_tokens_per_batch = uint64_t{1} << 24;
  };

  wire_decoder() = default;
  explicit wire_decoder(const limits& l) : limits_(l) {}

  /// Decodes one payload into `out`, reusing the capacity of its vectors. On success returns
  /// decode_error::none, with the events that decoded in `out` and those that did not (WD2) in
  /// faults(); otherwise (WD1) `out` holds no events, faults() is empty and, if `detail` is
  /// given, it receives a short human-readable reason (e.g. "event 2: truncated"). Never throws
  /// on bad input (std::bad_alloc can still escape if the process is out of memory).
  decode_error decode(const char* data, size_t size, kv_event_batch& out,
                      std::string* detail = nullptr);

  /// The events the last decode() skipped (WD2), in batch order.
  const std::vector<event_fault>& faults() const noexcept { return faults_; }

 private:
  limits limits_;
  std::vector<event_fault> faults_;
  /// Events released from earlier batches, kept so their vectors' buffers are reused.
  std::vector<kv_event> spare_;
};

}  // namespace kvrelay
