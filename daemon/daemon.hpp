// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The daemon as an object: builds the actor system, one supervised pipeline per engine source
// (per DP rank), the root actor that owns their handles (supervision/daemon_actor.hpp) and the
// admin port from a validated configuration; drains and stops them in order. main.cpp wraps it with
// signals; integration tests run it in-process. Every query below is a request to the root
// actor: this object's fields are written by start() and stop() only, on the caller's thread.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "config/settings.hpp"
#include "messages/supervision.hpp"

namespace kvrelay {

class memory_budget;
class metrics_registry;

class daemon {
 public:
  explicit daemon(config::daemon_config cfg);
  ~daemon();  // stop()
  daemon(const daemon&) = delete;
  daemon& operator=(const daemon&) = delete;

  /// Starts everything. False (with `error`) when something cannot start at all (an unreadable
  /// TLS file, an admin port that cannot bind). Engines that are not there yet are not an error.
  bool start(std::string& error);

  /// Graceful shutdown, first half: stop every ingress, drain the data paths and wait (at most
  /// `deadline`) for the final flush to be acknowledged. One report per pipeline (each is also
  /// logged: finished or not, and what the server is left with).
  std::vector<drain_report> drain(std::chrono::milliseconds deadline);

  /// Stops every actor and the admin port and destroys the actor system. Idempotent.
  void stop();

  /// The /debug/tree document (JSON). Empty before start().
  std::string tree_json(std::chrono::milliseconds timeout = std::chrono::seconds(2));
  /// The /debug/engines document (JSON).
  std::string engines_json() const;
  /// Why ready() is false, per pipeline ("<pipeline>: <reason>").
  std::vector<std::string> not_ready_reasons() const;
  /// Every pipeline decoded a batch (or finished its catch-up) and the server answered.
  /// With `reasons`, also why not (and "degraded" notes that do not make it unready), one
  /// "<pipeline>: <reason>" per entry.
  bool ready(std::vector<std::string>* reasons = nullptr) const;
  /// Fault injection: makes actor `who` of pipeline `pipeline` throw. False when unknown.
  bool crash(const std::string& pipeline, actor_kind who);
  /// The same by the actor's name ("emitter", "shard", ...: /debug/crash?actor=).
  bool crash(const std::string& pipeline, const std::string& actor);
  /// Adds a LoRA id → name mapping to every pipeline of `replica_id` ("" = all). False when no
  /// pipeline matched.
  bool add_adapter(const std::string& replica_id, int64_t id, const std::string& name);
  /// Applies a SIGHUP reload: adapter maps and log level; returns what needs a restart.
  std::vector<std::string> reload(const config::daemon_config& next);

  metrics_registry& metrics();
  /// The process' memory budget, which every pipeline shares (null before start()). Tests hold
  /// a charge of it to keep the ingress paused for as long as they need an overload to last.
  std::shared_ptr<memory_budget> budget() const;
  const config::daemon_config& config() const;
  /// The admin port actually bound (0 when disabled or not started).
  uint16_t admin_port() const;
  std::vector<std::string> pipeline_names() const;

  /// True when every report says the drain completed.
  static bool all_complete(const std::vector<drain_report>& reports);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay
