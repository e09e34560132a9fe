// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// One memory budget for the whole process: what kvrelay may hold in work not yet
// folded into the debouncer's pending set, and the bounds derived from it. No CAF, no sockets.
//
// The path: the ingress charges each received batch (queue `ingress`); the decoder charges each
// unit of decoded work it sends the shard (`shard`); the shard charges each ops message it sends
// the debouncer (`debouncer`). A charge is a budget_ticket, move-only, carried inside the message
// it pays for: it is released when the message is destroyed, i.e. when its receiver is done with
// it (the debouncer has folded the ops into pending) or the message is dropped anywhere on the
// way (an actor's mailbox closed, a raced clear). Nothing has to remember to release.
//
// Admission is the ingress' job (budget_gate below): it stops reading while the budget is spent,
// so ZMQ's own bounded queue (rcvhwm, derived here) fills and the engine's PUB drops -- a
// sequence gap, repaired by replay where the ring still holds it, else declared as lost history.
//
// The gate, per reading thread (MG1-MG7, tested directly in tests/memory/memory_budget_test.cpp):
//  MG1. Not paused: reading goes on while the used bytes and messages are below their limits.
//  MG2. A read that finds either at or over its limit pauses reading: one overload is counted and
//       the pause's start is noted.
//  MG3. Paused: reading resumes only once both have fallen to the low-water mark (half the
//       limits), so a budget at its edge does not flap between reading and not.
//  MG4. The paused time is the sum of the pauses, the current one included up to `now`.
//  MG6. A hold (a debouncer whose pending evictions reached their bound, so that nothing more may
//       come until its server took some) counts as a full queue: used_bytes() reports the limit
//       on top of what is charged while any hold is on, so the readers pause (MG2) and resume
//       only once every hold is off and the queues drained to half (MG3).
//  MG7. Measured pressure: where the process has a memory limit (the cgroup's, set_process_limit),
//       the readers sample what the OOM killer counts (note_rss, at most every 5 ms): the
//       cgroup's working set, its usage less its inactive file pages (reclaimed before anything
//       is killed: the state dir's written pages, libraries not in use), or without the cgroup's
//       files the process' resident memory. While it is at or past the pressure line (the limit
//       less a sixteenth) *and* the queues hold
//       something, used_bytes() reports the limit on top, as a hold does (MG6): reading pauses
//       until the queues drained. The charges count the payloads kvrelay knows of; what queued
//       work really costs (allocator slack, envelopes, a walk's gRPC buffers) is measured here,
//       so a burst the charges undercount ends in a pause, never in the OOM killer. With the
//       queues empty the pressure does not count: whatever holds the memory then is not work in
//       flight, and a reader that waited on it would stall the engine's stream for nothing.
//  MG5. A spike -- either at a quarter of its limit or more, an overload (MG2) included -- makes
//       one heap trim due; while it is due the reader keeps observing when idle (`trim_due`).
//       The first observation at which both have stayed at or below an eighth of the limits
//       (the queues drained) at every observation for 200 ms, and at least a second after the
//       last trim, asks for it (`trim`). Without the spike rule a burst that never reached the
//       limits (no cgroup: the 512 MiB default) kept its whole peak resident: 168 MiB after a
//       1 M-block burst, 36 MiB once trimmed. Without the quiet period a trim came whenever a
//       blast's queues drained for a moment, and the next batches faulted the pages in again
//       (a 1 M-block blast cost 6 % more CPU than with no trim at all).
//
// The index is inside the budget too (IB1-IB4): the shards' tables are not a queue (nothing
// drains them), so they are not gated; past their share, new blocks are refused instead.
//  IB1. Every pipeline's index charges its exact bytes (its tables' arrays and cap queues) to
//       the budget after each change of its size (index_charge), all pipelines together.
//  IB2. The index share is 3/4 of the budget (MD5): the rest is for work in flight, which holds
//       about four times what it is charged (MD1 keeps at least budget/40 for the queues), and
//       the pending set; a 128 MiB sidecar (96 MiB budget) holds 72 MiB of index.
//  IB3. Room for a block the index does not hold yet (index_room): under 7/8 of the share any
//       tier; under 15/16 none at T3; under the share T1 only; at it none. A block already held
//       is always updated. What is refused is never reported, so the server never holds an
//       entry kvrelay could not evict; the blocks after a refused one in the same chain are
//       refused with it (their descendants would have an unknown parent anyway).
//  IB4. A refusal makes the index incomplete (said once per episode: a gauge, a /readyz reason,
//       a log line) until the engine's cache is known again (a clear, a new incarnation).
//
// Sizing (resolve_budget, MS1-MS4; derive_bounds, MD1-MD5) is pure too: it reads the texts of
// /proc/self/cgroup and the limit files through a callback.

#include <atomic>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kvrelay {

enum class budget_queue : uint8_t { ingress, shard, debouncer };
constexpr size_t budget_queue_count = 3;
const char* to_string(budget_queue q) noexcept;

/// Where the budget came from (the `source` label of kvrelay_memory_budget_bytes).
enum class budget_source : uint8_t { config, cgroup_v1, cgroup_v2, fallback };
const char* to_string(budget_source s) noexcept;  // fallback → "default"

class memory_budget;

/// One message's charge; released on destruction or release(). Empty when default-made or
/// moved from, and when no budget is configured (tests, tools). The charge moves, never copies:
/// a copy of a message (a bench's template, a test's fixture) is not in its original's queue, so
/// copying a ticket makes an empty one, and copying over a ticket releases its charge.
class budget_ticket {
 public:
  budget_ticket() noexcept = default;
  budget_ticket(budget_ticket&& o) noexcept { *this = std::move(o); }
  budget_ticket& operator=(budget_ticket&& o) noexcept;
  budget_ticket(const budget_ticket&) noexcept {}
  budget_ticket& operator=(const budget_ticket& o) noexcept {
    if (this != &o) release();
    return *this;
  }
  ~budget_ticket() { release(); }

  void release() noexcept;
  uint64_t bytes() const noexcept { return bytes_; }
  bool empty() const noexcept { return budget_ == nullptr; }

 private:
  friend class memory_budget;
  std::shared_ptr<memory_budget> budget_;
  uint64_t bytes_ = 0;
  budget_queue queue_ = budget_queue::ingress;
};

/// The process' budget: lock-free counters per queue. Shared (shared_ptr) by every pipeline.
class memory_budget : public std::enable_shared_from_this<memory_budget> {
 public:
  /// `limit_bytes` is the queue credit (what the queues may hold in all); messages are limited
  /// to one per `bytes_per_message` of it (at least 64).
  static std::shared_ptr<memory_budget> make(uint64_t total_bytes, budget_source source);

  /// Charges `bytes` (plus a fixed per-message overhead) to `q`; always succeeds: the gate, not
  /// the charge, keeps the total near the limit.
  budget_ticket charge(budget_queue q, uint64_t bytes);

  uint64_t bytes(budget_queue q) const noexcept;
  uint64_t messages(budget_queue q) const noexcept;
  /// What the queues hold, plus the limit while a hold is on (MG6) or, with the queues not
  /// empty, while the process is at its pressure line (MG7).
  uint64_t used_bytes() const noexcept;
  /// MG6: a debouncer holds the readers, then lets go (each hold() once, then one unhold()).
  void hold() noexcept { holds_.fetch_add(1, std::memory_order_relaxed); }
  void unhold() noexcept { holds_.fetch_sub(1, std::memory_order_relaxed); }
  uint32_t holds() const noexcept { return holds_.load(std::memory_order_relaxed); }
  /// MG7: the limit the process' memory must stay under (0: none known, no sampling), and the
  /// cgroup directory it is the limit of (empty: the process' own resident memory is sampled).
  void set_process_limit(uint64_t bytes, const std::string& cgroup_dir = "",
                         bool v2 = false) noexcept;
  uint64_t process_limit() const noexcept {
    return process_limit_.load(std::memory_order_relaxed);
  }
  /// MG7: the pressure line: the limit less a sixteenth.
  uint64_t pressure_line() const noexcept { return process_limit() - process_limit() / 16; }
  /// MG7: the process' resident bytes, as last sampled.
  void note_rss(uint64_t bytes) noexcept { rss_.store(bytes, std::memory_order_relaxed); }
  uint64_t rss() const noexcept { return rss_.load(std::memory_order_relaxed); }
  /// MG7: at or past the pressure line (never without a limit).
  bool pressed() const noexcept { return process_limit() > 0 && rss() >= pressure_line(); }
  /// MG7: samples the memory (the cgroup's working set, else /proc/self/statm's resident) when a
  /// limit is set and the last sample is 5 ms old or more (any thread; one wins an instant).
  void sample_rss(uint64_t now_ns) noexcept;
  uint64_t pressure_pauses() const noexcept {
    return pressure_pauses_.load(std::memory_order_relaxed);
  }
  void note_pressure_pause() noexcept { pressure_pauses_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t used_messages() const noexcept;

  uint64_t total_bytes() const noexcept { return total_; }  // the whole budget
  /// MD1: the queues' share now: what the index leaves of the budget, a fifth of it (queued work
  /// holds about four times what it is charged), between budget/40 and budget/6.
  uint64_t limit_bytes() const noexcept;
  uint64_t limit_messages() const noexcept;
  budget_source source() const noexcept { return source_; }

  /// IB1: the indexes' bytes, all pipelines; IB2: their share.
  uint64_t index_bytes() const noexcept { return index_bytes_.load(std::memory_order_relaxed); }
  uint64_t index_limit_bytes() const noexcept { return index_limit_; }
  /// IB3: may the index take a block it does not hold yet, at tier `t` (1, 2 or 3)?
  bool index_room(unsigned t) const noexcept;

  // Process-wide overload accounting, fed by every pipeline's gate.
  void note_pause() noexcept;
  void note_resume(uint64_t paused_ns) noexcept;
  uint64_t overloads() const noexcept { return overloads_.load(std::memory_order_relaxed); }
  uint64_t paused_ns() const noexcept { return paused_ns_.load(std::memory_order_relaxed); }
  /// Readers paused by the budget right now.
  uint32_t paused_readers() const noexcept { return paused_.load(std::memory_order_relaxed); }

  /// The fixed cost a message has beyond its payload (its shared_ptr block, the CAF envelope).
  static constexpr uint64_t message_overhead = 256;

  memory_budget(uint64_t total, budget_source source);  // use make()
  ~memory_budget();
  memory_budget(const memory_budget&) = delete;
  memory_budget& operator=(const memory_budget&) = delete;

 private:
  friend class budget_ticket;
  friend class standing_charge;
  void release(budget_queue q, uint64_t bytes) noexcept;

  uint64_t total_;
  uint64_t limit_bytes_;
  uint64_t limit_messages_;
  uint64_t index_limit_;
  budget_source source_;
  std::atomic<uint64_t> index_bytes_{0};
  std::atomic<uint32_t> holds_{0};
  std::atomic<uint64_t> process_limit_{0};
  int usage_fd_ = -1;  // MG7: the cgroup's usage and stat files, opened once
  int stat_fd_ = -1;
  bool cgroup_v2_ = false;
  std::atomic<uint64_t> rss_{0};
  std::atomic<uint64_t> rss_sampled_ns_{0};
  std::atomic<uint64_t> pressure_pauses_{0};
  std::array<std::atomic<uint64_t>, budget_queue_count> bytes_{};
  std::array<std::atomic<uint64_t>, budget_queue_count> messages_{};
  std::atomic<uint64_t> overloads_{0};
  std::atomic<uint64_t> paused_ns_{0};
  std::atomic<uint32_t> paused_{0};
};

/// A charge held for as long as its owner lives, moved to the owner's current size by set():
/// an index's bytes (IB1), or a pending set's on the debouncer queue (what a message's ticket
/// is for work in flight). Released on destruction; empty (charges nothing) without a budget.
class standing_charge {
 public:
  enum class on : uint8_t { index, debouncer_queue };
  standing_charge() noexcept = default;
  standing_charge(std::shared_ptr<memory_budget> b, on what) noexcept
      : budget_(std::move(b)), what_(what) {}
  standing_charge(standing_charge&& o) noexcept { *this = std::move(o); }
  standing_charge& operator=(standing_charge&& o) noexcept;
  standing_charge(const standing_charge&) = delete;
  standing_charge& operator=(const standing_charge&) = delete;
  ~standing_charge() { set(0); }

  void set(uint64_t bytes) noexcept;
  uint64_t bytes() const noexcept { return bytes_; }

 private:
  std::shared_ptr<memory_budget> budget_;
  on what_ = on::index;
  uint64_t bytes_ = 0;
};

// -- the gate (MG1-MG7) -------------------------------------------------------------------------

struct gate_decision {
  bool read = true;      // the reader may take messages now
  bool paused = false;   // MG2: this observation started a pause
  bool resumed = false;  // MG3: this observation ended one
  bool trim = false;     // MG5: give the freed heap back now
  bool trim_due = false; // MG5: a trim is due: observe again even with nothing to read
  bool after_overload = false;  // with trim: the spike that made it due was an overload
};

class budget_gate {
 public:
  /// One observation of the budget's use at `now_ns` (any monotonic clock).
  gate_decision observe(uint64_t used_bytes, uint64_t used_messages, uint64_t limit_bytes,
                        uint64_t limit_messages, uint64_t now_ns) noexcept;
  bool paused() const noexcept { return paused_; }
  uint64_t overloads() const noexcept { return overloads_; }
  /// MG4: the pauses' total, the current one up to `now_ns`.
  uint64_t paused_ns(uint64_t now_ns) const noexcept;

 private:
  bool paused_ = false;
  bool trim_due_ = false;
  bool overload_since_trim_ = false;
  std::optional<uint64_t> last_trim_ns_;
  std::optional<uint64_t> drained_since_ns_;  // MG5: every observation since has been drained
  uint64_t overloads_ = 0;
  uint64_t paused_since_ = 0;
  uint64_t paused_total_ = 0;
};

// -- sizing (MS1-MS4, MD1-MD4) ----------------------------------------------------------------------

/// Reads a file's text; nullopt when it cannot be read.
using read_text_fn = std::function<std::optional<std::string>(const std::string& path)>;

struct budget_choice {
  uint64_t bytes = 0;
  budget_source source = budget_source::fallback;
  uint64_t cgroup_limit = 0;  // the cgroup's limit when one was found (0: none)
  std::string cgroup_file;    // the limit file read
};

/// A limit at or above this is "no limit" (v1 writes 2^63 rounded down to a page).
constexpr uint64_t cgroup_unlimited = uint64_t{1} << 62;
/// Without a configured value or a cgroup limit.
constexpr uint64_t default_budget_bytes = uint64_t{512} << 20;

///  MS1. A configured value (> 0) wins: source config.
///  MS2. Else a v1 memory cgroup ("N:memory:<path>" or "N:...,memory,...:<path>" in
///       /proc/self/cgroup): <root>/memory/<path>/memory.limit_in_bytes, then the same with the
///       path's leading components dropped one by one, down to <root>/memory/ itself (a
///       container sees the host's path but its own cgroup at the root). The first limit wins.
///  MS3. Else, on a host with no v1 memory controller, the v2 cgroup (the "0::<path>" line):
///       <root>/<path>/memory.max the same way; "max" = no limit.
///  MS4. A limit found: the budget is the limit less what the process holds beyond it (its
///       threads, libraries, gRPC and CAF: ~25 MiB idle), a quarter of the limit and at least
///       24 MiB; never under 8 MiB. None, or an unlimited one: default_budget_bytes (source
///       default).
/// MG7: a cgroup's working set from the texts of its usage file (memory.usage_in_bytes, v2
/// memory.current) and memory.stat: usage less inactive_file (v1: total_inactive_file, the
/// hierarchy's, as usage is). Nothing when the usage does not parse.
std::optional<uint64_t> working_set(std::string_view usage, std::string_view stat, bool v2);

budget_choice resolve_budget(uint64_t configured, const read_text_fn& read,
                             const std::string& cgroup_root = "/sys/fs/cgroup");

struct budget_bounds {
  uint64_t queue_bytes = 0;     // MD1: the queues' credit at most: a sixth of the budget
  uint64_t queue_messages = 0;  // MD1: one message per 1 KiB of it, at least 64
  int rcvhwm = 0;               // MD2: ZMQ's receive queue per pipeline, in messages
  size_t max_pending = 0;       // MD3: the debouncer's pending keys per pipeline
  uint64_t index_bytes = 0;     // MD5: the indexes' share (IB2), all pipelines
};
///  MD1. Queues: at most budget/6 bytes, max(64, that/1024) messages; while the index holds
///       I bytes, (budget - I)/5, never under budget/40 (memory_budget::limit_bytes): the index is
///       what lasts, queued work only a throughput buffer.
///  MD2. rcvhwm: (budget/16)/pipelines at 32 KiB a batch, within [64, 100000]. ZMQ counts
///       messages, not bytes, so the size is a fat batch's (~250 blocks), not a typical one's:
///       at 4 KiB a queue of 32 KB batches held 8x its share, uncharged, and the 128 MiB cgroup
///       bench was OOM-killed in an overrun (bench/HISTORY.md, the memory budget runs).
///  MD3. Pending: (budget/4)/pipelines at 128 bytes a key, within [16384, 2000000].
///  MD4. `pipelines` 0 counts as 1.
///  MD5. The indexes: 3/4 of the budget (IB2).
budget_bounds derive_bounds(uint64_t budget_bytes, size_t pipelines);

/// "96 MiB (cgroup-v1: limit 128 MiB less a margin)": for --check and the log.
std::string describe(const budget_choice& c);

}  // namespace kvrelay
