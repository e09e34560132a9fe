// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Plain data that travels between a pipeline's actors. No CAF here: messages/fwd.hpp declares
// these (as shared_ptr<const T>) sendable, messages/actors.hpp names the interfaces.
// Big payloads travel as shared_ptr<const T>: one allocation, no copies, one owner at a time.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/index_op.hpp"
#include "base/kv_events.hpp"
#include "base/memory_budget.hpp"

namespace kvrelay {

/// Who a pipeline reports as: the index key prefix of every update it sends.
struct replica_identity {
  std::string replica_id;
  std::string model_id;
  std::string tenant_id;
  std::string hash_scheme = "vllm";
};

/// One ZMQ payload as received, with the bytes still owned by the ZMQ message (zero-copy).
struct raw_batch {
  uint64_t seq = 0;
  bool replayed = false;
  std::shared_ptr<const void> owner;  // keeps `data` alive
  const char* data = nullptr;
  size_t size = 0;
  /// Its charge to the memory budget (queue "ingress"), taken when the ingress delivers it and
  /// released when the decoder is done with it. Mutable: accounting, not content.
  mutable budget_ticket ticket;
};
using raw_batch_ptr = std::shared_ptr<const raw_batch>;

/// What makes the pipeline clear besides an AllBlocksCleared in a batch: the ingress' lost
/// history and new engine incarnations, and the supervisor's "the engine sleeps" (its KV cache
/// is discarded; the scraper saw it). Connection state is a health_fact for the supervisor.
struct ingress_notice {
  enum class kind : uint8_t { history_lost, incarnation_reset, engine_asleep };
  kind what = kind::history_lost;
  // history_lost: seqs [first_missing, first_available) will never arrive.
  uint64_t first_missing = 0;
  uint64_t first_available = 0;
  const char* reason = "";  // history_lost: why, a static text (no_replay_endpoint, ...)
  // incarnation_reset: the old incarnation's last live seq and the new one's first.
  uint64_t previous_seq = 0;
  uint64_t new_seq = 0;
};
using ingress_notice_ptr = std::shared_ptr<const ingress_notice>;

/// The events of one batch (or of its part between two clears) for the pipeline's shard, in
/// batch order. A stored event carries the adapter partition the decoder resolved for it; a
/// removal names no adapter, so the shard routes it by hash (actors/shard/partition_set.hpp).
struct shard_work {
  uint64_t epoch = 0;
  double ts = 0.0;                   // engine batch time
  bool replayed = false;             // its batch came from a replay: history (debouncer DB19)
  std::vector<kv_event> events;      // stored and removed only; clears travel as epochs
  std::vector<uint32_t> partitions;  // per event: a stored event's partition id (removals: 0)
  /// Partitions this work uses first, named in id order: ids first_new, first_new + 1, ...
  uint32_t first_new = 0;
  std::vector<std::string> new_partitions;
  /// Its charge to the memory budget (queue "shard"), released when the shard is done with it.
  /// Mutable: the decoder charges work the router already made const; it is accounting, not
  /// content.
  mutable budget_ticket ticket;
};
using shard_work_ptr = std::shared_ptr<const shard_work>;

/// Index change the debouncer coalesces: the positional index's own op, passed on as is.
/// `upsert` carries the warmest tier still holding the block.
using prefix_op = index_op;

/// A shard's output for one unit of work (or one resync chunk).
struct shard_ops {
  std::string adapter;  // "" = base model
  uint64_t epoch = 0;
  int64_t ts_us = 0;           // engine batch time in µs (0 = unknown/now)
  bool had_store = false;      // the work held a BlockStored (R12 timestamp rule)
  bool resync = false;         // a re-report of resident state (a walk's chunk), not new events
  bool replayed = false;       // from a replayed batch: history the engine has moved past (DB19)
  std::vector<prefix_op> ops;
  /// A walk's chunk (debouncer rules WK1-WK6): the request it answers (0: not a walk's). A chunk
  /// may span partitions, one message each; the last one (`walk_last`) says where the walk goes
  /// on (`walk_partition`, `walk_key`), or that this data path is done (`walk_done`), and how
  /// many blocks the shard holds now (`resident`).
  uint64_t walk = 0;
  bool walk_last = false;
  bool walk_done = false;
  uint32_t walk_partition = 0;
  uint64_t walk_key = 0;
  uint64_t resident = 0;
  /// The data path started from a restored index: the server must learn it by a walk (WK4).
  bool restored = false;
  /// Its charge to the memory budget (queue "debouncer"): released when the debouncer has
  /// folded the ops into pending and drops the message, or wherever it is dropped before.
  budget_ticket ticket;
};
using shard_ops_ptr = std::shared_ptr<const shard_ops>;

/// One entry of a ReportCacheState update.
struct prefix_add {
  uint64_t fingerprint = 0;
  uint32_t token_count = 0;
  tier t = tier::t1;
  std::string adapter;
};

struct prefix_evict {
  uint64_t fingerprint = 0;
  std::string adapter;
  int64_t ts_us = 0;  // the eviction's batch time
};

/// One ordered unit of work for the emitter: the debouncer ↔ emitter contract.
///  U1. Sent in this order: clear, adds, downgrades, evictions. The emitter finishes a unit
///      before it starts the next one, so a clear can never overtake the adds before it, nor an
///      add the eviction before it. A key appears at most once per unit (final state),
///      but for one fingerprint two engine hashes of one adapter introduced (two cache salts)
///      with no lookup between: its add may come twice, the same upsert.
///  U2. How evictions travel is the emitter's choice (eviction_mode): `rpc` sends one
///      PublishEvent(PREFIX_EVICTED) per entry after the unit's updates; `expire` sends them as
///      entries of the unit's ReportCacheState stream, after its adds and downgrades, in an
///      update whose timestamp_us lies far in the past (1 µs after the epoch).
///  U3. A unit whose clear fails is abandoned: nothing after the clear is sent, and the unit
///      fails. After any failed unit the emitter fails every queued unit without sending it,
///      until a unit that starts with a clear arrives (the debouncer's resync).
///  U4. Per target: the debouncer sends each unit to one target by name (the emitter's
///      (atom::targets, names) says which exist), and the emitter answers every unit it got
///      exactly once with an emit_result to its sender, naming that target. A unit for a target
///      that is not (or no longer) one is answered ok = false, sent = false ("unknown target");
///      units pending at a target that vanished are dropped unanswered.
///  U5. `restores` (rpc mode, debouncer rule SR2): adapter keys a base-model PREFIX_EVICTED of
///      this unit sweeps from a server that ignores adapter_scoped. The emitter sends them as one
///      ReportCacheState stream once every eviction of the unit completed, so they land after
///      the sweep.
struct emit_unit {
  uint64_t id = 0;
  bool clear = false;
  int64_t clear_ts_us = 0;
  std::vector<prefix_add> adds;
  int64_t adds_ts_us = 0;
  struct downgrade_group {
    int64_t ts_us = 0;  // the eviction's batch time (L03)
    std::vector<prefix_add> entries;
  };
  std::vector<downgrade_group> downgrades;
  std::vector<prefix_evict> evicts;
  std::vector<prefix_add> restores;  // U5
  int64_t restores_ts_us = 0;

  size_t entries() const {
    size_t n = adds.size() + evicts.size() + restores.size() + (clear ? 1 : 0);
    for (const auto& g : downgrades) n += g.entries.size();
    return n;
  }
};
using emit_unit_ptr = std::shared_ptr<const emit_unit>;

/// The emitter's answer for one unit.
struct emit_result {
  std::string target;       // the target the unit was for (U4)
  uint64_t id = 0;
  bool ok = true;           // every RPC of the unit succeeded
  uint32_t failed_rpcs = 0;
  bool sent = true;         // false: failed without anything going on the wire (U3)
  std::string last_error;
};

/// Load statistics scraped from the engine, for a stats-only CacheStateUpdate.
struct stats_sample {
  int64_t cache_memory_bytes = 0;
  float hit_rate = 0;
  float pressure = 0;
  int64_t t2_hit_tokens = 0;
  int64_t t2_query_tokens = 0;
};
using stats_sample_ptr = std::shared_ptr<const stats_sample>;

}  // namespace kvrelay
