// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/ingress/sequence_tracker.hpp"

#include <string>

namespace kvrelay::ingress {

const char* to_string(loss_reason r) noexcept {
  switch (r) {
    case loss_reason::no_replay_endpoint: return "no_replay_endpoint";
    case loss_reason::history_lost: return "history_lost";
    case loss_reason::replay_failed: return "replay_failed";
    case loss_reason::buffer_overflow: return "buffer_overflow";
    case loss_reason::resume_outside_ring: return "resume_outside_ring";
  }
  return "unknown";
}

const char* to_string(replay_reason r) noexcept {
  switch (r) {
    case replay_reason::catch_up: return "catch_up";
    case replay_reason::resume: return "resume";
    case replay_reason::repair: return "repair";
    case replay_reason::continue_: return "continue";
    case replay_reason::retry: return "retry";
    case replay_reason::probe: return "probe";
  }
  return "unknown";
}

const char* to_string(tracker_phase p) noexcept {
  switch (p) {
    case tracker_phase::unstarted: return "unstarted";
    case tracker_phase::streaming: return "streaming";
    case tracker_phase::replaying: return "replaying";
    case tracker_phase::probe_wait: return "probe_wait";
  }
  return "unknown";
}

const char* to_string(action_kind k) noexcept {
  switch (k) {
    case action_kind::deliver: return "deliver";
    case action_kind::gap_detected: return "gap_detected";
    case action_kind::request_replay: return "request_replay";
    case action_kind::cancel_replay: return "cancel_replay";
    case action_kind::history_lost: return "history_lost";
    case action_kind::incarnation_reset: return "incarnation_reset";
    case action_kind::schedule_probe: return "schedule_probe";
    case action_kind::first_batch: return "first_batch";
  }
  return "unknown";
}

// Compiled once here so a template error shows up when the core builds, not first in a user.
template class sequence_tracker<std::string>;

}  // namespace kvrelay::ingress
