// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "supervision/pipeline_health.hpp"

namespace kvrelay {

namespace {

constexpr const char* incomplete_since_start =
    "degraded (still ready): index incomplete since start: the engine's replay ring did not "
    "reach back to its first batch, so what it cached before is unknown until it clears its "
    "cache";
constexpr const char* incomplete_since_removal =
    "degraded (still ready): index may hold blocks the engine dropped: a BlockRemoved or "
    "AllBlocksCleared could not be decoded (kvrelay_malformed_events_total); it matches again "
    "once the engine clears its cache or restarts";
constexpr const char* incomplete_over_budget =
    "degraded (still ready): index incomplete: the memory budget cannot hold every block the "
    "engine holds, so blocks past it are not tracked (kvrelay_index_blocks_total"
    "{outcome=\"refused\"}); it is complete again once the engine clears its cache or restarts";
constexpr const char* incomplete_since_loss =
    "degraded (still ready): index incomplete since engine history was lost: what the engine "
    "cached before the loss is unknown until it clears its cache";

}  // namespace

bool pipeline_health::on_fact(health_fact f) noexcept {
  const char* was = incomplete_;
  switch (f) {
    case health_fact::batch_decoded: first_batch_ = true; break;
    case health_fact::catchup_done: catchup_done_ = true; break;
    case health_fact::engine_connected: engine_connected_ = true; break;
    case health_fact::engine_disconnected: engine_connected_ = false; break;
    case health_fact::server_ok: server_ok_ = server_ever_ok_ = true; break;
    case health_fact::server_failed: server_ok_ = false; break;
    case health_fact::history_complete: incomplete_ = nullptr; break;
    case health_fact::history_skipped: incomplete_ = incomplete_since_start; break;
    case health_fact::history_lost: incomplete_ = incomplete_since_loss; break;
    case health_fact::engine_cleared: incomplete_ = nullptr; break;
    case health_fact::removal_lost: incomplete_ = incomplete_since_removal; break;
    case health_fact::index_over_budget: incomplete_ = incomplete_over_budget; break;
    case health_fact::engine_asleep:
      engine_asleep_ = true;
      incomplete_ = nullptr;
      break;
    case health_fact::engine_awake: engine_asleep_ = false; break;
    case health_fact::events_silent:  // the scraper's gauge and log say it; discovery hears it
    case health_fact::events_flowing:
    case health_fact::incarnation_reset:             // the durable state's (DS7)
    case health_fact::snapshot_outside_ring: break;  // the durable state's; history_lost follows
  }
  return was != incomplete_;
}

bool pipeline_health::ready(const context& c) const noexcept {
  return (first_batch_ || catchup_done_) && server_ok_ && !c.unhealthy && !c.overloaded;
}

std::vector<std::string> pipeline_health::not_ready_reasons(const context& c) const {
  std::vector<std::string> out;
  if (!first_batch_ && !catchup_done_)
    out.emplace_back("no batch decoded and no catch-up finished yet");
  if (!server_ok_) out.emplace_back("the policy server has not acknowledged yet");
  if (c.unhealthy) out.emplace_back("restarts over the intensity limit; retrying slowly");
  if (c.overloaded)
    out.emplace_back("overloaded: the memory budget is spent and the ingress paused; batches sent "
                     "meanwhile are repaired by replay or declared lost "
                     "(kvrelay_overloads_total, kvrelay_queue_bytes)");
  if (incomplete_) {
    out.emplace_back(incomplete_);
    if (!c.durable_line.empty()) out.push_back(c.durable_line);  // DS5
  }
  return out;
}

}  // namespace kvrelay
