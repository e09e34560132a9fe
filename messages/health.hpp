// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Facts about a pipeline that its supervisor owns (readiness, /debug/engines), told by the actor
// that observes each one. Sent on change only, never per batch: the supervisor is the one owner
// of "is this pipeline ready", nobody else keeps a copy.

#include <cstdint>

namespace kvrelay {

enum class health_fact : uint8_t {
  batch_decoded,        // decoder: this data path decoded its first batch
  catchup_done,         // ingress: a replay (the cold-start catch-up) finished
  engine_connected,     // ingress: the SUB socket has an engine peer
  engine_disconnected,  // ingress: the SUB socket lost its last peer
  server_ok,            // debouncer or scraper: the policy server acknowledged
  server_failed,        // debouncer or scraper: a unit or a stats report failed
  // What the index knows of the engine's cache (the supervisor keeps the last word):
  history_complete,     // ingress: an engine process' batches are all here, from its seq 0
  history_skipped,      // ingress: its first batch here came after 0 (the ring was shorter)
  history_lost,         // ingress: history was lost mid-stream (the pipeline clears)
  snapshot_outside_ring,// ingress: the replay ring no longer reached back to a restored
                        // snapshot (RD6): it is discarded, the pipeline clears
  engine_cleared,       // decoder: AllBlocksCleared: the engine's cache is empty, like the index
  removal_lost,         // decoder: a BlockRemoved/AllBlocksCleared it could not decode: the index
                        //   may hold blocks the engine dropped
  index_over_budget,    // shard: the memory budget refused blocks: the index holds less than the
                        //   engine (memory_budget IB3-IB4)
  engine_asleep,        // scraper: the engine sleeps (its cache discarded): clear the pipeline
  engine_awake,         // scraper: the engine woke up
  events_silent,        // scraper: the engine's /metrics show prefix-cache activity, no KV events
  events_flowing,       // scraper: KV events arrive again after events_silent
  incarnation_reset,    // ingress: the engine's sequence restarted (a new process): the durable
                        //   index reads the new process' evidence for its delta log
};

const char* to_string(health_fact f) noexcept;

}  // namespace kvrelay
