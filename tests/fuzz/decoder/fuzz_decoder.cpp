// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// libFuzzer target for the engine-wire decoder: no input may crash, hang, leak, or break the
// batch invariants the shards rely on. Each input also goes through the decoder's protocol and
// the shard's partitions, whose hash directory must never hold more than the indexes do.
#include "actors/decoder/batch_router.hpp"
#include "actors/decoder/group_filter.hpp"
#include "actors/decoder/wire_decoder.hpp"
#include "actors/shard/partition_set.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_medium(const kvrelay::medium_info& m) {
  check(!m.remote || m.tier == kvrelay::tier::t3);
  check(!m.known() || m.text.empty());
  check(m.text.size() <= 64);
}

void check_batch(kvrelay::decode_error err, const kvrelay::kv_event_batch& b,
                 const std::string& detail) {
  using namespace kvrelay;
  if (err != decode_error::none) {
    // Never half-applied.
    check(b.events.empty() && b.skipped_unknown == 0 && !detail.empty());
    check(std::string(to_string(err)) != "unknown");
    return;
  }
  for (const kv_event& e : b.events) {
    if (e.type == event_type::stored) {
      const block_stored& s = e.stored;
      check(s.first_tainted_block <= s.block_hashes.size());
      check(s.token_ids.empty() || s.block_size > 0);
      check(!s.eagle_bigram || s.token_ids.size() % 2 == 0);
      check(!s.group_idx || *s.group_idx >= 0);
      for (const engine_hash& h : s.block_hashes) check(!h.is_bytes() || h.value == 0);
      check_medium(s.medium);
    } else if (e.type == event_type::removed) {
      check(!e.removed.group_idx || *e.removed.group_idx >= 0);
      check(e.removed.has_remaining_copies || e.removed.remaining_copies.empty());
      check_medium(e.removed.medium);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvrelay;
  // Small limits so the limit paths are reachable from small inputs, and a default decoder.
  wire_decoder::limits small;
  small.max_events = 8;
  small.max_hashes_per_event = 16;
  small.max_tokens_per_event = 64;
  small.max_hashes_per_batch = 32;
  small.max_tokens_per_batch = 128;
  static wire_decoder tight(small);  // static: buffer reuse across inputs is exercised too
  static wire_decoder roomy;
  static kv_event_batch reused;
  static group_filter groups;

  const char* p = reinterpret_cast<const char*>(data);
  std::string detail;
  decode_error err = roomy.decode(p, size, reused, &detail);
  check_batch(err, reused, detail);
  for (const kv_event& e : reused.events) {
    if (e.type == event_type::stored) groups.admit(e.stored);
    if (e.type == event_type::removed) groups.admit(e.removed);
  }

  kv_event_batch fresh;
  detail.clear();
  const decode_error err2 = tight.decode(p, size, fresh, &detail);
  check_batch(err2, fresh, detail);
  // Tighter limits can only turn success into a too_many_* error, never the reverse.
  if (err != decode_error::none) check(err2 != decode_error::none);
  if (err == decode_error::none && err2 == decode_error::none) {
    check(fresh.events.size() == reused.events.size());
    check(fresh.skipped_unknown == reused.skipped_unknown);
  }

  // The same bytes through the protocols: a small partition cap and a resident cap so that
  // both limits are reached; state carries over between inputs, as it does in the daemon.
  static batch_router router([] {
    router_options o;
    o.max_partitions = 4;
    return o;
  }());
  static partition_set parts([] {
    index_options o;
    o.max_resident = 64;
    return o;
  }());
  static router_output out;
  router.on_batch(p, size, out);
  for (const auto& step : out.steps) {
    if (step.what == router_step::kind::clear) {
      parts.clear();
      continue;
    }
    for (const auto& r : parts.apply(*step.work)) check(r.partition < parts.size());
  }
  check(parts.size() <= 4);
  size_t held = 0;
  for (uint32_t i = 0; i < parts.size(); ++i) held += parts.index(i).size();
  check(parts.directory_size() <= held);
  return 0;
}
