// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// rpc eviction mode against a server that reads PREFIX_EVICTED with an empty adapter_id as "this
// prefix in EVERY adapter partition" (the reference server without inference-cache PR #164,
// which adds CacheEvent.adapter_scoped): a base-model eviction of fingerprint F also drops every
// LoRA adapter's entry for F on this replica, though a LoRA block whose tokens equal the base
// block's is still cached. sweep_repair mirrors which adapter keys the server was sent and puts
// the ones such a sweep removed back, after the sweep. Pure logic, no CAF.
//
// Rules (one instance per replica's unit stream, fed every unit in the order they are sent):
//  SR1. The mirror holds the server's adapter keys (adapter != ""): a unit's clear forgets them
//       all; then its adds and downgrade entries insert or update theirs (token count, tier);
//       its evictions of adapter keys erase theirs. The base model's keys are not mirrored.
//  SR2. A unit that evicts a base-model key (adapter "", F) gets, as its `restores`, every
//       mirrored (A, F) still held after the unit: each once, in the order of the evictions
//       that swept it, stamped with the latest such eviction's time. The emitter sends them
//       after the unit's evictions completed (unit_sequencer.hpp), so the sweep cannot overtake
//       them.
//  SR3. A unit that failed changes nothing here: the debouncer's resync clears the server
//       (SR1's clear, at its probe) and re-reports what is resident, which rebuilds the mirror.
//  SR4. Bounded: at most `max_keys` mirrored keys. Past it the mirror is dropped and repair is
//       off (counted, once per episode) until the next clear, which starts it afresh: a missing
//       repair only costs a cache miss until the next refresh re-reports the key.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "messages/pipeline.hpp"

namespace kvrelay::debounce {

class sweep_repair {
 public:
  struct counters {
    uint64_t restored = 0;    // entries re-reported after a base-model sweep (SR2)
    uint64_t overflows = 0;   // times the mirror passed max_keys (SR4)
  };

  explicit sweep_repair(size_t max_keys = 2'000'000) : max_keys_(max_keys) {}

  /// Fold a unit about to be sent into the mirror and fill its restores (SR1, SR2).
  void on_unit(emit_unit& u);
  /// The servers were cleared outside a unit (a resync's probe, debouncer rule DB9) (SR1).
  void on_cleared();

  size_t size() const noexcept { return keys_; }
  bool active() const noexcept { return !overflowed_; }
  const counters& stats() const noexcept { return c_; }

 private:
  struct held {
    std::string adapter;
    uint32_t token_count = 0;
    tier t = tier::t1;
  };
  void forget_all();
  void upsert(const prefix_add& a);
  void erase(uint64_t fp, const std::string& adapter);

  size_t max_keys_;
  size_t keys_ = 0;
  bool overflowed_ = false;
  // fingerprint → the adapters holding it; a fingerprint is rarely held by more than a few.
  absl::flat_hash_map<uint64_t, std::vector<held>> by_fp_;
  counters c_;
};

}  // namespace kvrelay::debounce
