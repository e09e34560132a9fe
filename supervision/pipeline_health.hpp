// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// One pipeline's health and readiness: the facts its children tell (messages/health.hpp), kept
// in one place, and the answers /readyz, /debug/tree and kvrelay_index_incomplete give from them.
// Pure: no actor, no clock; the supervisor's shell feeds it facts and asks it questions, adding
// what only the shell knows (the restart policy's verdict, the shared memory budget, the durable
// index's line).
//
//  PH1. Ready means: a batch was decoded or a catch-up finished (the index has started), the
//       policy server acknowledged last time it was asked, the restart policy is not over its
//       intensity limit, and the ingress is not paused by the memory budget.
//  PH2. Not ready is said in words an operator can act on, one line per cause, in PH1's order.
//  PH3. What the index knows of the engine's cache is the last word of the facts that speak of
//       it: complete after the engine's whole history arrived (history_complete), the engine
//       cleared its cache (engine_cleared) or went to sleep (engine_asleep, which discards it);
//       incomplete since start (history_skipped), since a loss (history_lost), since a removal
//       that could not be decoded (removal_lost), or over the memory budget (index_over_budget).
//  PH4. An incomplete index is degraded, not unready: it still routes better than none, and a
//       sidecar's readiness gates its engine's traffic. Its line (and the durable index's line
//       about a discarded snapshot, while the index is incomplete) follows PH2's lines, marked
//       "degraded (still ready)".
//  PH5. `server_ever_ok` never goes back: a server never reached holds nothing of the pipeline's
//       (the drain report's "left on the server").
//  PH6. on_fact says whether the index's completeness changed, so the shell sets its gauge and
//       logs the recovery once per change, not once per fact.

#include <string>
#include <vector>

#include "messages/health.hpp"

namespace kvrelay {

class pipeline_health {
 public:
  /// What the shell knows and this does not (PH1, PH4).
  struct context {
    bool unhealthy = false;    // the restart policy is over its intensity limit
    bool overloaded = false;   // the memory budget paused the ingress
    std::string durable_line;  // the durable index's /readyz line ("" when none)
  };

  /// PH3, PH5, PH6: true when the index's completeness changed.
  bool on_fact(health_fact f) noexcept;

  bool ready(const context& c) const noexcept;                     // PH1
  std::vector<std::string> not_ready_reasons(const context& c) const;  // PH2, PH4

  bool engine_connected() const noexcept { return engine_connected_; }
  bool server_ok() const noexcept { return server_ok_; }
  bool server_ever_ok() const noexcept { return server_ever_ok_; }
  bool engine_asleep() const noexcept { return engine_asleep_; }
  /// Why the index is incomplete ("" when it matches the engine's cache).
  const char* index_incomplete() const noexcept { return incomplete_ ? incomplete_ : ""; }
  bool incomplete() const noexcept { return incomplete_ != nullptr; }

 private:
  bool first_batch_ = false;
  bool catchup_done_ = false;
  bool engine_connected_ = false;
  bool server_ok_ = false;
  bool server_ever_ok_ = false;
  bool engine_asleep_ = false;
  const char* incomplete_ = nullptr;  // one of the PH3 lines, or null
};

}  // namespace kvrelay
