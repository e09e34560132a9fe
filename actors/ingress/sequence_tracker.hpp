// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Per-publisher sequence state machine of the ingress (docs/spec/design-rules.md DR6, DR7; docs/spec/engine-wire.md §1 replay protocol and §5 gaps). Pure logic: no ZMQ, no
// CAF, no clock. The ZMQ thread feeds it what arrived and executes the actions it returns.
//
// What the engine's replay endpoint really does (vLLM `ZmqEventPublisher._service_replay`,
// vllm/distributed/kv_events.py at 0181ea3; SGLang's copy of it): on a request for `start` it sends
// every ring entry >= start, then an END marker, in one tight loop into a ROUTER socket with ZMQ's
// default send high-water mark (1000 messages per peer). A ROUTER drops what does not fit without
// a word, END included (sgl-project/sglang #38945 reproduces it: 1 024 retained batches, 2
// delivered, no END). So a reply may lose any part of itself after its first message, and only
// its first message is sure to arrive (the queue to a new requester starts empty).
//
// Rules (ST = sequence tracker), in the order they are checked for a live batch `s`:
//  ST1 Incarnation reset: `s <= last live seq`. PUB/SUB never re-sends and never reorders, so a
//      live sequence that does not increase can only come from a new publisher (engine restart,
//      usually back to 0). Caught up from the ring alone (no live watermark yet), a first live
//      seq below what was delivered is either the late live copy of a batch the ring already
//      gave (the live and replay sockets are not ordered with each other) or a new engine's:
//      seq alone cannot tell, the bytes can (a batch carries its engine's timestamp). It is a
//      late duplicate only when the ring delivered that very seq with the same bytes
//      (`payload_digest`; the last `late_duplicate_window` replayed deliveries are remembered
//      until the first live batch); anything else (below a resume point, say) is a new
//      incarnation. The buffer is discarded, an outstanding replay cancelled, and the new
//      incarnation starts cold (ST5).
//  ST2 Reorder buffer: while the ring is being read (phase `replaying`), live batches wait in a
//      bounded buffer; whatever is contiguous with the last delivered seq goes out at once, so
//      memory holds only what sits above a hole. Outgrowing the buffer sheds its newest live
//      batches, down to half its bounds (`batches_shed`): the engine's ring holds them as it
//      holds the hole below them, so the replay goes on, and once it has read past the buffer
//      what was shed is asked for like the rest of a reply (ST10). Only what the ring no longer
//      holds by then is lost (ST8). A catch-up that outruns the buffer (a full ring read at 0.2
//      core while the engine keeps publishing) is paced by the ring, not given up. A buffer of
//      replayed batches alone cannot shed: the replay is given up (buffer_overflow), the holes
//      below the buffer lost.
//  ST3 `s < next expected` (or already buffered): duplicate, dropped and counted. Replay replies
//      that overlap what was delivered live are the usual source.
//  ST4 `s > next expected`: a gap. With a replay endpoint, ask the ring from the first missing
//      seq and buffer; without one, report the loss (`history_lost`, reason no_replay_endpoint)
//      and go on from `s`. That is the explicit policy: the consumer must clear, because a missed
//      BlockRemoved would otherwise leave a hint that can never be evicted.
//  ST5 Cold: until the first batch of an incarnation is delivered we hold no state built from its
//      history, so missing history is not a loss (counted as cold_skipped, no action). With a
//      replay endpoint the tracker starts by asking for everything from seq 0; the executor calls
//      start() only once its live socket has an engine peer, so the request is not answered from
//      a ring read before the subscription could exist. With `resume` it starts warm instead: the
//      consumer already holds everything below the seq it names (a restored snapshot), so it asks
//      from there and what the ring no longer holds is a loss (ST8, reason resume_outside_ring:
//      the snapshot is discarded). Every live seq is above it (the engine had published up to it
//      before kvrelay stopped), so a first live seq below it is a new incarnation (ST1).
//  ST6 Unconfirmed tail: until the first live batch arrives, nothing proves that the subscription
//      is in effect. A PUB drops what it sends before it has processed the subscription, and an
//      engine sends no heartbeat, so batches published after the ring was read and before the
//      subscription took effect would be missing, silently, for as long as the engine is quiet.
//      Hence a finished replay with no live batch seen yet does not end the catch-up: the tracker
//      asks again from the next expected seq (`schedule_probe`, probes 1..tail_probes; the
//      executor waits before each, doubling, then calls on_probe_due()), until a live batch
//      arrives or the probes run out. A live batch ends the probing; a hole below it is the late
//      subscription's, not a gap: it is repaired by replay like one but not counted as a gap.
//  ST7 History: right before the first delivery of an incarnation the tracker says which seq it
//      starts from (`first_batch`): from 0, it holds the engine process' whole history; from
//      anything later, the history before it is gone (cold_skipped) and whatever the engine cached
//      in it is unknown to the index. A later history_lost has the same consequence after the
//      consumer's clear.
// And for the replay replies of the outstanding request (asked from `a`):
//  ST8 Where the ring starts: the first reply is the ring's oldest entry >= a. A first reply later
//      than `a` means the ring no longer holds [a, first reply): lost (cold: skipped). An END
//      with no reply at all means the ring holds nothing from `a` on: every seq up to the highest
//      live seq seen before asking (published before the request, so the ring had it) is lost.
//      This is the only way the ring declares history lost.
//  ST9 Dropped replies are no loss: a later reply that skips a seq the tracker still needs lost
//      the skipped ones in transit (the high-water mark). The request is abandoned at once (what
//      follows the hole would only wait in memory) and asked again from the first seq still
//      missing; the new request's first reply decides under ST8 (a hole in the ring itself — vLLM
//      consumes a seq on a failed send — is then declared lost).
//  ST10 Progress is not a failure: a reply that stops without its END (the executor's short stall
//      timeout after a reply), or whose END leaves a hole below the buffered live batches (END
//      got through, replies before it did not), is resumed from the first seq still missing, at
//      once, with the failure budget full. Only a request that gets no reply at all within the
//      executor's timeout is a failure; `max_replay_attempts` of them in a row give the replay up
//      (replay_failed) and the executor backs off between them.
//  ST11 Done: a reply that ended (END, or a stall) with nothing missing below the buffered live
//      batches completes the request. Live batches lost after the ring was read sit above a hole
//      nobody asked for yet: that is asked for next (ST4's repair).
// Pacing: one request at a time; every re-ask is a new request (the executor opens a fresh DEALER,
// so nothing of an abandoned reply can leak into the next one), and the executor opens it when its
// pacing allows (while the consumer is behind, the reply would only wait in memory). Each request
// then uses at most what one queue of the engine holds, so the engine's queue is never what ends
// a catch-up: it ends when the ring has been read up to the live stream.
//
// Delivery is strictly in seq order without duplicates. The tracker's phase is one value
// (`tracker_phase`); what is known of the position is `next_expected()`, and whether the
// consumer holds any of this incarnation's history is `history_from()` (unset: cold).
//
// Payload: any movable type whose size in bytes is `payload_bytes(p)` and whose content hashes to
// `payload_digest(p)` (ST1 only): `p.size()` and a hash of `p.data()` by default, or overloads
// found by argument-dependent lookup (the ZMQ source's shared raw_batch). The tracker never
// interprets the bytes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace kvrelay::ingress {

/// Size in bytes of a payload with size(); other payload types overload it in their namespace.
template <class P>
auto payload_bytes(const P& p) -> decltype(static_cast<size_t>(p.size())) {
  return static_cast<size_t>(p.size());
}

/// A hash of a payload's bytes (ST1 tells a late duplicate from a new engine's batch by it).
template <class P>
auto payload_digest(const P& p) -> decltype(static_cast<uint64_t>(p.size()), p.data(), uint64_t{}) {
  return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(p.data()), static_cast<size_t>(p.size())));
}

/// Why a range of sequence numbers will never be delivered.
enum class loss_reason : uint8_t {
  no_replay_endpoint,  // ST4: a gap and nothing to ask
  history_lost,        // ST8: the engine's replay ring no longer holds the range
  replay_failed,       // ST10: max_replay_attempts requests in a row got no reply at all
  buffer_overflow,     // ST2: live batches outgrew the reorder buffer while the ring was read
  resume_outside_ring, // ST5/ST8: the ring no longer reaches back to the resume point
};
const char* to_string(loss_reason r) noexcept;

/// Why a replay is asked for (the executor backs off before a `retry` only).
enum class replay_reason : uint8_t {
  catch_up,  // ST5: everything from 0 at start or for a new incarnation
  resume,    // ST5: from where a restored snapshot left off
  repair,    // ST4/ST11: a gap in the live stream (or ST6's late subscription)
  continue_, // ST9/ST10: the previous reply stopped short; ask for the rest at once
  retry,     // ST10: the previous request got no reply at all
  probe,     // ST6: the tail, while no live batch has been seen
};
const char* to_string(replay_reason r) noexcept;

enum class action_kind : uint8_t {
  deliver,            // seq, payload, replayed
  gap_detected,       // seq = first missing, seen = the live seq that revealed it (informational)
  request_replay,     // seq = start seq, why; the executor opens a fresh DEALER and sends it
  cancel_replay,      // drop the outstanding replay (close its DEALER; late replies are stray)
  history_lost,       // [seq, first_available) will never be delivered; reason; consumer clears
  incarnation_reset,  // seq = the new live seq, previous_seq; the consumer must clear
  schedule_probe,     // ST6: call on_probe_due() after probe number `probe`'s delay (seq: from)
  first_batch,        // ST7: the incarnation's first delivery follows; seq = its seq
};
const char* to_string(action_kind k) noexcept;

/// What the tracker is doing with the engine's ring (one value, never a set of flags).
enum class tracker_phase : uint8_t {
  unstarted,   // start()/resume() not called yet (ST5)
  streaming,   // delivering live batches; nothing asked of the ring
  replaying,   // a request is outstanding (replay_reason says why); live batches buffer (ST2)
  probe_wait,  // ST6: waiting for a tail probe's delay
};
const char* to_string(tracker_phase p) noexcept;

/// Where a restored consumer continues (ST5).
struct resume_point {
  uint64_t next = 0;          // the first seq the consumer does not hold
  uint64_t history_from = 0;  // the first seq of the engine's history it holds (0: all of it)
};

struct tracker_options {
  bool replay_enabled = false;     // a replay endpoint is configured
  bool cold_start_replay = true;   // with replay: ask for everything (from 0) at start
  size_t max_buffered_batches = 4096;
  size_t max_buffered_bytes = size_t{64} << 20;
  uint32_t max_replay_attempts = 3;  // ST10: requests in a row without any reply before giving up
  uint32_t tail_probes = 8;        // ST6: re-asks after a catch-up while no live batch was seen
  std::optional<resume_point> resume{};  // ST5: start warm from here instead of cold
};

/// Monotonic counters (plus two gauges) for /metrics.
struct tracker_counters {
  uint64_t batches = 0;            // delivered
  uint64_t batches_recovered = 0;  // delivered that came from a replay
  uint64_t gaps = 0;               // live seq beyond the next expected one
  uint64_t replays_requested = 0;  // request_replay actions of every reason
  uint64_t replays_succeeded = 0;  // requests whose reply ended with nothing missing (ST11)
  uint64_t replays_failed = 0;     // requests without any reply within the timeout (ST10)
  uint64_t replays_continued = 0;  // requests asking for the rest of a reply that stopped short
  uint64_t replay_holes = 0;       // ST9: replies that skipped seqs (dropped in transit)
  uint64_t duplicates = 0;
  uint64_t resets = 0;             // incarnation resets
  uint64_t history_lost = 0;       // history_lost actions
  uint64_t batches_lost = 0;       // seqs covered by them
  uint64_t cold_skipped = 0;       // seqs before the first delivery that were never available
  uint64_t buffer_overflows = 0;
  uint64_t batches_shed = 0;       // ST2: live batches dropped from a full buffer, asked for again
  uint64_t stray_replies = 0;      // replies or END with no replay outstanding
  uint64_t discarded_on_reset = 0; // buffered batches of the old incarnation thrown away
  uint64_t tail_probes = 0;        // ST6 re-asks sent
  uint64_t tail_recovered = 0;     // batches only an ST6 re-ask (or the late-join repair) found
  uint64_t buffered = 0;           // gauge: batches in the reorder buffer now
  uint64_t buffered_bytes = 0;     // gauge
};

template <class Payload>
struct tracker_action {
  action_kind kind = action_kind::deliver;
  /// deliver, first_batch: the batch; request_replay, schedule_probe: the seq asked from;
  /// gap_detected, history_lost: the first missing seq; incarnation_reset: the new live seq.
  uint64_t seq = 0;
  uint64_t seen = 0;             // gap_detected: the live seq beyond the next expected one
  uint64_t first_available = 0;  // history_lost: the first seq after the lost range
  uint64_t previous_seq = 0;     // incarnation_reset: the old incarnation's last live seq (or,
                                 // caught up from the ring alone, the next seq it expected)
  uint32_t probe = 0;            // schedule_probe: 1..tail_probes (its delay doubles with it)
  replay_reason why = replay_reason::repair;      // request_replay
  loss_reason reason = loss_reason::history_lost;  // history_lost
  bool replayed = false;                           // deliver
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
  /// configured, or the resume request (ST5).
  void start(actions& out) {
    if (phase_ != tracker_phase::unstarted) return;
    phase_ = tracker_phase::streaming;
    if (opts_.resume) {
      next_ = opts_.resume->next;
      history_from_ = opts_.resume->history_from;
      if (opts_.replay_enabled) begin_request(*next_, replay_reason::resume, out);
      return;
    }
    if (opts_.replay_enabled && opts_.cold_start_replay) {
      next_ = 0;
      begin_request(0, replay_reason::catch_up, out);
    }
  }

  /// A live batch. Precondition: seq != UINT64_MAX (the END marker; the source rejects it).
  void on_live(uint64_t seq, Payload p, actions& out) {
    if (phase_ == tracker_phase::unstarted) start(out);  // a live batch proves the peer
    if (last_live_ && seq <= *last_live_) return reset_incarnation(seq, std::move(p), out);
    // ST1 without a live watermark (caught up from the ring alone, or resumed): a first live seq
    // below what was delivered is a late duplicate only when the ring gave that seq with the
    // same bytes; otherwise a new engine process whose counter restarted sent it.
    if (!last_live_ && next_ && seq < *next_ && !replayed_before(seq, p))
      return reset_incarnation(seq, std::move(p), out);
    last_live_ = seq;
    replayed_digests_.clear();  // ST1 needs them only until the first live batch
    const bool late_join = phase_ == tracker_phase::probe_wait;  // ST6: the subscription works
    if (late_join) phase_ = tracker_phase::streaming;
    if (phase_ == tracker_phase::replaying) {
      if (why_ == replay_reason::probe && buffer_.empty() && next_ && seq == *next_) {
        // The probe asks for what this batch now proves is not missing: deliver, do not wait.
        finish_request();
        emit(out, action_kind::cancel_replay, seq);
        deliver(seq, std::move(p), false, out);
        return;
      }
      insert(seq, std::move(p), false, out);  // ST2
      return;
    }
    if (!next_) {
      // The first batch sets the baseline (ST5): what came before it is history we lack.
      next_ = seq;
      if (!history_from_) c_.cold_skipped += seq;
    }
    if (seq < *next_) {
      ++c_.duplicates;  // ST3
      return;
    }
    if (seq > *next_) {
      if (late_join) {
        // ST6: the subscription took effect after the ring was read: the hole is in the ring.
        late_join_from_ = *next_;
        store(seq, std::move(p), false);
        begin_request(*next_, replay_reason::repair, out);
        return;
      }
      ++c_.gaps;  // ST4
      action a = make(action_kind::gap_detected, *next_);
      a.seen = seq;
      out.push_back(std::move(a));
      if (opts_.replay_enabled) {
        const uint64_t from = *next_;
        store(seq, std::move(p), false);
        begin_request(from, replay_reason::repair, out);
        return;
      }
      declare_lost(seq, loss_reason::no_replay_endpoint, out);
    }
    deliver(seq, std::move(p), false, out);
  }

  /// One replayed batch (2- or 3-frame reply, END excluded).
  void on_replay(uint64_t seq, Payload p, actions& out) {
    if (phase_ != tracker_phase::replaying) {
      ++c_.stray_replies;
      return;
    }
    const bool first = !last_reply_;
    if (!first && seq <= *last_reply_) {
      ++c_.duplicates;  // the ring sends each seq once, in order: a repeat is only noise
      return;
    }
    if (!first && seq > *next_) {
      // ST9: replies between the last one and this were dropped on the way; the rest of this
      // reply is abandoned and asked for again from the first seq still missing.
      ++c_.replay_holes;
      continue_request(out);
      return;
    }
    last_reply_ = seq;
    failures_ = 0;
    insert(seq, std::move(p), true, out);
    // ST8: below the first reply the ring holds nothing more.
    if (first && phase_ == tracker_phase::replaying)
      drain(seq, why_ == replay_reason::resume ? loss_reason::resume_outside_ring
                                               : loss_reason::history_lost,
            out);
  }

  /// The END marker of the outstanding replay.
  void on_replay_end(actions& out) {
    if (phase_ != tracker_phase::replaying) {
      ++c_.stray_replies;
      return;
    }
    if (!last_reply_) {
      // ST8: the ring holds nothing from where we asked; everything the live stream showed us
      // before asking was published before, so the ring had it and has lost it since.
      uint64_t lost_below = asked_from_;
      if (live_high_at_request_) lost_below = std::max(lost_below, *live_high_at_request_ + 1);
      const loss_reason r = why_ == replay_reason::resume ? loss_reason::resume_outside_ring
                                                          : loss_reason::history_lost;
      drain(lost_below, r, out);
      // Shed batches (ST2) have nothing buffered above them to end the hole at.
      if (buffer_.empty() && next_ && *next_ < lost_below) declare_lost(lost_below, r, out);
    }
    reply_ended(out);
  }

  /// The outstanding replay saw no message within the executor's timeout: its long one while
  /// no reply has come (a failure), its short stall timeout once one has (the reply stopped
  /// short, ST10).
  void on_replay_timeout(actions& out) {
    if (phase_ != tracker_phase::replaying) return;
    if (last_reply_) return reply_ended(out);
    ++c_.replays_failed;
    if (++failures_ < opts_.max_replay_attempts) {
      // The executor uses a fresh DEALER, so no late reply of the abandoned request can end
      // this one early.
      begin_request(next_.value_or(asked_from_), replay_reason::retry, out, false);
      return;
    }
    give_up(loss_reason::replay_failed, out);
  }

  /// A schedule_probe's delay elapsed: ask again, unless a live batch arrived in the meantime.
  void on_probe_due(actions& out) {
    if (phase_ != tracker_phase::probe_wait || last_live_) return;
    ++probes_sent_;
    ++c_.tail_probes;
    begin_request(next_.value_or(0), replay_reason::probe, out);
  }

  tracker_phase phase() const noexcept { return phase_; }
  bool replay_outstanding() const noexcept { return phase_ == tracker_phase::replaying; }
  /// A reply of the outstanding request has arrived (the executor's stall timeout applies).
  bool replay_answering() const noexcept { return replay_outstanding() && last_reply_; }
  /// ST6 is waiting for a probe's delay (no live batch seen, probes left).
  bool probing() const noexcept { return phase_ == tracker_phase::probe_wait; }
  /// A live batch has arrived since start: the subscription is known to be in effect.
  bool live_confirmed() const noexcept { return last_live_.has_value(); }
  /// The next seq the tracker will deliver, once known.
  std::optional<uint64_t> next_expected() const noexcept { return next_; }
  /// The first seq of this incarnation the consumer holds history from (0: all of it); unset
  /// while cold (ST5).
  std::optional<uint64_t> history_from() const noexcept { return history_from_; }
  const tracker_counters& counters() const noexcept { return c_; }

 private:
  struct entry {
    Payload payload;
    bool replayed;
  };
  static constexpr uint64_t no_bound = std::numeric_limits<uint64_t>::max();

  static action make(action_kind k, uint64_t seq) {
    action a;
    a.kind = k;
    a.seq = seq;
    return a;
  }
  void emit(actions& out, action_kind k, uint64_t seq) { out.push_back(make(k, seq)); }

  void deliver(uint64_t seq, Payload p, bool replayed, actions& out) {
    if (!history_from_) {
      emit(out, action_kind::first_batch, seq);  // ST7
      history_from_ = seq;
    }
    if (replayed && !last_live_) {
      if (replayed_digests_.size() == late_duplicate_window) replayed_digests_.pop_front();
      replayed_digests_.emplace_back(seq, payload_digest(p));
    }
    action a = make(action_kind::deliver, seq);
    a.replayed = replayed;
    a.payload = std::move(p);
    out.push_back(std::move(a));
    ++c_.batches;
    if (replayed) ++c_.batches_recovered;
    const bool probe = phase_ == tracker_phase::replaying && why_ == replay_reason::probe;
    if (replayed && (probe || (late_join_from_ && seq >= *late_join_from_))) ++c_.tail_recovered;
    next_ = seq + 1;
  }

  // [next_, upto) will never arrive: say so (or not, while cold) and move past it.
  void declare_lost(uint64_t upto, loss_reason r, actions& out) {
    if (!history_from_) {
      c_.cold_skipped += upto - *next_;
    } else {
      ++c_.history_lost;
      c_.batches_lost += upto - *next_;
      action a = make(action_kind::history_lost, *next_);
      a.first_available = upto;
      a.reason = r;
      out.push_back(std::move(a));
    }
    next_ = upto;
  }

  void begin_request(uint64_t from, replay_reason why, actions& out, bool fresh_budget = true) {
    phase_ = tracker_phase::replaying;
    why_ = why;
    asked_from_ = from;
    last_reply_.reset();
    if (fresh_budget) failures_ = 0;
    live_high_at_request_ = last_live_;
    ++c_.replays_requested;
    if (why == replay_reason::continue_) ++c_.replays_continued;
    action a = make(action_kind::request_replay, from);
    a.why = why;
    out.push_back(std::move(a));
  }

  // The outstanding request is over (ended, cancelled or given up): back to streaming.
  void finish_request() { phase_ = tracker_phase::streaming; }

  // ST9/ST10: the reply stopped short; ask for the rest at once (a fresh request).
  void continue_request(actions& out) { begin_request(*next_, replay_reason::continue_, out); }

  // The reply ended (END, or the stall timeout after replies): ST10 or ST11.
  void reply_ended(actions& out) {
    const bool answered = last_reply_.has_value();
    if (!buffer_.empty() || shed_pending()) {
      // A hole remains below live batches: after an answered request the rest of the reply was
      // lost on the way (ST10); after an unanswered one the live batches came after the ring
      // was read (ST11). Either way, ask from the hole.
      if (answered) return continue_request(out);
      // An unanswered resume asked again is still the resume (its loss reason, ST8).
      return begin_request(*next_, why_ == replay_reason::resume ? why_ : replay_reason::repair,
                           out);
    }
    ++c_.replays_succeeded;
    finish_request();
    late_join_from_.reset();
    // ST6: no live batch yet, so the ring may have more than it had when it was read.
    if (!last_live_ && probes_sent_ < opts_.tail_probes) {
      phase_ = tracker_phase::probe_wait;
      action a = make(action_kind::schedule_probe, next_.value_or(0));
      a.probe = probes_sent_ + 1;
      out.push_back(std::move(a));
    }
  }

  void give_up(loss_reason r, actions& out) {
    finish_request();
    late_join_from_.reset();
    emit(out, action_kind::cancel_replay, next_.value_or(0));
    drain(no_bound, r, out);
  }

  void store(uint64_t seq, Payload p, bool replayed) {
    c_.buffered_bytes += payload_bytes(p);
    buffer_.emplace(seq, entry{std::move(p), replayed});
    c_.buffered = buffer_.size();
  }

  void insert(uint64_t seq, Payload p, bool replayed, actions& out) {
    if ((next_ && seq < *next_) || buffer_.count(seq) != 0) {
      ++c_.duplicates;  // ST3
      return;
    }
    const bool full = buffer_.size() >= opts_.max_buffered_batches ||
                      c_.buffered_bytes + payload_bytes(p) > opts_.max_buffered_bytes;
    store(seq, std::move(p), replayed);
    if (full) {
      ++c_.buffer_overflows;  // ST2
      if (!shed_live_tail()) {
        give_up(loss_reason::buffer_overflow, out);
        return;
      }
    }
    drain(0, loss_reason::history_lost, out);
  }

  // ST2: drops the newest live batches until the buffer is within half its bounds; false when
  // none could be dropped (only replayed batches wait).
  bool shed_live_tail() {
    uint64_t shed = 0;
    auto within = [&] {
      return buffer_.size() <= opts_.max_buffered_batches / 2 &&
             c_.buffered_bytes <= opts_.max_buffered_bytes / 2;
    };
    for (auto it = buffer_.end(); it != buffer_.begin() && !within();) {
      --it;
      if (it->second.replayed) continue;
      shed_below_ = std::max(shed_below_.value_or(0), it->first + 1);
      c_.buffered_bytes -= payload_bytes(it->second.payload);
      it = buffer_.erase(it);
      ++shed;
    }
    c_.batches_shed += shed;  // (the buffered gauge: the drain or give-up that follows sets it)
    return shed > 0;
  }

  // Seqs below shed_below_ that are not delivered yet were shed (ST2) and must be asked for.
  bool shed_pending() const { return shed_below_ && next_ && *next_ < *shed_below_; }

  // Delivers the buffer front while it is contiguous; a hole below `lost_below` can no longer be
  // filled and is declared lost (up to the next batch we have, or `lost_below`).
  void drain(uint64_t lost_below, loss_reason r, actions& out) {
    while (!buffer_.empty()) {
      auto it = buffer_.begin();
      const uint64_t seq = it->first;
      if (!next_) {
        if (seq >= lost_below) break;
        next_ = seq;  // without a position, the first batch a give-up lets through sets it
        if (!history_from_) c_.cold_skipped += seq;
      }
      if (seq != *next_) {
        if (*next_ >= lost_below) break;
        declare_lost(std::min(seq, lost_below), r, out);
        continue;
      }
      entry e = std::move(it->second);
      c_.buffered_bytes -= payload_bytes(e.payload);
      buffer_.erase(it);
      deliver(seq, std::move(e.payload), e.replayed, out);
    }
    c_.buffered = buffer_.size();
  }

  void reset_incarnation(uint64_t seq, Payload p, actions& out) {
    ++c_.resets;
    action a = make(action_kind::incarnation_reset, seq);
    a.previous_seq = last_live_ ? *last_live_ : next_.value_or(0);
    out.push_back(std::move(a));
    if (phase_ == tracker_phase::replaying) emit(out, action_kind::cancel_replay, seq);
    phase_ = tracker_phase::streaming;
    c_.discarded_on_reset += buffer_.size();
    buffer_.clear();
    shed_below_.reset();  // (ST1's digests are empty already: a live batch came before)
    c_.buffered = 0;
    c_.buffered_bytes = 0;
    history_from_.reset();  // cold (ST5)
    late_join_from_.reset();
    last_live_ = seq;
    if (opts_.replay_enabled && seq > 0) {
      // The new engine's history before `seq` is in its ring: catch up as at cold start.
      next_ = 0;
      store(seq, std::move(p), false);
      begin_request(0, replay_reason::catch_up, out);
      return;
    }
    c_.cold_skipped += seq;  // its history before `seq`, never to be had (deliver moves next_)
    deliver(seq, std::move(p), false, out);
  }

  // ST1: whether the ring delivered `seq` with these very bytes before any live batch arrived.
  bool replayed_before(uint64_t seq, const Payload& p) const {
    for (auto it = replayed_digests_.rbegin(); it != replayed_digests_.rend(); ++it)
      if (it->first == seq) return it->second == payload_digest(p);
    return false;
  }

  /// How many replayed deliveries ST1 remembers: how far behind the ring's position a first live
  /// batch may be and still count as a late duplicate.
  static constexpr size_t late_duplicate_window = 1024;

  tracker_options opts_;
  tracker_counters c_;
  tracker_phase phase_ = tracker_phase::unstarted;
  std::optional<uint64_t> next_;          // the next seq to deliver, once known
  std::optional<uint64_t> history_from_;  // unset: cold (ST5)
  std::optional<uint64_t> last_live_;
  std::deque<std::pair<uint64_t, uint64_t>> replayed_digests_;  // ST1: (seq, payload_digest)
  // The outstanding request (phase_ == replaying).
  replay_reason why_ = replay_reason::repair;
  uint64_t asked_from_ = 0;
  std::optional<uint64_t> last_reply_;   // its highest reply so far
  std::optional<uint64_t> live_high_at_request_;
  std::optional<uint64_t> shed_below_;  // ST2: one past the newest live batch shed
  uint32_t failures_ = 0;                // requests in a row without any reply (ST10)
  uint32_t probes_sent_ = 0;             // ST6 probes of this process (never reset: bounded)
  std::optional<uint64_t> late_join_from_;  // ST6 repair of a late subscription, from here
  std::map<uint64_t, entry> buffer_;
};

}  // namespace kvrelay::ingress
