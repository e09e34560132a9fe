// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What engine discovery tells the daemon: for each engine with a URL, the effective
// settings of each of its pipelines (one per DP rank) with where every value came from, or why
// there are none yet. Plain data; the discovery actor (actors/discovery/discovery_actor.hpp)
// sends it as a discovery_update_ptr; messages/fwd.hpp declares that sendable.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvrelay {

/// One effective value and its origin: "flag/config (--topic)",
/// "discovered: GET /kv_event_sources [\"1\"]" or "default (...)".
struct discovery_setting {
  std::string value;
  std::string origin;
  bool operator==(const discovery_setting& o) const {
    return value == o.value && origin == o.origin;
  }
};

/// One pipeline of a discovered engine: one DP rank's subscription.
struct discovered_rank {
  int64_t dp_rank = 0;
  std::string replica_id;  // what the rank reports as ("<id>-dp<rank>" for separate ranks)
  discovery_setting endpoint;
  discovery_setting replay_endpoint;  // value "" = no replay
  discovery_setting topic;
  std::optional<int64_t> block_size;  // where the engine states it (SGLang)
};

/// The effective configuration of one engine after discovery (explicit values win).
struct discovered_target {
  std::string url;      // the engine URL
  std::string dialect;  // "vllm" / "sglang": which engine answered
  discovery_setting model_id;
  discovery_setting hash_scheme;
  discovery_setting metrics_url;
  discovery_setting dp_size;  // the number of ranks, as text
  std::vector<discovered_rank> ranks;  // by rank
  /// Explicit values the engine contradicts ("the explicit value wins"); logged once each.
  std::vector<std::string> conflicts;
  /// What an operator should know (the parser's notes and the merge's own).
  std::vector<std::string> notes;

  /// The same subscriptions and identity: what a pipeline is built from, origins ignored.
  bool same_pipelines(const discovered_target& o) const;
};

/// Discovery's word on engine `engine` (its index in the configuration): a target when the
/// engine answered (a change of endpoints or rank set, or the first answer), otherwise why
/// there is none yet ("waiting for engine http://...: <last error>").
struct discovery_update {
  size_t engine = 0;
  std::string url;
  std::shared_ptr<const discovered_target> target;  // null while waiting
  std::string waiting;                              // "" when target is set
};
using discovery_update_ptr = std::shared_ptr<const discovery_update>;

/// A fetch thread's result for the discovery actor (defined with it: it carries the parser's
/// types, which messages/ does not see).
struct discovery_fetch;
using discovery_fetch_ptr = std::shared_ptr<const discovery_fetch>;

inline bool discovered_target::same_pipelines(const discovered_target& o) const {
  if (model_id.value != o.model_id.value || hash_scheme.value != o.hash_scheme.value ||
      metrics_url.value != o.metrics_url.value || ranks.size() != o.ranks.size())
    return false;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& a = ranks[i];
    const auto& b = o.ranks[i];
    if (a.dp_rank != b.dp_rank || a.replica_id != b.replica_id ||
        a.endpoint.value != b.endpoint.value ||
        a.replay_endpoint.value != b.replay_endpoint.value || a.topic.value != b.topic.value ||
        a.block_size != b.block_size)
      return false;
  }
  return true;
}

}  // namespace kvrelay
