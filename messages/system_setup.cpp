// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "messages/system_setup.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "messages/fwd.hpp"

namespace kvrelay {

void setup_actor_system(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kvrelay>();
  // add_error_category<ec>(atom) does not compile in 0.17.6: register the renderer overload.
  cfg.add_error_category(caf::atom("kvrelay"),
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = to_string(static_cast<ec>(code));
                           if (!ctx.empty()) out += ": " + caf::to_string(ctx);
                           return out;
                         });
  // Never write CAF's actor_log files into the working directory.
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
}

// CAF's scheduler on the small machines kvrelay shares with engines (its polling was
// ~95 % of an idle daemon's CPU).
void tune_scheduler(caf::actor_system_config& cfg) {
  // CAF defaults to at least 4 workers; more workers than cores only adds idle wake-ups.
  cfg.set("scheduler.max-threads",
          static_cast<size_t>(std::max(2u, std::thread::hardware_concurrency())));
  // After each job a worker polls its queue: 100 times at once (CAF's default, ~µs), then
  // `moderate` times with a 50 µs sleep each, then it waits on its condition variable, woken by
  // any job enqueued from outside (a ZMQ, gRPC or timer thread) and by the relaxed timeout,
  // which only serves stealing from a busy worker. CAF's 500 moderate polls (25 ms awake per
  // timer tick) and 10 ms timeouts were most of an idle daemon's wake-ups; 10 and 1 s cut an
  // idle 4-pipeline daemon from ~230 to ~30 scheduler wake-ups/s (BENCHMARKS.md, idle CPU).
  // Paced traffic (10^4-10^5 blocks/s: a batch every 4-40 ms) woke each worker ten times per
  // batch for those polls: ~25 context switches a batch, at 10 k blocks/s ~80 per 1 000 blocks
  // (BENCHMARKS.md, the fast path). None: after its 100 quick polls a worker waits on its
  // condition variable, and a job from outside (the ZMQ thread, a timer, gRPC) wakes it there.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
}

}  // namespace kvrelay
