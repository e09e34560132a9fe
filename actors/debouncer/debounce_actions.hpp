// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What the debouncer's pure machines (debouncer_protocol, target_delivery) ask their shell to do,
// and the moment an input happened at. Shared by both, so one list of actions runs in order.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/debouncer/index_walk.hpp"
#include "base/log.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay::debounce {

using ms = std::chrono::milliseconds;

/// When an input happened: the steady clock (rate limits, outage length) and the wall clock
/// (the timestamp of a clear). The shell reads them; tests pin them.
struct moment {
  int64_t steady_ms = 0;
  int64_t wall_us = 0;
};

enum class action_kind : uint8_t {
  send_unit,      // target, unit → the emitter, for that target
  arm_flush,      // delay, gen: the window (a stale generation is ignored)
  arm_resync,     // delay, gen: a target's next probe, or its deferred reconnect resync
  arm_refresh,    // delay: the refresh's next tick (WK5)
  walk,           // ask: ask that rank's decoder for a walk's next chunk (WK1)
  answer_drains,  // ok: deliver every drain waiting
  health,         // ok: the policy plane's health changed by the readiness policy (tell the
                  // supervisor)
  listen,         // ask the emitter to tell us about targets and reconnects (our handle)
  log,            // line
  trim_heap,      // a large pending set was released: hand its memory back to the OS
  hold,           // ok: hold the readers (memory_budget MG6) or let go (DB11)
};
const char* to_string(action_kind k) noexcept;

struct action {
  action_kind kind = action_kind::log;
  std::string target;  // send_unit
  emit_unit_ptr unit;
  ms delay{0};
  uint64_t gen = 0;
  uint32_t rank = 0;
  walk_ask ask;  // walk
  bool ok = false;
  log::record line;
};
using actions = std::vector<action>;

}  // namespace kvrelay::debounce
