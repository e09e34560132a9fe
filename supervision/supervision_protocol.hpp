// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A pipeline supervisor's restart and teardown policy, as a pure protocol (no CAF, no clock, no
// timers): the shell (supervision/pipeline_supervisor.cpp) feeds it what happened and executes the
// actions it returns (spawn, stop, timers, logs). Children are named by kind and incarnation:
// every spawn of a unit has a new incarnation, and a DOWN names the incarnation it came from,
// so a late DOWN can never be mistaken for the current child's.
//
// Rules:
//  SV1. Start: the emitter, then the data path (it is handed the emitter), then the scraper when
//     one is configured; each unit starts at incarnation 1.
//  SV2. A DOWN counts only for a live child of the unit's current incarnation. Anything else (a
//     child already replaced, one stopped with its unit, a DOWN after the supervisor stopped it)
//     is stale and ignored.
//  SV3. The data path (ingress, decoder, debouncer) goes down as one: the first member's DOWN
//     stops the other live members of its incarnation and restarts the whole unit. The emitter
//     and the scraper restart alone; nothing else is touched.
//  SV4. Restart delays: the n-th restart within `restart_window` waits base/backoff.hpp's jittered
//     delay for attempt n (backoff_min doubling to backoff_max). Each scheduled restart has a
//     generation; a restart timer whose generation is not the unit's pending one is ignored.
//  SV5. Intensity: more than `max_restarts` restarts of a unit within `restart_window` mark it
//     unhealthy (`mark_unhealthy` and an error log on the transition) and its restarts then
//     wait `unhealthy_backoff`. The pipeline is unhealthy while any unit is; other pipelines and
//     the daemon are never affected.
//  SV6. Recovery: a unit restarted while unhealthy that stays up for a whole `restart_window` is
//     healthy again (`mark_healthy` when no unit is left unhealthy).
//  SV7. Draining (shutdown's first half): nothing restarts any more. DOWNs are still recorded
//     (last error), scheduled restarts are ignored when their timers fire.
//  SV8. Teardown: no restarts either. Live children are stopped one at a time, upstream first
//     (ingress, decoder, debouncer, scraper, emitter), each after the previous one's DOWN, so no
//     actor is destroyed by a sibling dropping the last handle to it while its own exit is still
//     queued. A child that goes down on its own meanwhile just leaves the queue. The teardown
//     deadline is scheduled at once; with nothing alive the supervisor quits right away.
//  SV9. Teardown deadline: every child still alive is killed (CAF's `kill` cannot be trapped) and
//     the supervisor quits without waiting for their DOWNs.
//  SV10. A spawn that fails (the factory returned no actor) counts as a DOWN of that incarnation.

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "base/backoff.hpp"
#include "base/log.hpp"
#include "messages/supervision.hpp"

namespace kvrelay {

class supervision_protocol {
 public:
  using clock = std::chrono::steady_clock;
  using ms = std::chrono::milliseconds;

  struct options {
    ms backoff_min{100};
    ms backoff_max{10'000};
    ms unhealthy_backoff{30'000};
    int max_restarts = 5;
    ms restart_window{60'000};
    ms teardown_deadline{3'000};
    bool has_scraper = false;
    std::string pipeline;  // the log field
    uint64_t seed = std::random_device{}();
  };

  struct action {
    enum class type : uint8_t {
      spawn,             // unit, incarnation: spawn the unit's actors, monitor them
      stop,              // child, incarnation: exit(user_shutdown)
      kill,              // child, incarnation: exit(kill)
      schedule_restart,  // unit, generation, delay: `restart timer` after delay
      schedule_stable,   // unit, incarnation, delay: `stable timer` after delay (SV6)
      schedule_deadline, // delay: `teardown deadline` after delay
      mark_unhealthy,    // the pipeline became unhealthy (SV5)
      mark_healthy,      // ... and is healthy again (SV6)
      log,               // level, message, fields
      quit,              // the supervisor is done (teardown finished or cut short)
    };
    type what;
    pipeline_unit unit = pipeline_unit::datapath;
    actor_kind child = actor_kind::ingress;
    uint64_t number = 0;  // incarnation or generation
    ms delay{0};
    log::level level = log::level::info;
    std::string message;
    std::vector<log::field> fields;
  };
  using actions = std::vector<action>;

  /// Restart bookkeeping of one unit, for the admin tree.
  struct unit_record {
    uint64_t incarnation = 0;
    int restarts = 0;          // since start
    std::string last_error;    // "" until the first failure
    clock::time_point started{};
    bool unhealthy = false;
  };

  explicit supervision_protocol(options o);

  actions start(clock::time_point now);                                          // SV1
  actions child_down(actor_kind who, uint64_t incarnation, const std::string& reason,
                     clock::time_point now);                                     // rules 2, 3, 8
  actions spawn_failed(pipeline_unit u, uint64_t incarnation, const std::string& reason,
                       clock::time_point now);                                   // SV10
  actions restart_timer(pipeline_unit u, uint64_t generation, clock::time_point now);  // SV4
  actions stable_timer(pipeline_unit u, uint64_t incarnation);                   // SV6
  actions drain_begun();                                                         // SV7
  actions teardown_requested();                                                  // SV8
  actions teardown_deadline();                                                   // SV9

  const unit_record& record(pipeline_unit u) const { return units_[index(u)].rec; }
  /// The incarnation a child of kind `k` belongs to when it is alive (0 otherwise).
  uint64_t live_incarnation(actor_kind k) const;
  bool unhealthy() const;
  bool restarting_stopped() const { return draining_ || tearing_down_; }
  bool tearing_down() const { return tearing_down_; }

 private:
  struct unit_state {
    unit_record rec;
    bool up = false;               // spawned and not yet down
    uint64_t pending = 0;          // generation of the scheduled restart; 0 = none
    uint64_t generation = 0;
    std::deque<clock::time_point> recent;  // restarts inside the window
  };
  struct member {
    bool alive = false;
    uint64_t incarnation = 0;
  };

  static size_t index(pipeline_unit u) { return static_cast<size_t>(u); }
  static size_t index(actor_kind k) { return static_cast<size_t>(k); }
  static std::vector<actor_kind> members_of(pipeline_unit u);

  void spawn(pipeline_unit u, clock::time_point now, actions& out);
  // Stops (or kills) a live child: it no longer counts as alive; false when it was not.
  bool end_child(actor_kind k, action::type how, actions& out);
  void unit_down(pipeline_unit u, const std::string& reason, clock::time_point now,
                 actions& out);
  void stop_next(actions& out);
  void log(actions& out, log::level l, std::string msg, std::vector<log::field> f) const;

  options opts_;
  backoff backoff_;
  std::array<unit_state, 3> units_{};
  std::array<member, 6> members_{};  // by actor_kind; `shard` is never a direct child
  bool draining_ = false;
  bool tearing_down_ = false;
  bool quit_ = false;
  std::deque<actor_kind> teardown_queue_;
};

const char* to_string(supervision_protocol::action::type t) noexcept;

}  // namespace kvrelay
