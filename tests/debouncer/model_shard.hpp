// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A shard as the debouncer's tests need it: resident blocks by fingerprint, answering a walk's
// requests the way shard_actor does (a chunk from the cursor, the cursor after it, done at the
// end), with the fingerprint as the block's position.
#include <algorithm>
#include <map>

#include "actors/debouncer/debounce_actions.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay::debounce {

struct model_shard {
  std::map<uint64_t, prefix_op> blocks;  // fingerprint → its upsert
  uint64_t epoch = 1;
  std::string adapter;

  void store(uint64_t fp, tier t = tier::t1) {
    blocks[fp] = prefix_op{prefix_op::kind::upsert, fp, 16, t};
  }
  void evict(uint64_t fp) { blocks.erase(fp); }

  shard_ops answer(const walk_ask& a) const {
    shard_ops s;
    s.adapter = adapter;
    s.epoch = epoch;
    s.resync = true;
    s.walk = a.id;
    s.walk_last = true;
    auto it = blocks.lower_bound(a.key);
    for (; it != blocks.end() && s.ops.size() < std::max<uint32_t>(a.max, 1); ++it)
      s.ops.push_back(it->second);
    s.walk_done = it == blocks.end();
    s.walk_key = s.walk_done ? 0 : it->first;
    s.resident = blocks.size();
    return s;
  }
};

}  // namespace kvrelay::debounce
