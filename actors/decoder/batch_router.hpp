// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The decoder's protocol: one raw payload in, the steps the shell executes out. Pure logic (no
// CAF): the decoder actor unpacks messages, calls this, sends the steps in order and turns the
// notices into log lines and the counters into /metrics.
//
// BR1. A payload that is not a batch (wire_decoder WD1) is dropped whole and counted by reason;
//      so is a batch whose DP rank is not the subscribed one (its events, good or bad, go too).
// BR2. Events keep batch order in the work they go to. An AllBlocksCleared cuts the batch: the
//      work before it is sent, then the clear with a new epoch, then the work after it, so that
//      nothing from before a clear can land after it. Lost history, a new engine incarnation
//      and a sleeping engine clear the same way (an incarnation also forgets the learned
//      KV-cache groups).
// BR3. Only main-attention groups are indexed (group_filter); other events are counted.
// BR4. A store's adapter is its lora_name; else the configured id → name; else it is dropped
//      (fail-closed), warned once per id. Each adapter is a partition with a dense id, created
//      by the first work that uses it (the work names it), at most `max_partitions`: stores for
//      more are dropped and warned about once.
// BR5. A store or removal whose medium is unknown is never indexed: it is counted by value (the
//      first `max_media_values` distinct values by name, the rest as "other") and warned once
//      per value. Removals name no adapter: they travel unrouted, the shard routes them by hash.
// BR6. Every decoded BlockStored / BlockRemoved is counted by medium, events and blocks.
// BR7. An event the decoder skipped (WD2: the rest of its batch goes on, in order) is counted by
//      kind and reason and handed to the shell to say. An undecodable BlockRemoved or
//      AllBlocksCleared may leave blocks in the index that the engine dropped: the first one
//      since the last clear sets `removal_lost` (the shell tells the supervisor, which shows the
//      index incomplete until the engine clears or restarts).
// BR8. A payload that came from a replay (the engine's ring, the delta log) makes work marked
//      `replayed`: the debouncer holds history back (DB19).

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "actors/decoder/group_filter.hpp"
#include "actors/decoder/wire_decoder.hpp"
#include "durable/format/snapshot_format.hpp"
#include "messages/pipeline.hpp"

namespace kvrelay {

struct router_options {
  std::map<int64_t, std::string> adapters;  // --lora-adapter-names
  std::optional<int64_t> expected_dp_rank;  // batches from another rank are dropped
  wire_decoder::limits limits;
  uint32_t max_partitions = 4096;           // adapter partitions per pipeline (BR4)
};

/// One thing the shell does, in order.
struct router_step {
  enum class kind : uint8_t { work, clear };
  kind what = kind::work;
  shard_work_ptr work;            // kind::work: for the shard
  uint64_t epoch = 0;             // kind::clear: the epoch after the clear
  int64_t ts_us = 0;              // kind::clear: the batch time (0 = now)
  const char* reason = "";        // kind::clear: for the log
};

/// Everything one input produced. Cleared by the router at the start of each call.
struct router_output {
  std::vector<router_step> steps;
  decode_error error = decode_error::none;  // BR1: the payload was dropped
  std::string detail;                       //   and why
  bool wrong_rank = false;                  // BR1: dropped for its DP rank
  bool first_batch = false;                 // the first batch this pipeline decoded
  // Said once each (the log): partitions created, LoRA ids dropped, unknown media seen.
  std::vector<std::string> new_partitions;
  std::vector<int64_t> unmapped_ids;
  std::vector<std::string> unknown_media;
  bool partition_limit_hit = false;
  std::vector<event_fault> malformed;  // BR7: the events the decoder skipped, in batch order
  bool removal_lost = false;            // BR7: first undecodable removal/clear since a clear
};

/// Counters since construction.
struct router_stats {
  enum ev_type : size_t { stored = 0, removed = 1 };
  uint64_t batches = 0;       // payloads received
  uint64_t decoded = 0;       // payloads decoded and not dropped
  uint64_t dropped = 0;       // BR1, any reason
  uint64_t wrong_rank = 0;
  uint64_t events = 0;        // decoded events (unknown tags excluded)
  uint64_t cleared = 0;       // AllBlocksCleared events
  uint64_t unknown_tags = 0;
  uint64_t unmapped = 0;          // BR4: stores dropped, LoRA id without a name
  uint64_t partition_limited = 0; // BR4: stores dropped, too many partitions
  uint64_t group_filtered = 0;    // BR3
  uint64_t unknown_medium = 0;    // BR5: events of every unknown value
  std::array<std::array<uint64_t, medium_count>, 2> events_by_medium{};
  std::array<std::array<uint64_t, medium_count>, 2> blocks_by_medium{};
  /// BR5: events per unknown medium value (at most max_media_values + "other").
  std::map<std::string, uint64_t> unknown_media;
  /// BR7: skipped events by kind and reason.
  std::array<std::array<uint64_t, decode_error_count>, event_kind_count> malformed{};
  uint64_t malformed_total = 0;
  uint64_t removals_lost = 0;  // of which BlockRemoved / AllBlocksCleared
};

class batch_router {
 public:
  static constexpr size_t max_media_values = 16;
  static constexpr size_t max_warned_ids = 1024;

  explicit batch_router(router_options opts = {});

  /// One payload from ingress (BR1-BR8); `replayed`: it came from a replay.
  void on_batch(const char* data, size_t size, router_output& out, bool replayed = false);
  /// BR2: events we will never see may have evicted what was reported (history lost), or the
  /// engine restarted (incarnation reset): either clears.
  void on_history_lost(router_output& out);
  void on_incarnation_reset(router_output& out);
  /// The engine sleeps (the scraper saw it): its KV cache is discarded, clear as BR2 says.
  void on_engine_asleep(router_output& out);
  /// A LoRA id → name mapping added at runtime (admin): that id indexes from now on.
  void add_adapter(int64_t id, std::string name);

  /// Durable index: the router's part of a snapshot (epoch, adapter map, learnt
  /// groups; the partitions' names come with the shard's images), and the reverse. import_state
  /// takes the partitions in the images' order as ids 0..n-1 (the shard imports them the same
  /// way), and adds the adapters the configuration does not name (runtime-added ones); the epoch
  /// stays this data path's (1), like its debouncer's.
  void export_state(snapshot::pipeline_snapshot& out) const;
  void import_state(const snapshot::pipeline_snapshot& in);

  uint64_t epoch() const noexcept { return epoch_; }
  size_t partitions() const noexcept { return partition_ids_.size(); }
  size_t groups_learned() const noexcept { return groups_.learned(); }
  const router_stats& stats() const noexcept { return stats_; }
  const std::string& last_error() const noexcept { return last_error_; }

 private:
  void reset(router_output& out) const;
  void clear(router_output& out, int64_t ts_us, const char* reason);
  shard_work& work(double ts);
  void flush(router_output& out);
  bool resolve(const block_stored& ev, router_output& out, uint32_t& partition);
  bool admit_medium(const medium_info& m, router_output& out);
  void note_faults(size_t after_clear, router_output& out);

  router_options opts_;
  wire_decoder decoder_;
  group_filter groups_;
  kv_event_batch batch_;
  uint64_t epoch_ = 1;
  bool told_first_ = false;
  std::shared_ptr<shard_work> current_;  // the work being built
  bool replayed_ = false;                 // the payload being routed came from a replay (BR8)
  absl::flat_hash_map<std::string, uint32_t> partition_ids_;
  absl::flat_hash_set<int64_t> warned_ids_;
  bool warned_limit_ = false;
  uint64_t lost_epoch_ = 0;  // BR7: the epoch removal_lost was last said in (0: never)
  router_stats stats_;
  std::string last_error_;
};

}  // namespace kvrelay
