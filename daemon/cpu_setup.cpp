// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "daemon/cpu_setup.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kvrelay {

const char* scheduling_policy_name(int policy) {
  switch (policy & ~SCHED_RESET_ON_FORK) {
    case SCHED_OTHER: return "normal";
    case SCHED_BATCH: return "batch";
    case SCHED_IDLE: return "idle";
    case SCHED_FIFO: return "fifo";
    case SCHED_RR: return "rr";
    default: return "unknown";
  }
}

log::record apply_cpu_scheduling(config::cpu_scheduling want) {
  const int before = sched_getscheduler(0);
  const int read_errno = errno;
  log::record r;
  r.message = "cpu scheduling";
  const auto say = [&](const char* policy, std::string why) {
    r.fields = {{"setting", config::to_string(want)}, {"policy", policy}, {"why", std::move(why)}};
    return r;
  };
  if (before < 0) {
    r.severity = log::level::warn;
    return say("unknown", std::string("cannot read the policy: ") + std::strerror(read_errno));
  }
  if (want == config::cpu_scheduling::inherit) return say(scheduling_policy_name(before), "as started");
  if ((before & ~SCHED_RESET_ON_FORK) != SCHED_OTHER)
    return say(scheduling_policy_name(before), "chosen by whoever started kvrelay: kept");
  // Reset-on-fork is the starter's choice too (and clearing it would need CAP_SYS_NICE).
  sched_param p{};
  if (sched_setscheduler(0, SCHED_BATCH | (before & SCHED_RESET_ON_FORK), &p) != 0) {
    // A seccomp profile or a sandbox may refuse it: kvrelay runs on as it was started.
    const int set_errno = errno;
    r.severity = log::level::warn;
    return say("normal", std::string("refused: ") + std::strerror(set_errno));
  }
  return say("batch", "set");
}

}  // namespace kvrelay
