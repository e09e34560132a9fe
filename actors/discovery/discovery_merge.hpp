// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Explicit settings versus what an engine said about itself: given what the
// configuration states for one engine with a URL and what discovery learnt, the effective
// settings of each pipeline, each value with its origin, and the conflicts. Pure: no config/
// (the runtime maps config::engine_settings to engine_request), no clock, no I/O.
//
// Rules:
//  DM1. An explicit value always wins. It is a conflict (one line each, logged once by the
//      caller) when the engine says something else: the rank's endpoint, replay endpoint or
//      topic, the model (unless it is one of the engine's served names), the hash scheme (the
//      dialect that answered), the metrics URL (the engine's own `/metrics`), the rank count.
//      An explicit "" (replay off, scraping off, every topic) is a choice, never a conflict.
//  DM2. Ranks: with an explicit dp_size, ranks 0..dp_size-1; otherwise every rank the engine
//      advertises (SGLang's #38032 lists may skip ranks). A rank the engine does not advertise
//      needs an explicit endpoint, or it is left out (a conflict says so); an advertised rank
//      beyond an explicit dp_size is left out too. No rank left is a failure.
//  DM3. An explicit endpoint (or replay endpoint) is rank 0's; rank r's is derived from it by
//      `rank_endpoint` (the configuration's port + r arithmetic). One that cannot be derived
//      leaves the rank out, with a conflict.
//  DM4. A rank reports as the replica id, or "<id>-dp<rank>" when the engine has more than one
//      rank and `separate_ranks` (dp_mode separate).
//  DM5. The model: explicit, else the engine's first served model (GET /v1/models); neither is a
//      failure. The hash scheme: explicit, else the dialect's. The metrics URL: explicit (even
//      "", scraping off), else `<url>/metrics`.
//  DM6. Origins: "flag/config (<where>)" for explicit values (where = "--topic" or
//      "file:line:col", omitted when unknown), "discovered: <what the engine answered>", or
//      "default (...)" for a value nobody stated (no replay endpoint advertised).
//  DM7. Failures are ec::discovery_failed and name the engine URL.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/discovery/engine_discovery.hpp"
#include "base/error.hpp"
#include "messages/discovery.hpp"

namespace kvrelay::discovery {

/// A value the configuration states, and where ("--topic", "kvrelay.toml:4:1", "" = unknown).
struct given {
  std::string value;
  std::string where;
};

/// What the configuration says about one engine that has a URL.
struct engine_request {
  std::string url;
  std::string replica_id;
  bool separate_ranks = true;  // dp_mode separate: ranks report as "<id>-dp<rank>"
  std::optional<given> endpoint, replay_endpoint, topic, model_id, hash_scheme, metrics_url;
  std::optional<given> dp_size;  // decimal text
  /// Rank r's endpoint from rank 0's (DM3); nullopt when it cannot be derived. Empty: only rank 0.
  std::function<std::optional<std::string>(const std::string& base, int64_t rank)> rank_endpoint;
  /// What to run while the engine says nothing usable (discovery_protocol.hpp, DP8): the
  /// configured settings, for an engine whose URL was derived from its metrics URL. Null: wait.
  std::shared_ptr<const discovered_target> fallback;
};

/// The effective settings (DM1-DM7).
outcome<discovered_target> merge(const engine_request& req, const discovered_engine& found);

/// "flag/config (--topic)" / "flag/config".
std::string explicit_origin(const given& g);

}  // namespace kvrelay::discovery
