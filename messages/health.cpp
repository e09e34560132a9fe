// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "messages/health.hpp"

namespace kvrelay {

const char* to_string(health_fact f) noexcept {
  switch (f) {
    case health_fact::batch_decoded: return "batch_decoded";
    case health_fact::catchup_done: return "catchup_done";
    case health_fact::engine_connected: return "engine_connected";
    case health_fact::engine_disconnected: return "engine_disconnected";
    case health_fact::server_ok: return "server_ok";
    case health_fact::server_failed: return "server_failed";
    case health_fact::history_complete: return "history_complete";
    case health_fact::history_skipped: return "history_skipped";
    case health_fact::history_lost: return "history_lost";
    case health_fact::snapshot_outside_ring: return "snapshot_outside_ring";
    case health_fact::engine_cleared: return "engine_cleared";
    case health_fact::removal_lost: return "removal_lost";
    case health_fact::index_over_budget: return "index_over_budget";
    case health_fact::engine_asleep: return "engine_asleep";
    case health_fact::engine_awake: return "engine_awake";
    case health_fact::events_silent: return "events_silent";
    case health_fact::events_flowing: return "events_flowing";
    case health_fact::incarnation_reset: return "incarnation_reset";
  }
  return "unknown";
}

}  // namespace kvrelay
