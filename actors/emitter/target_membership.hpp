// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Which policy-server targets a pipeline sends to when some are DNS fan-out names: the static
// targets of the configuration, and one target per address a name resolves to. Pure: no actor,
// no resolver, no clock but the one passed in; the emitter's shell resolves, makes and drops
// the links, and runs the timers this asks for.
//
//  TM1. At start every DNS name is resolved; then every resolve interval (the shell's timer,
//       on_interval), each name that has no resolve under way.
//  TM2. A name has at most one resolve under way; its answer clears it.
//  TM3. A link of a DNS name that left READY has that name resolved again at once, but at most
//       once per `min_retrigger_ms` after its last resolve started; sooner, one deferred resolve
//       is scheduled for when the wait ends (more losses meanwhile add nothing).
//  TM4. A failed resolve, or one with no address, keeps the name's last good set: its links
//       stay (a DNS outage must not empty the fleet's targets); the failure is counted.
//  TM5. A good answer is the name's new set (sorted, duplicates gone). An address it no longer
//       gives loses this name as a source; a target no source names any more is dropped. A
//       static target is never dropped by a name.
//  TM6. An address the set newly gives is added as a target unless one exists (a static one, or
//       another name's): then this name only joins its sources.
//  TM7. `targets_changed` follows the actions that added or dropped a target, once per answer:
//       the listener hears the new list once.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvrelay::emitter {

class target_membership {
 public:
  struct action {
    enum class kind : uint8_t {
      resolve,          // start resolving name `name_index` (TM1-TM3)
      resolve_later,    // on_deferred_due(name_index) in `wait_ms` (TM3)
      resolve_failed,   // count and warn: the last good set stays (TM4)
      add_target,       // make and start a link to `target` (TM6)
      drop_target,      // drop the link to `target` (TM5)
      targets_changed,  // tell the listener the new list (TM7)
    };
    kind what;
    size_t name_index = 0;
    std::string target;
    int64_t wait_ms = 0;
  };
  using actions = std::vector<action>;

  static constexpr int64_t default_min_retrigger_ms = 1000;

  target_membership(std::vector<std::string> static_targets, std::vector<std::string> dns_names,
                    int64_t min_retrigger_ms = default_min_retrigger_ms);

  void start(int64_t now_ms, actions& out);                        // TM1
  void on_interval(int64_t now_ms, actions& out);                  // TM1
  void on_link_lost(const std::string& target, int64_t now_ms, actions& out);  // TM3
  void on_deferred_due(size_t name_index, int64_t now_ms, actions& out);       // TM3
  /// TM2, TM4-TM7. `error` non-empty (or no address) is a failure.
  void on_resolved(size_t name_index, std::vector<std::string> addresses, const std::string& error,
                   actions& out);
  /// The shell could not make a link to an added target: it is no target (a later answer that
  /// still gives the address tries again).
  void on_add_failed(const std::string& target);

  size_t name_count() const noexcept { return names_.size(); }
  const std::string& name(size_t i) const { return names_.at(i).spec; }
  /// The name's last good set (sorted).
  const std::vector<std::string>& addresses(size_t i) const { return names_.at(i).addresses; }
  bool resolving(size_t i) const { return names_.at(i).in_flight; }
  /// Every target now, sorted.
  std::vector<std::string> targets() const;

 private:
  struct dns_name {
    std::string spec;
    bool in_flight = false;
    bool deferred = false;
    int64_t last_start_ms = 0;
    bool started_once = false;
    std::vector<std::string> addresses;
  };
  struct sources {
    bool is_static = false;
    std::vector<size_t> names;
  };
  void resolve(size_t i, int64_t now_ms, actions& out);

  int64_t min_retrigger_ms_;
  std::vector<dns_name> names_;
  std::map<std::string, sources> targets_;
};

}  // namespace kvrelay::emitter
