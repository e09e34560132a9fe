#pragma once
// What every actor system that runs kvrelay actors needs before it is built: the type-ID block,
// the error category renderer, and CAF's own logs kept quiet (and out of the working directory).
// The daemon and the deterministic actor tests call the same function.

namespace caf {
class actor_system_config;
}

namespace kvrelay {

void setup_actor_system(caf::actor_system_config& cfg);

}  // namespace kvrelay
