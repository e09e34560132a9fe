#pragma once
// The scraper: every interval, GET the engine's /metrics (on its own fetch thread: a slow engine
// must not block a CAF worker), turn it into ReplicaStats with the engine's metric profile, and
// report it through the emitter. A failure here never touches event ingestion; the actor
// restarts alone. It also raises the silent-stream alarm: prefix-cache queries rising on the
// engine while no KV events arrive.

#include <chrono>
#include <memory>

#include "actors/scraper/metric_profile.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {


struct scraper_options {
  std::string url = "http://127.0.0.1:8000/metrics";
  std::chrono::milliseconds interval{10'000};
  std::chrono::milliseconds http_timeout{5'000};
  std::chrono::milliseconds rpc_timeout{5'000};
  scraper_config profile;
  int silent_intervals = 3;  // ticks of engine activity without KV events before the alarm
};

scraper_actor spawn_scraper(caf::actor_system& sys, const pipeline_context& ctx,
                            const scraper_options& opts, emitter_actor emitter);

}  // namespace kvrelay
