// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The scraper: every interval, GET the engine's /metrics (on its own fetch thread: a slow engine
// must not block a CAF worker), turn it into ReplicaStats with the engine's metric profile, and
// report it through the emitter. A failure here never touches event ingestion; the actor
// restarts alone. It also raises the silent-stream alarm (prefix-cache queries rising on the
// engine while no KV events arrive), tells the supervisor when the engine falls asleep or wakes
// (its KV cache is discarded: the pipeline clears), and exports the engine's own block counts
// next to kvrelay's resident blocks (the index-coverage gauges).

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "actors/scraper/metric_profile.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {


/// Starts GETs of the engine's /metrics; each answer comes back to the scraper as
/// `atom::fetched`. The default runs them on the scraper's own fetch thread; tests answer
/// themselves (the seam that lets the shell run without sockets).
class fetch_port {
 public:
  virtual ~fetch_port() = default;
  /// Starts one GET; false while the previous one is still running (the tick is then skipped).
  virtual bool request() = 0;
};
using fetch_factory = std::function<std::unique_ptr<fetch_port>(scraper_actor owner)>;

struct scraper_options {
  std::string url = "http://127.0.0.1:8000/metrics";
  std::chrono::milliseconds interval{10'000};
  std::chrono::milliseconds http_timeout{5'000};
  std::chrono::milliseconds rpc_timeout{5'000};
  scraper_config profile;
  int silent_intervals = 3;  // ticks of engine activity without KV events before the alarm
  fetch_factory make_fetcher;  // empty → HTTP GETs of `url` on a fetch thread
};

scraper_actor spawn_scraper(caf::actor_system& sys, const pipeline_context& ctx,
                            const scraper_options& opts, emitter_actor emitter);

}  // namespace kvrelay
