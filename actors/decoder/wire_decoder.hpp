// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Decodes one engine EventBatch payload (msgpack, shared/spec/engine-wire.md §2-§4) into the typed
// kv_event_batch of messages/kv_events.hpp. Pure logic: no CAF, no sockets, no msgpack headers
// here (the reader is a small hand-written one over the bytes, so nothing in the payload can make
// it allocate more than the payload itself justifies).
//
// Error policy (reference D20, engine-wire "SHOULD reject"): any malformed event drops the whole
// batch; the batch then comes back empty. The one exception is an unknown event tag: that event
// alone is skipped and counted in `skipped_unknown` (engine-wire "MUST accept" 10).
//
// Rules where the sources disagree, stated once here:
// - block_size: must be an integer. When token_ids is non-empty it must be > 0 (reference D13);
//   when token_ids is empty or nil, any value is accepted (legacy CPU-offload "location update"
//   events carry `token_ids=[]` with block_size 0, engine-wire §3 medium notes).
// - Map events need `block_hashes` (Stored and Removed); a map BlockStored also needs the keys
//   `token_ids` (value may be nil) and `block_size` (reference D03/D04). Array BlockStored needs at
//   least 5 slots (D11), array BlockRemoved at least 2 (D20).
// - The envelope's rank element is optional and ignored unless it is an integer (reference §1.1
//   "further elements are ignored"); ts may be float64/float32/int; a non-finite ts becomes 0
//   ("now" to the policy server) instead of dropping the batch.
// - extra_keys: an entry that is nil, empty, or holds only the event's lora_name string is clean;
//   anything else taints that block. When extra_keys is shorter than block_hashes the blocks it
//   does not describe are treated as tainted (we cannot tell they are clean).
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
//   or bytes after the event, drop the batch.

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
};

/// Stable snake_case name of `e` ("none" for decode_error::none).
const char* to_string(decode_error e) noexcept;

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
  /// decode_error::none; otherwise `out` holds no events and, if `detail` is given, it receives a
  /// short human-readable reason (e.g. "event 2: block_size is required"). Never throws on bad
  /// input (std::bad_alloc can still escape if the process is out of memory).
  decode_error decode(const char* data, size_t size, kv_event_batch& out,
                      std::string* detail = nullptr);

  const limits& get_limits() const noexcept { return limits_; }

 private:
  limits limits_;
  /// Events released from earlier batches, kept so their vectors' buffers are reused.
  std::vector<kv_event> spare_;
};

}  // namespace kvrelay
