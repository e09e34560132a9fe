// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The change a shard's index hands to the debouncer for one (partition, fingerprint). A value
// type of the base layer: the index produces it, messages carry it, the debouncer coalesces it.

#include <cstdint>

#include "base/kv_events.hpp"

namespace kvrelay {

/// One change for the policy server, per (this partition, fingerprint).
struct index_op {
  enum class kind : uint8_t { upsert, evict };
  kind op = kind::upsert;
  uint64_t fingerprint = 0;
  uint32_t token_count = 0;  // cumulative tokens up to and including this block
  tier t = tier::t1;         // upsert: warmest tier still holding the block; evict: the last one
  /// upsert only: the key is new to this partition (not reported since its last eviction or
  /// clear), so the server cannot hold it unless this add is sent. Lets the debouncer drop an
  /// add and its eviction together when neither was sent. false is the safe default.
  bool introduces = false;
};

}  // namespace kvrelay
