#pragma once
// The debouncer: coalesces shard ops to their final state per (adapter, fingerprint), flushes on
// the window, at 4096 pending adds, before evictions and at shutdown, and hands ordered units to
// the emitter under a credit window. It owns the "server was away" logic: failed units mark the
// server unhealthy, and the way back is ALL_CLEARED + a re-report of everything resident, so
// nothing the engine did during the outage is lost and nothing stale survives.

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "actors/shard/holder_set.hpp"

#include "messages/actors.hpp"
#include "messages/pipeline_context.hpp"

namespace caf {
class actor_system;
}

namespace kvrelay {


/// Data-parallel ranks reported as ONE replica (dp_mode = merged): which ranks hold each
/// (adapter, fingerprint). Shared by the ranks' debouncers (a thread-safe service object, not
/// actor state): an eviction reaches the server only when no rank holds the prefix any more.
class merged_holders {
 public:
  bool add(const std::string& adapter, uint64_t fp, unsigned rank) {
    std::lock_guard<std::mutex> lk(mu_);
    return set_.add(adapter, fp, rank);
  }
  bool remove(const std::string& adapter, uint64_t fp, unsigned rank) {
    std::lock_guard<std::mutex> lk(mu_);
    return set_.remove(adapter, fp, rank);
  }
  template <class F>
  size_t clear_rank(unsigned rank, F&& released) {
    std::lock_guard<std::mutex> lk(mu_);
    return set_.clear_rank(rank, released);
  }

 private:
  std::mutex mu_;
  holder_set set_;
};

struct debouncer_options {
  std::chrono::milliseconds window{100};       // R04: ≤ 0 is clamped to 100 ms by config
  size_t flush_threshold = 4096;               // pending adds that force a flush (R13)
  bool l2_mode = false;                        // --ignore-block-removed
  size_t max_pending = 2'000'000;              // distinct keys held during an outage
  size_t max_units_in_flight = 2;              // credits toward the emitter
  std::chrono::milliseconds refresh_interval{10 * 60 * 1000};  // 0 = never
  std::chrono::milliseconds resync_backoff_max{30'000};
  /// ALL_CLEARED before anything else. On by default: a (re)started data path has an empty
  /// reverse map, so whatever an earlier run reported for this replica could never be evicted
  /// by us any more; with a replay endpoint the catch-up rebuilds it right away.
  bool start_with_clear = true;
  /// Merged DP mode: this pipeline's rank and the replica's shared holder table. A rank's clear
  /// then evicts only what no other rank holds (ALL_CLEARED would wipe every rank), and a resync
  /// re-reports without clearing.
  std::optional<unsigned> merged_rank;
  std::shared_ptr<merged_holders> holders;
};

/// Tells `ctx.health` when the server's answer to units changes (acknowledged / failed).
debouncer_actor spawn_debouncer(caf::actor_system& sys, const pipeline_context& ctx,
                                const debouncer_options& opts, emitter_actor emitter);

}  // namespace kvrelay
