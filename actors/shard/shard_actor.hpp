#pragma once
// A shard: the positional index of one (pipeline, adapter) partition, as an actor. Isolation
// between adapters is the point: one adapter's flood is capped on its own and shows in its own
// counters. A shard is spawned linked to the decoder: if it dies its reverse map is gone, so the
// whole data path restarts from a clear (and replay), never leaving hints it can no longer evict.

#include <memory>
#include <string>

#include "actors/shard/positional_index.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class local_actor;
}

namespace kvrelay {

struct shard_options {
  std::string adapter;     // "" = base model
  index_options index;
};

/// Spawns a shard linked to `parent` (the decoder).
shard_actor spawn_shard(caf::local_actor* parent, const pipeline_context& ctx,
                        const shard_options& opts, debouncer_actor debouncer);

}  // namespace kvrelay
