// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The discovery actor: one for the daemon, watching every engine that has a URL. It
// runs each engine's discovery_protocol (engine_watch), executes its actions (fetches on
// threads of their own, never on a CAF worker: a fetch can take its whole HTTP timeout; timers;
// logs) and tells the listener, per engine, the effective settings of its pipelines with
// their origins, or why there are none yet.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/discovery/discovery_protocol.hpp"
#include "actors/discovery/engine_discovery.hpp"
#include "actors/discovery/engine_fetch.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {

/// What a fetch thread found (messages/discovery.hpp declares the pointer).
struct discovery_fetch {
  outcome<discovery::discovered_engine> result;
};

/// Starts fetches; each result comes back to the actor as (atom::fetched, engine, result). The
/// default runs each on a thread of its own (at most one per engine at a time: rule DP2); tests
/// answer themselves (the seam that lets the shell run without sockets).
class discovery_fetch_port {
 public:
  virtual ~discovery_fetch_port() = default;
  virtual void fetch(uint64_t engine, const std::string& url,
                     const discovery::fetch_options& opts) = 0;
};
using discovery_fetch_factory =
    std::function<std::unique_ptr<discovery_fetch_port>(discovery_actor owner)>;

struct discovery_options {
  struct engine {
    uint64_t index = 0;  // position in the configuration: the listener's key
    discovery::engine_request request;
    std::chrono::milliseconds retry_max{30'000};  // engine.discovery_retry_max
  };
  std::vector<engine> engines;
  std::chrono::milliseconds retry_initial{250};
  std::chrono::milliseconds http_timeout{2'000};
  discovery_fetch_factory make_fetcher;  // empty → threads running fetch_and_discover
};

discovery_actor spawn_discovery(caf::actor_system& sys, const pipeline_context& ctx,
                                const discovery_options& opts,
                                discovery_listener_actor listener);

}  // namespace kvrelay
