// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Per-publisher sequence state machine of the ingress (DESIGN.md "Sequence numbers", "Cold start
// catch-up"; shared/spec/engine-wire.md §1 replay protocol and §5 gaps). Pure logic: no ZMQ, no
// CAF, no clock. The ZMQ thread feeds it what arrived and executes the actions it returns.
//
// Rules, in the order they are checked for a live batch `s`:
//  1. Incarnation reset: `s <= last live seq`. PUB/SUB never re-sends and never reorders, so a
//     live sequence that does not increase can only come from a new publisher (engine restart,
//     usually back to 0). The buffer is discarded (the pipeline clears anyway), an outstanding
//     replay is cancelled, and the new incarnation starts cold (see 5).
//  2. While a replay is outstanding, live batches go to a bounded reorder buffer.
//  3. `s < next expected` (or already buffered): duplicate, dropped and counted. Replay replies
//     that overlap what was delivered live are the usual source.
//  4. `s > next expected`: a gap. With a replay endpoint, request replay from the first missing
//     seq and buffer; without one, report the loss (`history_lost`, reason no_replay_endpoint)
//     and go on from `s`. That is the explicit policy: the consumer must clear, because a missed
//     BlockRemoved would otherwise leave a hint that can never be evicted.
//  5. Cold: until the first batch of an incarnation is delivered we hold no state built from its
//     history, so missing history is not a loss (counted as cold_skipped, no action). With a
//     replay endpoint the tracker starts by asking for everything from seq 0; the executor calls
//     start() only once its live socket has an engine peer, so the request is not answered from
//     a ring snapshot taken before the subscription could exist.
//  6. Unconfirmed tail: until the first live batch arrives, nothing proves that the subscription
//     is in effect. A PUB drops what it sends before it has processed the subscription, and an
//     engine sends no heartbeat, so batches published after the ring was read and before the
//     subscription took effect would be missing, silently, for as long as the engine is quiet.
//     Hence a replay END with no live batch seen yet does not end the catch-up: the tracker asks
//     again from the next expected seq (`schedule_probe` k = 1..tail_probes; the executor waits
//     before each, doubling, then calls on_probe_due()), until a live batch arrives or the probes
//     run out. A live batch ends the probing; a hole below it is the late subscription's, not a
//     gap: it is repaired by replay like one but not counted as a gap (rule 4 counts the rest).
//  7. History: right before the first delivery of an incarnation the tracker says which seq it
//     starts from (`first_batch`): from 0, it holds the engine process' whole history; from
//     anything later, the history before it is gone (cold_skipped) and whatever the engine cached
//     in it is unknown to the index. A later history_lost has the same consequence after the
//     consumer's clear.
//
// Delivery is strictly in seq order without duplicates. Replay replies and buffered live batches
// are merged: whatever is contiguous with the last delivered seq is delivered at once, so memory
// holds only what sits above a hole. A hole is declared lost (`history_lost`) as soon as the
// replay has moved past it (replies come in seq order from the engine's ring, so a reply later
// than asked means the ring no longer has the start), at END for holes the ring must have had,
// when the replay is given up after `max_replay_attempts` timeouts, or on buffer overflow.
// Holes above everything the replay could have known about (live batches lost after the ring was
// read) trigger a follow-up replay after END.
//
// Payload: any movable type whose size in bytes is `payload_bytes(p)`: `p.size()` by default, or
// an overload found by argument-dependent lookup (the ZMQ source's shared raw_batch). The tracker
// never inspects the bytes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace kvrelay::ingress {

/// Size in bytes of a payload with size(); other payload types overload it in their namespace.
template <class P>
auto payload_bytes(const P& p) -> decltype(static_cast<size_t>(p.size())) {
  return static_cast<size_t>(p.size());
}

/// Why a range of sequence numbers will never be delivered.
enum class loss_reason : uint8_t {
  no_replay_endpoint,  // a gap and nothing to ask
  history_lost,        // the engine's replay ring no longer holds the range
  replay_failed,       // the replay timed out max_replay_attempts times in a row
  buffer_overflow,     // live batches outgrew the reorder buffer while the replay was slow
};
const char* to_string(loss_reason r) noexcept;

enum class action_kind : uint8_t {
  deliver,            // seq, payload, replayed
  gap_detected,       // seq = first missing, seq2 = live seq that revealed it (informational)
  request_replay,     // seq = start seq; the executor opens a fresh DEALER and sends it
  cancel_replay,      // drop the outstanding replay (close its DEALER; late replies are stray)
  history_lost,       // [seq, seq2) will never be delivered; reason; the consumer must clear
  incarnation_reset,  // seq = new live seq, seq2 = previous last live seq; consumer must clear
  schedule_probe,     // rule 6: call on_probe_due() after probe number seq2's delay (seq: from)
  first_batch,        // rule 7: the incarnation's first delivery follows; seq = its seq
};
const char* to_string(action_kind k) noexcept;

struct tracker_options {
  bool replay_enabled = false;     // a replay endpoint is configured
  bool cold_start_replay = true;   // with replay: ask for everything (from 0) at start
  size_t max_buffered_batches = 4096;
  size_t max_buffered_bytes = size_t{64} << 20;
  uint32_t max_replay_attempts = 3;  // consecutive timeouts without progress before giving up
  uint32_t tail_probes = 8;        // rule 6: re-asks after an END while no live batch was seen
};

/// Monotonic counters (plus two gauges) for /metrics.
struct tracker_counters {
  uint64_t batches = 0;            // delivered
  uint64_t batches_recovered = 0;  // delivered that came from a replay
  uint64_t gaps = 0;               // live seq beyond the next expected one
  uint64_t replays_requested = 0;  // request_replay actions, retries, probes and cold start included
  uint64_t replays_succeeded = 0;  // END received for an outstanding replay
  uint64_t replays_failed = 0;     // timeouts
  uint64_t duplicates = 0;
  uint64_t resets = 0;             // incarnation resets
  uint64_t history_lost = 0;       // history_lost actions
  uint64_t batches_lost = 0;       // seqs covered by them
  uint64_t cold_skipped = 0;       // seqs before the first delivery that were never available
  uint64_t buffer_overflows = 0;
  uint64_t stray_replies = 0;      // replies or END with no replay outstanding
  uint64_t discarded_on_reset = 0; // buffered batches of the old incarnation thrown away
  uint64_t tail_probes = 0;        // rule 6 re-asks sent
  uint64_t tail_recovered = 0;     // batches only a rule 6 re-ask (or the late-join repair) found
  uint64_t buffered = 0;           // gauge: batches in the reorder buffer now
  uint64_t buffered_bytes = 0;     // gauge
};

template <class Payload>
struct tracker_action {
  action_kind kind = action_kind::deliver;
  uint64_t seq = 0;
  uint64_t seq2 = 0;
  loss_reason reason = loss_reason::history_lost;
  bool replayed = false;
  Payload payload{};
};

template <class Payload>
class sequence_tracker {
 public:
  using action = tracker_action<Payload>;
  using actions = std::vector<action>;

  explicit sequence_tracker(tracker_options opts = {}) : opts_(opts) {
    if (opts_.max_replay_attempts == 0) opts_.max_replay_attempts = 1;
    if (opts_.max_buffered_batches == 0) opts_.max_buffered_batches = 1;
  }

  /// Call once, when the live socket first has an engine peer: the cold-start replay request, if
  /// configured (rule 5).
  void start(actions& out) {
    if (started_) return;
    started_ = true;
    if (opts_.replay_enabled && opts_.cold_start_replay) begin_replay(0, out);
  }

  /// A live batch. Precondition: seq != UINT64_MAX (the END marker; the source rejects it).
  void on_live(uint64_t seq, Payload p, actions& out) {
    if (!started_) start(out);  // a live batch proves the peer, whatever the executor saw first
    if (last_live_ && seq <= *last_live_) return reset_incarnation(seq, std::move(p), out);
    // Caught up from the replay ring alone, so no live watermark yet: a first live seq below
    // what replay delivered is a late duplicate only when it is close behind; seq 0 or one far
    // below means a new engine process whose counter restarted.
    if (!last_live_ && have_next_ && seq < next_ &&
        (seq == 0 || next_ - seq > late_duplicate_window))
      return reset_incarnation(seq, std::move(p), out);
    last_live_ = seq;
    const bool late_join = probing_;  // rule 6: this batch confirms the subscription
    probing_ = false;
    if (replaying_) {
      if (in_probe_ && buffer_.empty() && have_next_ && seq == next_) {
        // The probe asks for what this batch now proves is not missing: deliver, do not wait.
        replaying_ = false;
        in_probe_ = false;
        emit(out, action_kind::cancel_replay, seq);
        deliver(seq, std::move(p), false, out);
        return;
      }
      insert(seq, std::move(p), false, out);
      return;
    }
    if (!have_next_) {
      // The first batch sets the baseline (rule 5): what came before it is history we lack.
      have_next_ = true;
      next_ = seq;
      if (cold_) c_.cold_skipped += seq;
    }
    if (seq < next_) {
      ++c_.duplicates;
      return;
    }
    if (seq > next_) {
      if (late_join) {
        // The subscription took effect after the replay read the ring: the hole is in the ring.
        late_join_from_ = next_;
        store(seq, std::move(p), false);
        begin_replay(next_, out);
        return;
      }
      ++c_.gaps;
      emit(out, action_kind::gap_detected, next_, seq);
      if (opts_.replay_enabled) {
        const uint64_t from = next_;
        store(seq, std::move(p), false);
        begin_replay(from, out);
        return;
      }
      declare_lost(seq, loss_reason::no_replay_endpoint, out);
    }
    deliver(seq, std::move(p), false, out);
  }

  /// One replayed batch (2- or 3-frame reply, END excluded).
  void on_replay(uint64_t seq, Payload p, actions& out) {
    if (!replaying_) {
      ++c_.stray_replies;
      return;
    }
    if (seq >= cursor_) {
      // Progress: an interrupted replay resumes with a full set of attempts.
      cursor_ = seq + 1;
      attempts_ = 0;
    }
    insert(seq, std::move(p), true, out);
  }

  /// The END marker of the outstanding replay.
  void on_replay_end(actions& out) {
    if (!replaying_) {
      ++c_.stray_replies;
      return;
    }
    ++c_.replays_succeeded;
    replaying_ = false;
    if (!have_next_) {
      // Cold start and nothing replayed at all: the ring is empty, so the engine has published
      // nothing we could ask for; expect its first batch (0) or repair what the SUB missed.
      have_next_ = true;
      next_ = cursor_;
      // Live batches buffered during the replay whose ring copies were dropped as duplicates
      // sit below the cursor: start from them, or they would never be delivered.
      if (!buffer_.empty()) next_ = std::min(next_, buffer_.begin()->first);
    }
    // Everything the ring held when it served us is below the last reply; and every live seq we
    // had seen before asking was published before, so the ring had it then too.
    uint64_t lost_below = cursor_;
    if (live_high_at_request_) lost_below = std::max(lost_below, *live_high_at_request_ + 1);
    drain(lost_below, loss_reason::history_lost, out);
    late_join_from_.reset();
    // Live batches lost after the ring was read sit above a hole nobody asked for yet.
    if (!buffer_.empty()) {
      begin_replay(next_, out);
      return;
    }
    // Rule 6: no live batch yet, so the ring may have more than it had when it was read.
    if (!last_live_ && probes_sent_ < opts_.tail_probes) {
      probing_ = true;
      emit(out, action_kind::schedule_probe, next_, probes_sent_ + 1);
    } else {
      probing_ = false;
    }
  }

  /// A schedule_probe's delay elapsed: ask again, unless a live batch arrived in the meantime.
  void on_probe_due(actions& out) {
    if (!probing_ || replaying_ || last_live_) return;
    ++probes_sent_;
    ++c_.tail_probes;
    in_probe_ = true;
    begin_replay(next_, out);
  }

  /// The outstanding replay saw no reply within the executor's inactivity timeout.
  void on_replay_timeout(actions& out) {
    if (!replaying_) return;
    ++c_.replays_failed;
    if (++attempts_ < opts_.max_replay_attempts) {
      // Resume from what is still missing; the executor uses a fresh DEALER, so no late reply of
      // the abandoned request can end this one early.
      ++c_.replays_requested;
      requested_from_ = have_next_ ? next_ : requested_from_;
      cursor_ = 0;
      live_high_at_request_ = last_live_;
      emit(out, action_kind::request_replay, requested_from_);
      return;
    }
    give_up(loss_reason::replay_failed, out);
  }

  bool replay_outstanding() const noexcept { return replaying_; }
  /// Rule 6 is waiting for a probe's delay (no live batch seen, probes left).
  bool probing() const noexcept { return probing_ && !replaying_; }
  /// A live batch has arrived since start: the subscription is known to be in effect.
  bool live_confirmed() const noexcept { return last_live_.has_value(); }
  /// The next seq the tracker will deliver, once known.
  std::optional<uint64_t> next_expected() const noexcept {
    return have_next_ ? std::optional<uint64_t>(next_) : std::nullopt;
  }
  const tracker_counters& counters() const noexcept { return c_; }

 private:
  struct entry {
    Payload payload;
    bool replayed;
  };
  static constexpr uint64_t no_bound = std::numeric_limits<uint64_t>::max();

  void emit(actions& out, action_kind k, uint64_t seq, uint64_t seq2 = 0,
            loss_reason r = loss_reason::history_lost) {
    action a;
    a.kind = k;
    a.seq = seq;
    a.seq2 = seq2;
    a.reason = r;
    out.push_back(std::move(a));
  }

  void deliver(uint64_t seq, Payload p, bool replayed, actions& out) {
    if (cold_) emit(out, action_kind::first_batch, seq);
    action a;
    a.kind = action_kind::deliver;
    a.seq = seq;
    a.replayed = replayed;
    a.payload = std::move(p);
    out.push_back(std::move(a));
    ++c_.batches;
    if (replayed) ++c_.batches_recovered;
    if (replayed && (in_probe_ || (late_join_from_ && seq >= *late_join_from_)))
      ++c_.tail_recovered;
    next_ = seq + 1;
    have_next_ = true;
    cold_ = false;
  }

  // [next_, upto) will never arrive: say so (or not, while cold) and move past it.
  void declare_lost(uint64_t upto, loss_reason r, actions& out) {
    if (cold_) {
      c_.cold_skipped += upto - next_;
    } else {
      ++c_.history_lost;
      c_.batches_lost += upto - next_;
      emit(out, action_kind::history_lost, next_, upto, r);
    }
    next_ = upto;
  }

  void begin_replay(uint64_t from, actions& out) {
    replaying_ = true;
    requested_from_ = from;
    cursor_ = 0;
    attempts_ = 0;
    live_high_at_request_ = last_live_;
    ++c_.replays_requested;
    emit(out, action_kind::request_replay, from);
  }

  void give_up(loss_reason r, actions& out) {
    replaying_ = false;
    probing_ = false;
    in_probe_ = false;
    late_join_from_.reset();
    emit(out, action_kind::cancel_replay, next_);
    drain(no_bound, r, out);
  }

  void store(uint64_t seq, Payload p, bool replayed) {
    c_.buffered_bytes += payload_bytes(p);
    buffer_.emplace(seq, entry{std::move(p), replayed});
    c_.buffered = buffer_.size();
  }

  void insert(uint64_t seq, Payload p, bool replayed, actions& out) {
    if ((have_next_ && seq < next_) || buffer_.count(seq) != 0) {
      ++c_.duplicates;
      return;
    }
    const bool full = buffer_.size() >= opts_.max_buffered_batches ||
                      c_.buffered_bytes + payload_bytes(p) > opts_.max_buffered_bytes;
    store(seq, std::move(p), replayed);
    if (full) {
      ++c_.buffer_overflows;
      give_up(loss_reason::buffer_overflow, out);
      return;
    }
    drain(cursor_, loss_reason::history_lost, out);
  }

  // Delivers the buffer front while it is contiguous; a hole below `lost_below` can no longer be
  // filled by the replay and is declared lost.
  void drain(uint64_t lost_below, loss_reason r, actions& out) {
    while (!buffer_.empty()) {
      auto it = buffer_.begin();
      const uint64_t seq = it->first;
      if (!have_next_) {
        if (seq >= lost_below) break;
        // Cold: the first thing the replay (or the give-up) lets through starts the stream.
        have_next_ = true;
        next_ = std::min(requested_from_, seq);
      }
      if (seq != next_) {
        if (next_ >= lost_below) break;
        declare_lost(seq, r, out);
      }
      entry e = std::move(it->second);
      c_.buffered_bytes -= payload_bytes(e.payload);
      buffer_.erase(it);
      deliver(seq, std::move(e.payload), e.replayed, out);
    }
    c_.buffered = buffer_.size();
    if (!replaying_) in_probe_ = false;
  }

  void reset_incarnation(uint64_t seq, Payload p, actions& out) {
    ++c_.resets;
    emit(out, action_kind::incarnation_reset, seq, last_live_ ? *last_live_ : next_);
    if (replaying_) {
      replaying_ = false;
      emit(out, action_kind::cancel_replay, seq);
    }
    c_.discarded_on_reset += buffer_.size();
    buffer_.clear();
    c_.buffered = 0;
    c_.buffered_bytes = 0;
    have_next_ = false;
    cold_ = true;
    probing_ = false;
    in_probe_ = false;
    late_join_from_.reset();
    last_live_ = seq;
    if (opts_.replay_enabled && seq > 0) {
      // The new engine's history before `seq` is in its ring: catch up as at cold start.
      store(seq, std::move(p), false);
      begin_replay(0, out);
      return;
    }
    if (seq > 0) c_.cold_skipped += seq;
    deliver(seq, std::move(p), false, out);
  }

  /// How far behind the replayed position a first live batch may be and still count as a late
  /// duplicate (the live socket and the replay socket are not ordered with each other).
  static constexpr uint64_t late_duplicate_window = 1024;

  tracker_options opts_;
  tracker_counters c_;
  bool started_ = false;
  bool have_next_ = false;
  uint64_t next_ = 0;
  bool cold_ = true;
  std::optional<uint64_t> last_live_;
  bool replaying_ = false;
  uint64_t requested_from_ = 0;
  uint64_t cursor_ = 0;  // 1 + highest reply seq of the outstanding request (0: none yet)
  uint32_t attempts_ = 0;
  std::optional<uint64_t> live_high_at_request_;
  bool probing_ = false;         // rule 6: waiting for a probe's delay
  bool in_probe_ = false;        // the outstanding replay is a rule 6 probe
  uint32_t probes_sent_ = 0;     // rule 6 probes of this process (never reset: bounded in total)
  std::optional<uint64_t> late_join_from_;  // rule 6 repair of a late subscription, from here
  std::map<uint64_t, entry> buffer_;
};

}  // namespace kvrelay::ingress
