// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The decoder: raw ZMQ payloads → typed events → the shard's work. A shell around batch_router
// (the protocol: adapters, groups, media, epochs, clears cutting a batch), which owns what is
// shared by every partition of a pipeline. The shard is spawned at start and linked to it: a
// shard crash takes the data path down for a clean restart.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "actors/decoder/batch_router.hpp"
#include "actors/shard/positional_index.hpp"
#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {


struct decoder_options {
  /// The protocol's options (batch_router.hpp): adapters (--lora-adapter-names), the expected
  /// DP rank (batches from another rank are dropped), decoding limits, the partition bound.
  router_options router;
  index_options index;  // for every shard
  /// Durable index: the state to start from (a proved snapshot); null = empty.
  std::shared_ptr<const snapshot::pipeline_snapshot> restore;
};

/// `credit(n)` returns n batches of in-flight budget to ingress once they are decoded.
decoder_actor spawn_decoder(caf::actor_system& sys, const pipeline_context& ctx,
                            const decoder_options& opts, debouncer_actor debouncer,
                            std::function<void(size_t)> credit);

}  // namespace kvrelay
