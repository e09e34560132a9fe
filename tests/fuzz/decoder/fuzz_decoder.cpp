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
#include <vector>

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
                 const std::vector<kvrelay::event_fault>& faults, const std::string& detail) {
  using namespace kvrelay;
  if (err != decode_error::none) {
    // Never half-applied (WD1).
    check(b.events.empty() && b.skipped_unknown == 0 && faults.empty() && !detail.empty());
    check(std::string(to_string(err)) != "unknown");
    return;
  }
  // WD2: faults in batch order, each placed among the decoded events, each with a reason.
  uint32_t last_index = 0;
  uint32_t last_before = 0;
  for (size_t i = 0; i < faults.size(); ++i) {
    const event_fault& f = faults[i];
    check(f.reason != decode_error::none && f.what != nullptr && f.what[0] != '\0');
    check(static_cast<size_t>(f.kind) < event_kind_count);
    check(i == 0 || f.index > last_index);
    check(f.decoded_before >= last_before && f.decoded_before <= b.events.size());
    check(f.decoded_before <= f.index);
    last_index = f.index;
    last_before = f.decoded_before;
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
  check_batch(err, reused, roomy.faults(), detail);
  for (const kv_event& e : reused.events) {
    if (e.type == event_type::stored) groups.admit(e.stored);
    if (e.type == event_type::removed) groups.admit(e.removed);
  }

  kv_event_batch fresh;
  detail.clear();
  const decode_error err2 = tight.decode(p, size, fresh, &detail);
  check_batch(err2, fresh, tight.faults(), detail);
  // Tighter limits can only turn success into a too_many_* error, or a decoded event into a
  // too_many_* fault, never the reverse.
  if (err != decode_error::none) check(err2 != decode_error::none);
  if (err == decode_error::none && err2 == decode_error::none) {
    const auto& rf = roomy.faults();
    const auto& tf = tight.faults();
    check(fresh.events.size() + tf.size() == reused.events.size() + rf.size());
    check(tf.size() >= rf.size());
    check(fresh.skipped_unknown == reused.skipped_unknown);
    size_t j = 0;  // every roomy fault is a tight fault too, with the same reason
    for (const event_fault& f : tf) {
      const bool limit =
          f.reason == decode_error::too_many_hashes || f.reason == decode_error::too_many_tokens;
      if (j < rf.size() && rf[j].index == f.index) {
        check(rf[j].reason == f.reason || limit);  // a limit may be met before the bad field
        ++j;
      } else {
        check(limit);
      }
    }
    check(j == rf.size());
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
    o.max_t2_blocks = 8;  // IX8: the bounded tiers' order queues under arbitrary input
    o.max_t3_blocks = 8;
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
  for (uint32_t i = 0; i < parts.size(); ++i) {
    held += parts.index(i).size();
    check(parts.index(i).tier_blocks(tier::t2) <= 8 && parts.index(i).tier_blocks(tier::t3) <= 8);
  }
  check(parts.directory_size() <= held);
  return 0;
}
