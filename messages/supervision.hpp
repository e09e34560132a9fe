// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The supervision vocabulary: which unit of a pipeline restarts (a timer's payload), which
// actor a fault injection targets, and how a shutdown drain ended. Enums instead of names, so a typo is a compile error and no
// value doubles as a sentinel; the names below are what logs, metrics (`unit` label) and the
// admin port's `/debug/crash?actor=` use. Header-only and CAF-free: the pure supervision
// protocol (kvrelay_core) uses it too.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace kvrelay {

/// What restarts together. The data path (ingress, decoder with its shards, debouncer) is one
/// unit because its state is one reverse map; the side actors restart alone.
enum class pipeline_unit : uint8_t { datapath, emitter, scraper };

/// A supervised actor of a pipeline, by kind (shards are the decoder's children).
enum class actor_kind : uint8_t { ingress, decoder, shard, debouncer, emitter, scraper };

constexpr std::string_view to_string(pipeline_unit u) noexcept {
  switch (u) {
    case pipeline_unit::datapath: return "datapath";
    case pipeline_unit::emitter: return "emitter";
    case pipeline_unit::scraper: return "scraper";
  }
  return "unknown";
}

constexpr std::string_view to_string(actor_kind k) noexcept {
  switch (k) {
    case actor_kind::ingress: return "ingress";
    case actor_kind::decoder: return "decoder";
    case actor_kind::shard: return "shard";
    case actor_kind::debouncer: return "debouncer";
    case actor_kind::emitter: return "emitter";
    case actor_kind::scraper: return "scraper";
  }
  return "unknown";
}

/// The unit an actor restarts with.
constexpr pipeline_unit unit_of(actor_kind k) noexcept {
  switch (k) {
    case actor_kind::emitter: return pipeline_unit::emitter;
    case actor_kind::scraper: return pipeline_unit::scraper;
    default: return pipeline_unit::datapath;
  }
}

/// The kind named `s` ("emitter", "shard", ...), or nullopt.
constexpr std::optional<actor_kind> parse_actor_kind(std::string_view s) noexcept {
  for (auto k : {actor_kind::ingress, actor_kind::decoder, actor_kind::shard,
                 actor_kind::debouncer, actor_kind::emitter, actor_kind::scraper})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

/// How one pipeline's shutdown drain ended and what it leaves on the policy server.
struct drain_report {
  std::string pipeline;
  bool complete = false;     // every batch read was decoded, sent and acknowledged
  bool timed_out = false;    // the drain's time budget ran out before that
  std::string failed_step;   // "ingress", "decoder", "debouncer" or "" (none, or no data path)
  bool final_clear = false;  // server.on_shutdown = clear was asked for
  int64_t pending = -1;      // updates the server never got (-1: unknown)
  int64_t in_flight = -1;    // units sent but not acknowledged (-1: unknown)
  int64_t resident = -1;     // blocks in the reverse map: what the server holds for us (-1: unknown)
  /// The policy server acknowledged something of this pipeline's since it started. When it never
  /// did (never reachable), it holds nothing of it, whatever the index holds.
  bool server_acknowledged = true;

  /// Entries this pipeline leaves on the server: none after an acknowledged final clear or when
  /// the server never acknowledged anything, else what it reported resident (stale ones among
  /// them when the drain did not complete).
  int64_t left_on_server() const {
    return (final_clear && complete) || !server_acknowledged ? 0 : resident;
  }
};

/// A pipeline as the admin port shows it: what the daemon fixed at start, and its live status
/// tree (children, restarts, readiness) as the supervisor answered it.
struct pipeline_view {
  std::string name;
  std::string replica_id;
  std::string endpoint;
  std::string replay_endpoint;
  std::string topic;
  /// Engines with a URL: where each effective value came from ("endpoint" → "discovered: GET
  /// /kv_event_sources [\"0\"]", "model_id" → "flag/config (--model-id)", ...).
  std::vector<std::pair<std::string, std::string>> origins;
  /// An engine discovery has no answer for yet: why ("waiting for engine <url>: ..."); such a
  /// view has no pipeline behind it.
  std::string waiting;
  actor_status status;
};

}  // namespace kvrelay
