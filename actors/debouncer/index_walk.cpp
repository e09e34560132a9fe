// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/debouncer/index_walk.hpp"

#include <algorithm>
#include <utility>

namespace kvrelay::debounce {

const char* to_string(walk_kind k) noexcept {
  switch (k) {
    case walk_kind::start: return "start";
    case walk_kind::resync: return "resync";
    case walk_kind::catchup: return "catchup";
    case walk_kind::refresh: return "refresh";
  }
  return "?";
}

index_walk::index_walk(walk_kind k, std::vector<uint32_t> ranks, int64_t now_ms,
                       int64_t interval_ms)
    : kind_(k),
      ranks_(std::move(ranks)),
      resident_(ranks_.size()),
      started_ms_(now_ms),
      interval_ms_(interval_ms) {}

std::optional<uint32_t> index_walk::rank() const noexcept {
  if (done()) return std::nullopt;
  return ranks_[at_];
}

walk_ask index_walk::ask(uint64_t id, uint32_t max) {
  asked_ = id;
  return walk_ask{id, ranks_[at_], partition_, key_, max};
}

bool index_walk::partial(uint64_t id, uint64_t blocks) noexcept {
  if (!expects(id)) return false;
  sent_ += blocks;
  return true;
}

bool index_walk::answered(uint64_t id, uint32_t next_partition, uint64_t next_key, bool rank_done,
                          uint64_t blocks, uint64_t resident) {
  if (!expects(id)) return false;  // IW2
  asked_ = 0;
  sent_ += blocks;
  resident_[at_] = resident;
  if (rank_done) {  // IW1
    ++at_;
    partition_ = 0;
    key_ = 0;
  } else {
    partition_ = next_partition;
    key_ = next_key;
  }
  return true;
}

void index_walk::rank_restarted(uint32_t r) noexcept {
  if (!done() && ranks_[at_] == r) asked_ = 0;  // IW3: asked again at the same cursor
}

void index_walk::rank_cleared(uint32_t r) noexcept {
  if (done() || ranks_[at_] != r) return;  // IW3: a rank behind the cursor is done already
  asked_ = 0;
  ++at_;
  partition_ = 0;
  key_ = 0;
}

void index_walk::restart(walk_kind k, int64_t now_ms) noexcept {  // IW4
  kind_ = k;
  at_ = 0;
  partition_ = 0;
  key_ = 0;
  asked_ = 0;
  sent_ = 0;
  started_ms_ = now_ms;
}

uint64_t index_walk::resident() const noexcept {
  uint64_t n = 0;
  for (const auto& r : resident_) n += r.value_or(0);
  return n;
}

uint32_t index_walk::allowance(int64_t now_ms, uint32_t max) const noexcept {
  if (kind_ != walk_kind::refresh || interval_ms_ <= 0) return max;
  // IW5. Until the rank says how much it holds, one block finds out.
  if (learning()) return std::min<uint32_t>(max, 1);
  const uint64_t total = resident();
  const int64_t elapsed = std::max<int64_t>(0, now_ms - started_ms_);
  const auto share = static_cast<uint64_t>(
      static_cast<long double>(total) * static_cast<long double>(elapsed) /
      static_cast<long double>(interval_ms_));
  if (share <= sent_) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(max, share - sent_));
}

}  // namespace kvrelay::debounce
