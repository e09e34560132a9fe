// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Actor tests without sockets or sleeps: an actor system on CAF's deterministic test coordinator
// (nothing runs until the test says so; timers fire when the test advances the clock) and a
// `recorder`, an actor that stands in for any peer of the actor under test (`aut`): it keeps every
// message it receives and answers requests with a reply the test chooses.
//
//   deterministic_system t;
//   recorder emitter(t);
//   auto aut = spawn_debouncer(t.sys(), ctx, opts, emitter.as<emitter_actor>());
//   caf::anon_send(aut, ops);
//   t.run();                                    // deliver everything that is ready
//   t.advance(std::chrono::milliseconds(100));  // the flush window elapses
//   auto units = emitter.all_last<emit_unit_ptr>();  // (target, unit) messages
//
// CAF headers stay in the .cpp where they can; tests include CAF themselves as needed.

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/message.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace caf {
class actor_system;
class actor_system_config;
namespace scheduler {
class test_coordinator;
}
}  // namespace caf

namespace kvrelay::testing {

class deterministic_system {
 public:
  deterministic_system();
  /// Stops every actor still alive (exit + run), then the system.
  ~deterministic_system();
  deterministic_system(const deterministic_system&) = delete;
  deterministic_system& operator=(const deterministic_system&) = delete;

  caf::actor_system& sys();
  caf::scheduler::test_coordinator& sched();

  /// Runs every ready job, repeatedly, until none is left; returns how many ran.
  size_t run();
  /// Moves the clock forward by `d` (firing every timer due by then) and runs what is ready.
  size_t advance(std::chrono::milliseconds d);
  /// Fires the next pending timer, whatever its due time, and runs; false when there is none.
  bool fire_next_timer();
  /// A timer is pending.
  bool has_timer() const;

  /// Sends exit(user_shutdown) to `hdl` at the end of the test (done by the destructor).
  void stop_at_end(caf::actor hdl);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A peer that records what it receives. Requests get `reply(msg)`'s answer (an empty message
/// when no reply function is set).
class recorder {
 public:
  explicit recorder(deterministic_system& t);
  ~recorder();

  /// The recorder as any typed handle (CAF does not check interfaces on actor_cast).
  template <class Handle>
  Handle as() const {
    return caf::actor_cast<Handle>(hdl_);
  }
  const caf::actor& handle() const { return hdl_; }

  /// Everything received so far, in order.
  const std::vector<caf::message>& received() const;
  /// Forgets what was received.
  void clear();

  /// Every received message whose only element is a T (e.g. emit_unit_ptr), in order.
  template <class T>
  std::vector<T> all() const {
    std::vector<T> out;
    for (const auto& m : received())
      if (m.size() == 1 && m.match_element<T>(0)) out.push_back(m.get_as<T>(0));
    return out;
  }
  /// The last element of every received message that ends with a T, in order (e.g. the units
  /// of (target, emit_unit_ptr) messages).
  template <class T>
  std::vector<T> all_last() const {
    std::vector<T> out;
    for (const auto& m : received())
      if (m.size() >= 1 && m.match_element<T>(m.size() - 1))
        out.push_back(m.get_as<T>(m.size() - 1));
    return out;
  }
  /// Received messages whose first element is a T (atoms: the atom constant type).
  template <class T>
  std::vector<caf::message> starting_with() const {
    std::vector<caf::message> out;
    for (const auto& m : received())
      if (m.size() >= 1 && m.match_element<T>(0)) out.push_back(m);
    return out;
  }

  /// How requests are answered.
  void reply_with(std::function<caf::message(const caf::message&)> f);

 private:
  struct shared;
  std::shared_ptr<shared> shared_;
  caf::actor hdl_;
};

}  // namespace kvrelay::testing
