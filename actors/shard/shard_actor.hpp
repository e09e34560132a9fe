// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The shard: every adapter partition of one pipeline (actors/shard/partition_set.hpp), as an
// actor. Partitions keep adapters apart (each has its own reverse map, resident cap and
// counters); one actor holds them all so that a removal, which names no adapter, reaches the
// partition holding its hash through a directory kept exactly in step, with no fan-out and no
// per-adapter mailbox. Spawned linked to the decoder: if it dies its reverse maps are gone, so
// the whole data path restarts from a clear (and replay), never leaving hints it can no longer
// evict.

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
  index_options index;  // for every partition
  /// Durable index: partitions to start with, reported to the debouncer at once as
  /// upserts (it starts with ALL_CLEARED); null = empty.
  std::shared_ptr<const snapshot::pipeline_snapshot> restore;
};

/// Spawns a shard linked to `parent` (the decoder).
shard_actor spawn_shard(caf::local_actor* parent, const pipeline_context& ctx,
                        const shard_options& opts, debouncer_actor debouncer);

}  // namespace kvrelay
