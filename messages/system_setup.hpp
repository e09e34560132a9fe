// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What every actor system that runs kvrelay actors needs before it is built: the type-ID block,
// the error category renderer, and CAF's own logs kept quiet (and out of the working directory).
// The daemon and the deterministic actor tests call the same function.

namespace caf {
class actor_system_config;
}

namespace kvrelay {

void setup_actor_system(caf::actor_system_config& cfg);

/// The scheduler settings of a real (not deterministic) kvrelay actor system, tuned for idle:
/// the daemon uses them, and so does every benchmark that charges CPU to kvrelay's actors.
void tune_scheduler(caf::actor_system_config& cfg);

}  // namespace kvrelay
