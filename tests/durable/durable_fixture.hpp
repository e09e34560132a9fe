// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What the durable index's end-to-end tests share: the engine's /metrics (its
// process start time, the proof of its incarnation), a TOML configuration for the real binary,
// an engine that publishes on its own thread, and looks at the state dir.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/fault_fixture.hpp"
#include "tools/fake-engine/engine_http.hpp"

namespace kvrelay::durable_e2e {

using namespace std::chrono_literals;
using faults::fault_env;

/// The engine's HTTP server, for its /metrics (process_start_time_seconds).
struct engine_metrics {
  fake::engine_http http{fake::engine_description{}, "127.0.0.1", 0, nullptr};
  std::string url() const { return http.url() + "/metrics"; }
  /// The engine process restarted: another start time.
  void restarted() {
    http.update([](fake::engine_description& d) { d.process_start_time += 17.5; });
  }
};

/// A configuration for the real binary: one engine (the env's), its /metrics, a state dir.
/// `interval` "0" lets kvrelay derive it (with the delta log: compaction).
inline std::string config_for(fault_env& env, const std::string& state_dir,
                              const std::string& metrics_url, const std::string& interval,
                              const std::string& level = "info") {
  return "[server]\naddress = \"" + env.server.target() +
         "\"\nrpc_timeout = \"500ms\"\n\n[admin]\nlisten = \"127.0.0.1:0\"\n\n[state]\ndir = \"" +
         state_dir + "\"\ninterval = \"" + interval + "\"\n\n[log]\nformat = \"text\"\nlevel = \"" +
         level + "\"\n\n[[engine]]\nreplica_id = \"" + std::string(faults::replica) +
         "\"\nmodel_id = \"" + faults::model + "\"\ntenant_id = \"" + faults::tenant +
         "\"\nendpoint = \"" + env.engine->live_endpoint() + "\"\nreplay_endpoint = \"" +
         env.engine->replay_endpoint() + "\"\ntopic = \"" + faults::topic +
         "\"\nwindow = \"10ms\"\nreconnect_backoff = \"100ms\"\n\n[engine.metrics]\nurl = \"" +
         metrics_url + "\"\ninterval = \"1s\"\n";
}

/// The engine publishes one step every `gap` on its own thread until paused; pausing waits for
/// the thread to stop, so what was published is known when it returns.
struct engine_load {
  explicit engine_load(fault_env& e) : env(e) {}
  ~engine_load() { pause(); }
  void resume(std::chrono::microseconds gap) {
    pause();
    running = true;
    worker = std::thread([this, gap] {
      while (running.load()) {
        env.publish_steps(1);
        std::this_thread::sleep_for(gap);
      }
    });
  }
  void pause() {
    running = false;
    if (worker.joinable()) worker.join();
  }
  fault_env& env;
  std::atomic<bool> running{false};
  std::thread worker;
};

/// The files of a state dir with one extension (".kvsnap", ".kvlog").
inline std::vector<std::string> files_with(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ext) out.push_back(e.path().string());
  return out;
}

/// Every entry the server holds for the replica is one the engine holds (nothing stale, nothing
/// wrong), exact or not.
inline bool server_within_truth(fault_env& env) {
  const auto want = env.model.expected();
  for (const auto& [k, v] : faults::server_view(env.server)) {
    const auto it = want.find(k);
    if (it == want.end() || it->second != v) return false;
  }
  return true;
}

/// A child's admin port, from its "admin port listening" line (0 until it is written).
inline uint16_t admin_port(const faults::child_process& p) {
  static const std::regex listening(R"(admin port listening listen=127\.0\.0\.1:([0-9]+))");
  const std::string err = p.err();
  std::smatch m;
  return std::regex_search(err, m, listening) ? static_cast<uint16_t>(std::stoi(m[1].str())) : 0;
}

/// Whether the child's ingress is live (a live batch arrived: the subscription is in effect) and
/// caught up (no replay, log replay or tail probe pending): what the engine publishes from now on
/// reaches it live, in order.
inline bool relay_live(const faults::child_process& p) {
  const uint16_t port = admin_port(p);
  if (port == 0) return false;
  const auto tree = nlohmann::json::parse(faults::http_get(port, "/debug/tree").body, nullptr, false);
  if (tree.is_discarded()) return false;
  for (const auto& pl : tree.value("pipelines", nlohmann::json::array()))
    for (const auto& c : pl.value("children", nlohmann::json::array()))
      if (c.value("name", "") == "ingress")
        return c.value("live", false) && !c.value("catching_up", true);
  return false;
}

/// Until the child is live (relay_live). Once it has subscribed, an empty batch (it indexes and
/// evicts nothing: the engine model does not change) every 200 ms gives it a live batch to see.
/// Not before, and not faster: each one takes a slot of the engine's ring, and a kvrelay slow to
/// start (a sanitizer build takes seconds) would otherwise find its resume point pushed out of
/// the ring by the test itself. False after `timeout`.
inline bool wait_relay_live(fault_env& env, const faults::child_process& p,
                            std::chrono::milliseconds timeout = 20s) {
  auto last_empty = std::chrono::steady_clock::time_point{};
  return faults::wait_until(
      [&] {
        if (relay_live(p)) return true;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_empty >= 200ms &&
            p.err().find("subscribed to engine KV events") != std::string::npos) {
          env.publish_events({});
          last_empty = now;
        }
        return false;
      },
      timeout);
}

/// How many times `needle` occurs in `text`.
inline size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace kvrelay::durable_e2e
