// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Unit tests of the ingress sequence state machine: every rule (ST1-ST11) of sequence_tracker.hpp,
// driven through its public API with string payloads and read back as a compact action trace.

#include "actors/ingress/sequence_tracker.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kvrelay::ingress {
namespace {

using tracker = sequence_tracker<std::string>;

std::string payload(uint64_t seq) { return "p" + std::to_string(seq); }
// What a restarted engine sends under a seq its predecessor used: other bytes (its timestamps).
std::string restarted_payload(uint64_t seq) { return "n" + std::to_string(seq); }

// Renders actions as "D3 D4r G2-5 R2 R2+ C L2-5:history_lost I0/6 P1", and checks on the way that
// every delivered payload is the one fed for that seq (no mix-ups when reordering). A request's
// reason shows when it is not the plain one: "R2+" continues a reply that stopped short (ST9,
// ST10), "R2!" retries one that got no reply, "R2?" is a tail probe (ST6).
std::string trace(const tracker::actions& out) {
  std::ostringstream os;
  for (const auto& a : out) {
    if (a.kind == action_kind::first_batch) continue;  // ST7 has its own tests (firsts)
    if (os.tellp() > 0) os << ' ';
    switch (a.kind) {
      case action_kind::deliver:
        os << 'D' << a.seq << (a.replayed ? "r" : "");
        if (a.payload != payload(a.seq) && a.payload != restarted_payload(a.seq))
          os << "!BADPAYLOAD(" << a.payload << ')';
        break;
      case action_kind::gap_detected: os << 'G' << a.seq << '-' << a.seen; break;
      case action_kind::request_replay:
        os << 'R' << a.seq
           << (a.why == replay_reason::continue_ ? "+"
               : a.why == replay_reason::retry   ? "!"
               : a.why == replay_reason::probe   ? "?"
                                                 : "");
        break;
      case action_kind::cancel_replay: os << 'C'; break;
      case action_kind::history_lost:
        os << 'L' << a.seq << '-' << a.first_available << ':' << to_string(a.reason);
        break;
      case action_kind::incarnation_reset: os << 'I' << a.seq << '/' << a.previous_seq; break;
      case action_kind::schedule_probe: os << 'P' << a.probe; break;
      case action_kind::first_batch: break;
    }
  }
  return os.str();
}

// Feeds one step and returns what it produced.
struct harness {
  explicit harness(tracker_options o) : t(o) {}
  std::string start() { return run([&](auto& out) { t.start(out); }); }
  std::string live(uint64_t s) { return run([&](auto& out) { t.on_live(s, payload(s), out); }); }
  // A live batch of a restarted engine (same seq as before, other bytes).
  std::string live_restarted(uint64_t s) {
    return run([&](auto& out) { t.on_live(s, restarted_payload(s), out); });
  }
  std::string replay(uint64_t s) {
    return run([&](auto& out) { t.on_replay(s, payload(s), out); });
  }
  std::string end() { return run([&](auto& out) { t.on_replay_end(out); }); }
  std::string timeout() { return run([&](auto& out) { t.on_replay_timeout(out); }); }
  std::string probe() { return run([&](auto& out) { t.on_probe_due(out); }); }
  // The seqs of every first_batch action (ST7) since the harness was made.
  std::vector<uint64_t> firsts;
  template <class F>
  std::string run(F f) {
    tracker::actions out;
    f(out);
    for (const auto& a : out)
      if (a.kind == action_kind::first_batch) firsts.push_back(a.seq);
    return trace(out);
  }
  const tracker_counters& c() const { return t.counters(); }
  tracker t;
};

tracker_options no_replay() { return tracker_options{}; }
tracker_options resumed(uint64_t next, uint64_t history_from = 0, bool replay = true) {
  tracker_options o;
  o.replay_enabled = replay;
  o.resume = resume_point{next, history_from};
  return o;
}
tracker_options with_replay(bool cold = false) {
  tracker_options o;
  o.replay_enabled = true;
  o.cold_start_replay = cold;
  return o;
}

TEST(SequenceTracker, InOrderLiveIsDeliveredAsIs) {
  harness h(no_replay());
  EXPECT_EQ(h.start(), "");
  EXPECT_EQ(h.live(0), "D0");
  EXPECT_EQ(h.live(1), "D1");
  EXPECT_EQ(h.live(2), "D2");
  EXPECT_EQ(h.c().batches, 3u);
  EXPECT_EQ(h.c().gaps, 0u);
}

TEST(SequenceTracker, FirstLiveBatchSetsTheBaselineWithoutAGap) {
  harness h(no_replay());
  EXPECT_EQ(h.live(100), "D100");
  EXPECT_EQ(h.live(101), "D101");
  EXPECT_EQ(h.c().gaps, 0u);
  EXPECT_EQ(h.c().history_lost, 0u);
}

TEST(SequenceTracker, GapWithoutReplayEndpointIsReportedAsLossAndSkipped) {
  harness h(no_replay());
  h.live(0);
  h.live(1);
  EXPECT_EQ(h.live(5), "G2-5 L2-5:no_replay_endpoint D5");
  EXPECT_EQ(h.live(6), "D6");
  EXPECT_EQ(h.c().gaps, 1u);
  EXPECT_EQ(h.c().history_lost, 1u);
  EXPECT_EQ(h.c().batches_lost, 3u);
  EXPECT_EQ(h.c().replays_requested, 0u);
}

TEST(SequenceTracker, GapIsRepairedByReplayInOrderWithLiveBuffered) {
  harness h(with_replay());
  EXPECT_EQ(h.start(), "");  // cold-start replay disabled
  h.live(0);
  h.live(1);
  EXPECT_EQ(h.live(4), "G2-4 R2");
  EXPECT_TRUE(h.t.replay_outstanding());
  EXPECT_EQ(h.live(5), "");  // buffered behind the hole
  EXPECT_EQ(h.c().buffered, 2u);
  EXPECT_EQ(h.c().buffered_bytes, 4u);
  EXPECT_EQ(h.replay(2), "D2r");
  EXPECT_EQ(h.replay(3), "D3r D4 D5");
  EXPECT_EQ(h.c().buffered, 0u);
  EXPECT_EQ(h.c().buffered_bytes, 0u);
  EXPECT_EQ(h.replay(4), "");  // overlap with live: duplicate
  EXPECT_EQ(h.replay(5), "");
  EXPECT_EQ(h.end(), "");
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.live(6), "D6");
  EXPECT_EQ(h.c().batches_recovered, 2u);
  EXPECT_EQ(h.c().duplicates, 2u);
  EXPECT_EQ(h.c().replays_requested, 1u);
  EXPECT_EQ(h.c().replays_succeeded, 1u);
  EXPECT_EQ(h.c().history_lost, 0u);
}

TEST(SequenceTracker, ReplayStartingLaterThanAskedIsHistoryLost) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(10), "G1-10 R1");
  EXPECT_EQ(h.replay(5), "L1-5:history_lost D5r");  // declared as soon as the replay passes it
  EXPECT_EQ(h.replay(6), "D6r");
  for (uint64_t s = 7; s < 10; ++s) h.replay(s);
  EXPECT_EQ(h.replay(10), "");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().history_lost, 1u);
  EXPECT_EQ(h.c().batches_lost, 4u);
  EXPECT_EQ(h.t.next_expected(), std::optional<uint64_t>(11));
}

TEST(SequenceTracker, EndWithoutTheMissingBatchesDeclaresThemLost) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(3), "G1-3 R1");
  EXPECT_EQ(h.end(), "L1-3:history_lost D3");
  EXPECT_FALSE(h.t.replay_outstanding());
}

TEST(SequenceTracker, HoleInTheRingItselfIsLostOnceTheReaskProvesIt) {
  // vLLM consumes a seq on a failed send that never reaches its ring. A hole inside a reply looks
  // like dropped replies first (ST9): asked again, the ring starts later than asked (ST8).
  harness h(with_replay());
  h.live(0);
  h.live(5);
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(3), "R2+");
  EXPECT_EQ(h.c().history_lost, 0u) << "a hole in transit is not a loss";
  EXPECT_EQ(h.replay(3), "L2-3:history_lost D3r");
  EXPECT_EQ(h.replay(4), "D4r D5");
  EXPECT_EQ(h.c().replay_holes, 1u);
  EXPECT_EQ(h.c().batches_lost, 1u);
}

TEST(SequenceTracker, ColdStartAsksForEverythingAndMissingHistoryIsNoLoss) {
  harness h(with_replay(true));
  EXPECT_EQ(h.start(), "R0");
  EXPECT_EQ(h.replay(7), "D7r");
  EXPECT_EQ(h.replay(8), "D8r");
  EXPECT_EQ(h.end(), "P1");  // no live batch yet: ST6 will ask again
  EXPECT_EQ(h.live(9), "D9");
  EXPECT_EQ(h.probe(), "") << "the live batch ended the probing";
  EXPECT_EQ(h.c().history_lost, 0u);
  EXPECT_EQ(h.c().cold_skipped, 7u);
  EXPECT_EQ(h.c().batches_recovered, 2u);
}

TEST(SequenceTracker, ColdStartBuffersLiveUntilTheReplayCatchesUp) {
  harness h(with_replay(true));
  h.start();
  EXPECT_EQ(h.live(10), "");
  EXPECT_EQ(h.live(11), "");
  EXPECT_EQ(h.replay(8), "D8r");
  EXPECT_EQ(h.replay(9), "D9r D10 D11");  // the buffered live copies are contiguous now
  EXPECT_EQ(h.replay(10), "");
  EXPECT_EQ(h.replay(11), "");
  EXPECT_EQ(h.c().duplicates, 2u);
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(12), "D12");
}

TEST(SequenceTracker, ColdStartLiveDuplicatesOfReplayedBatchesAreDropped) {
  harness h(with_replay(true));
  h.start();
  for (uint64_t s = 0; s <= 5; ++s) h.replay(s);
  h.end();
  EXPECT_EQ(h.live(4), "");  // the SUB was behind the replay
  EXPECT_EQ(h.live(5), "");
  EXPECT_EQ(h.live(6), "D6");
  EXPECT_EQ(h.c().duplicates, 2u);
  EXPECT_EQ(h.c().resets, 0u);
}

TEST(SequenceTracker, ColdStartWithEmptyRingExpectsSeqZero) {
  harness h(with_replay(true));
  h.start();
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.t.next_expected(), std::optional<uint64_t>(0));
  // The SUB joined late and missed 0..2: they are in the ring now. Not a gap (ST6).
  EXPECT_EQ(h.live(3), "R0");
  EXPECT_EQ(h.replay(0), "D0r");
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().gaps, 0u);
  EXPECT_EQ(h.c().tail_recovered, 3u);
  EXPECT_EQ(h.firsts, (std::vector<uint64_t>{0}));
}

TEST(SequenceTracker, ColdStartReplayFailureDeliversLiveWithoutLoss) {
  tracker_options o = with_replay(true);
  o.max_replay_attempts = 2;
  harness h(o);
  EXPECT_EQ(h.start(), "R0");
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.timeout(), "R0!");
  EXPECT_EQ(h.timeout(), "C D5 D6");
  EXPECT_EQ(h.c().replays_failed, 2u);
  EXPECT_EQ(h.c().history_lost, 0u);
  EXPECT_EQ(h.replay(0), "");  // late reply of the abandoned replay
  EXPECT_EQ(h.c().stray_replies, 1u);
}

// ST10: the executor's stall timeout after a reply means the reply stopped short (its rest and
// END dropped past the engine's high-water mark): ask for the rest, no failure counted.
TEST(SequenceTracker, StallAfterRepliesContinuesFromWhatIsStillMissing) {
  harness h(with_replay());
  h.live(0);
  h.live(5);
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(2), "D2r");
  EXPECT_TRUE(h.t.replay_answering());
  EXPECT_EQ(h.timeout(), "R3+");
  EXPECT_FALSE(h.t.replay_answering()) << "a new request: its first reply is awaited";
  EXPECT_EQ(h.replay(3), "D3r");
  EXPECT_EQ(h.replay(4), "D4r D5");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().replays_requested, 2u);
  EXPECT_EQ(h.c().replays_continued, 1u);
  EXPECT_EQ(h.c().replays_failed, 0u) << "progress is not a failure";
  EXPECT_EQ(h.c().history_lost, 0u);
}

TEST(SequenceTracker, ProgressRestoresTheFailureBudget) {
  tracker_options o = with_replay();
  o.max_replay_attempts = 2;
  harness h(o);
  h.live(0);
  h.live(9);
  EXPECT_EQ(h.timeout(), "R1!");
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.timeout(), "R2+") << "the reply stopped short: not a failure";
  EXPECT_EQ(h.timeout(), "R2!") << "no reply: the first failure of a fresh budget";
  EXPECT_EQ(h.timeout(), "C L2-9:replay_failed D9");
  EXPECT_EQ(h.c().replays_failed, 3u);
}

// A stall with nothing missing ends the request like its END would have (ST11).
TEST(SequenceTracker, StallWithNothingMissingCompletesTheRequest) {
  harness h(with_replay());
  h.live(0);
  h.live(3);
  h.replay(1);
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.timeout(), "");
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.c().replays_succeeded, 1u);
  EXPECT_EQ(h.live(4), "D4");
}

TEST(SequenceTracker, RepeatedTimeoutsGiveUpAndDeclareTheLoss) {
  tracker_options o = with_replay();
  o.max_replay_attempts = 2;
  harness h(o);
  h.live(0);
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.timeout(), "R1!");
  EXPECT_EQ(h.timeout(), "C L1-5:replay_failed D5 D6");
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.end(), "");  // END of the abandoned request
  EXPECT_EQ(h.c().stray_replies, 1u);
  EXPECT_EQ(h.live(7), "D7");
}

TEST(SequenceTracker, ST2_AFullBufferShedsItsNewestLiveBatchesAndTheRingSuppliesThem) {
  tracker_options o = with_replay();
  o.max_buffered_batches = 3;
  harness h(o);
  h.live(0);
  EXPECT_EQ(h.live(5), "G1-5 R1");
  EXPECT_EQ(h.live(6), "");
  EXPECT_EQ(h.live(7), "");
  EXPECT_EQ(h.c().buffered, 3u);
  EXPECT_EQ(h.live(8), "") << "no loss, no give-up: the ring holds what is shed";
  EXPECT_EQ(h.c().buffer_overflows, 1u);
  EXPECT_EQ(h.c().batches_shed, 3u) << "down to half the bound, newest first";
  EXPECT_EQ(h.c().buffered, 1u);
  EXPECT_TRUE(h.t.replay_outstanding());
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(2), "D2r");
  EXPECT_EQ(h.replay(3), "D3r");
  EXPECT_EQ(h.replay(4), "D4r D5");
  EXPECT_EQ(h.end(), "R6+") << "the reply ended below what was shed: ask for it (ST10)";
  EXPECT_EQ(h.replay(6), "D6r");
  EXPECT_EQ(h.replay(7), "D7r");
  EXPECT_EQ(h.replay(8), "D8r");
  EXPECT_EQ(h.end(), "");
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.live(9), "D9");
  EXPECT_EQ(h.c().batches_lost, 0u);
  EXPECT_EQ(h.c().history_lost, 0u);
}

TEST(SequenceTracker, ST2_AFullBufferByBytesShedsToo) {
  tracker_options o = with_replay();
  o.max_buffered_bytes = 7;  // "p5" + "p6" + "p7" = 6 bytes fit, "p8" does not
  harness h(o);
  h.live(0);
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.live(7), "");
  EXPECT_EQ(h.live(8), "");
  EXPECT_EQ(h.c().batches_shed, 3u) << "to at most half the bytes: p5 alone";
  EXPECT_EQ(h.c().buffered_bytes, 2u);
}

TEST(SequenceTracker, ST2_ShedBatchesTheRingNoLongerHoldsAreLost) {
  tracker_options o = with_replay();
  o.max_buffered_batches = 3;
  harness h(o);
  h.live(0);
  h.live(5);
  h.live(6);
  h.live(7);
  h.live(8);
  h.replay(1);
  h.replay(2);
  h.replay(3);
  EXPECT_EQ(h.replay(4), "D4r D5");
  EXPECT_EQ(h.end(), "R6+");
  // The ring moved on meanwhile: nothing from 6. What the live stream showed before asking (up
  // to 8) was in it and is gone (ST8).
  EXPECT_EQ(h.end(), "L6-9:history_lost");
  EXPECT_EQ(h.c().batches_lost, 3u);
  EXPECT_EQ(h.live(9), "D9");
}

TEST(SequenceTracker, ST2_LiveBatchesAfterASheddingWaitAboveTheShedOnes) {
  tracker_options o = with_replay();
  o.max_buffered_batches = 4;
  harness h(o);
  h.live(0);
  h.live(5);
  h.live(6);
  h.live(7);
  h.live(8);
  EXPECT_EQ(h.live(9), "");  // sheds 9, 8, 7: {5, 6} left
  EXPECT_EQ(h.c().batches_shed, 3u);
  EXPECT_EQ(h.live(10), "");  // waits above the shed 7-9
  h.replay(1);
  h.replay(2);
  h.replay(3);
  EXPECT_EQ(h.replay(4), "D4r D5 D6");
  EXPECT_EQ(h.end(), "R7+");
  h.replay(7);
  h.replay(8);
  EXPECT_EQ(h.replay(9), "D9r D10");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().batches_lost, 0u);
}

TEST(SequenceTracker, SeqGoingBackToZeroIsANewIncarnation) {
  harness h(no_replay());
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.live(0), "I0/6 D0");
  EXPECT_EQ(h.live(1), "D1");
  EXPECT_EQ(h.c().resets, 1u);
  EXPECT_EQ(h.c().gaps, 0u);
}

TEST(SequenceTracker, AnyLiveSeqThatDoesNotIncreaseIsANewIncarnation) {
  harness h(no_replay());
  h.live(1000);
  EXPECT_EQ(h.live(1000), "I1000/1000 D1000");
  EXPECT_EQ(h.live(999), "I999/1000 D999");
  EXPECT_EQ(h.c().resets, 2u);
}

TEST(SequenceTracker, NewIncarnationCatchesUpFromItsRing) {
  harness h(with_replay());
  h.live(10);
  h.live(11);
  EXPECT_EQ(h.live(3), "I3/11 R0");
  EXPECT_EQ(h.replay(1), "D1r");  // the new engine's ring already lost 0: not a loss to us
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(4), "D4");
  EXPECT_EQ(h.c().history_lost, 0u);
}

TEST(SequenceTracker, ResetDuringReplayCancelsItAndDiscardsTheBuffer) {
  harness h(with_replay());
  h.live(0);
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.live(0), "I0/6 C D0");
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.c().discarded_on_reset, 2u);
  EXPECT_EQ(h.c().buffered, 0u);
  EXPECT_EQ(h.c().buffered_bytes, 0u);
  EXPECT_EQ(h.live(1), "D1");
  // The old process' 5 and 6 are gone for good: a later repair never delivers them.
  EXPECT_EQ(h.live(3), "G2-3 R2");
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.live(4), "D4");
}

// A reset to seq 1 with a ring: seq 0 is in the new engine's ring, caught up as at cold start;
// only the new process' batch waits for it.
TEST(SequenceTracker, AResetToSeqOneCatchesUpFromZeroWithOnlyTheNewBatchWaiting) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(5), "G1-5 R1");
  EXPECT_EQ(h.live_restarted(1), "I1/5 C R0");
  EXPECT_EQ(h.c().buffered, 1u) << "the old process' 5 is discarded";
  EXPECT_EQ(h.replay(0), "D0r D1");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().cold_skipped, 0u);
}

// What an old process' buffer overflow shed is not asked of the new process' ring.
TEST(SequenceTracker, AResetForgetsWhatTheOldProcessShed) {
  tracker_options o = with_replay();
  o.max_buffered_batches = 2;
  harness h(o);
  h.live(0);
  EXPECT_EQ(h.live(5), "G1-5 R1");
  h.live(6);
  h.live(7);  // overflows: 7 and 6 shed
  ASSERT_EQ(h.c().batches_shed, 2u);
  EXPECT_EQ(h.live_restarted(3), "I3/7 C R0");
  h.replay(0);
  h.replay(1);
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "") << "nothing past 3 to ask for";
  EXPECT_EQ(h.live_restarted(4), "D4");
}

// ST6's tail belongs to the process it was a tail of: after a reset, the new process' catch-up
// is not counted as a late subscription's repair.
TEST(SequenceTracker, AResetEndsALateJoinRepair) {
  harness h(with_replay(true));
  h.start();
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.live(3), "R0");
  EXPECT_EQ(h.live_restarted(2), "I2/3 C R0");
  h.replay(0);
  EXPECT_EQ(h.replay(1), "D1r D2");
  EXPECT_EQ(h.c().tail_recovered, 0u) << "a catch-up of the new process, not a tail";
  EXPECT_EQ(h.c().batches_recovered, 2u);
}

// Without a ring, a new process' history before its first batch is skipped and counted.
TEST(SequenceTracker, AResetWithoutARingCountsTheNewHistoryAsSkipped) {
  harness h(no_replay());
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.live_restarted(1), "I1/6 D1");
  EXPECT_EQ(h.c().cold_skipped, 5u + 1u);
  EXPECT_EQ(h.live(2), "D2");
}

TEST(SequenceTracker, LiveLossAfterTheRingWasReadTriggersAFollowUpReplay) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(3), "G1-3 R1");
  h.live(4);
  h.live(7);  // 5 and 6 lost live after the request: the ring may not have had them yet
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(2), "D2r D3 D4");
  EXPECT_EQ(h.end(), "R5+");
  EXPECT_EQ(h.replay(5), "D5r");
  EXPECT_EQ(h.replay(6), "D6r D7");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().history_lost, 0u);
  EXPECT_EQ(h.c().replays_succeeded, 1u);
}

TEST(SequenceTracker, FollowUpReplayThatCannotFillTheHoleEndsWithALoss) {
  harness h(with_replay());
  h.live(0);
  h.live(3);
  h.live(7);
  h.replay(1);
  h.replay(2);
  EXPECT_EQ(h.end(), "R4+");
  EXPECT_EQ(h.end(), "L4-7:history_lost D7");  // 7 was seen before asking: the ring had 4..6
}

TEST(SequenceTracker, StrayRepliesAndEndsAreCountedAndIgnored) {
  harness h(no_replay());
  h.live(0);
  EXPECT_EQ(h.replay(1), "");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.timeout(), "");
  EXPECT_EQ(h.c().stray_replies, 2u);
  EXPECT_EQ(h.live(1), "D1");
}

TEST(SequenceTracker, ZeroAttemptsIsClampedToOne) {
  tracker_options o = with_replay();
  o.max_replay_attempts = 0;
  harness h(o);
  h.live(0);
  h.live(2);
  EXPECT_EQ(h.timeout(), "C L1-2:replay_failed D2");
}

TEST(SequenceTracker, SequenceNumbersNearTheTopDoNotWrap) {
  harness h(no_replay());
  const uint64_t top = UINT64_MAX - 2;
  EXPECT_EQ(h.live(top), "D" + std::to_string(top));
  EXPECT_EQ(h.live(top + 1), "D" + std::to_string(top + 1));
  EXPECT_EQ(h.t.next_expected(), std::optional<uint64_t>(UINT64_MAX));
}

// ST6, the cold-start tail: the engine published 2 and 3 after the ring was
// read and before the subscription took effect, then went quiet. The END of the catch-up must not
// end it: the tracker asks again until the tail is in, and stops once a live batch proves the
// subscription.
TEST(SequenceTracker, CatchUpWithoutALiveBatchProbesForTheTail) {
  harness h(with_replay(true));
  EXPECT_EQ(h.start(), "R0");
  EXPECT_EQ(h.replay(0), "D0r");
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.end(), "P1");
  EXPECT_TRUE(h.t.probing());
  EXPECT_FALSE(h.t.replay_outstanding()) << "waiting for a probe must not hold live batches";
  EXPECT_EQ(h.probe(), "R2?");
  EXPECT_EQ(h.replay(2), "D2r");
  EXPECT_EQ(h.replay(3), "D3r");
  EXPECT_EQ(h.end(), "P2");
  EXPECT_EQ(h.probe(), "R4?");
  EXPECT_EQ(h.end(), "P3");  // nothing new, still no live batch: keep asking, rarer
  EXPECT_EQ(h.live(4), "D4");
  EXPECT_FALSE(h.t.probing());
  EXPECT_EQ(h.probe(), "") << "a live batch confirmed the subscription";
  EXPECT_EQ(h.c().tail_probes, 2u);
  EXPECT_EQ(h.c().tail_recovered, 2u);
  EXPECT_EQ(h.c().gaps, 0u);
  EXPECT_EQ(h.c().history_lost, 0u);
  EXPECT_EQ(h.firsts, (std::vector<uint64_t>{0}));
}

TEST(SequenceTracker, ProbesAreBoundedForAnEngineThatStaysQuiet) {
  tracker_options o = with_replay(true);
  o.tail_probes = 3;
  harness h(o);
  h.start();
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.probe(), "R0?");
  EXPECT_EQ(h.end(), "P2");
  EXPECT_EQ(h.probe(), "R0?");
  EXPECT_EQ(h.end(), "P3");
  EXPECT_EQ(h.probe(), "R0?");
  EXPECT_EQ(h.end(), "") << "the probes ran out: the subscription has had 3 chances";
  EXPECT_FALSE(h.t.probing());
  EXPECT_EQ(h.probe(), "");
  EXPECT_EQ(h.live(0), "D0");
}

TEST(SequenceTracker, LiveBatchDuringAProbeContiguousWithTheIndexEndsIt) {
  harness h(with_replay(true));
  h.start();
  h.replay(0);
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.probe(), "R1?");
  EXPECT_EQ(h.live(1), "C D1") << "no need to wait for a slow ring";
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.replay(1), "");  // the cancelled probe's reply is stray
  EXPECT_EQ(h.c().stray_replies, 1u);
  EXPECT_EQ(h.live(2), "D2");
}

TEST(SequenceTracker, LiveBatchDuringAProbeAboveAHoleWaitsForTheProbe) {
  harness h(with_replay(true));
  h.start();
  h.replay(0);
  h.end();
  EXPECT_EQ(h.probe(), "R1?");
  EXPECT_EQ(h.live(3), "");  // 1 and 2 are the tail the probe is asking for
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().gaps, 0u);
}

TEST(SequenceTracker, NoProbesWithoutAColdStartReplay) {
  harness h(with_replay(false));
  h.start();
  h.live(0);
  EXPECT_EQ(h.live(3), "G1-3 R1");
  h.replay(1);
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "") << "a live batch was seen: the END ends it";
  EXPECT_FALSE(h.t.probing());
}

TEST(SequenceTracker, ALiveBatchBeforeStartStartsTheCatchUp) {
  // The monitor's connect event and the first live message race in the executor.
  harness h(with_replay(true));
  EXPECT_EQ(h.live(5), "R0");
  EXPECT_EQ(h.start(), "");  // idempotent
  EXPECT_EQ(h.replay(4), "D4r D5");
}

// ST7: the first delivery of an incarnation says where the index's knowledge starts.
TEST(SequenceTracker, FirstBatchSaysWhetherTheWholeHistoryIsKnown) {
  {
    harness h(with_replay(true));
    h.start();
    h.replay(0);
    h.replay(1);
    EXPECT_EQ(h.firsts, (std::vector<uint64_t>{0})) << "ring from 0: complete";
  }
  {
    harness h(with_replay(true));
    h.start();
    h.replay(7000);  // the ring is shorter than the engine's history
    EXPECT_EQ(h.firsts, (std::vector<uint64_t>{7000}));
    EXPECT_EQ(h.c().cold_skipped, 7000u);
    h.end();
    h.live(7001);
    h.live(0);  // a new engine process: its history is whole again
    EXPECT_EQ(h.firsts, (std::vector<uint64_t>{7000, 0}));
  }
  {
    harness h(no_replay());
    h.live(40);
    EXPECT_EQ(h.firsts, (std::vector<uint64_t>{40}));
    EXPECT_EQ(h.c().cold_skipped, 40u) << "without replay the first batch is the baseline";
  }
}

// ST9: an engine's ROUTER drops replies past its high-water mark; the replies after the hole
// are abandoned and the rest asked for from the hole, at once, with no loss declared.
TEST(SequenceTracker, RepliesDroppedInTransitAreAskedForAgainNotLost) {
  harness h(with_replay(true));
  EXPECT_EQ(h.start(), "R0");
  EXPECT_EQ(h.live(9), "");
  for (uint64_t s = 0; s < 3; ++s) h.replay(s);
  // 3..5 dropped on the way; the executor closes the DEALER, so the rest of the abandoned reply
  // (7, 8, END) never reaches the new request.
  EXPECT_EQ(h.replay(6), "R3+");
  EXPECT_EQ(h.replay(3), "D3r");
  for (uint64_t s = 4; s < 8; ++s) h.replay(s);
  EXPECT_EQ(h.replay(8), "D8r D9");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().history_lost, 0u);
  EXPECT_EQ(h.c().cold_skipped, 0u);
  EXPECT_EQ(h.c().replay_holes, 1u);
  EXPECT_EQ(h.c().batches, 10u);
}

// A hole in a reply that live batches already filled is no hole: the reply goes on.
TEST(SequenceTracker, ReplyHoleThatLiveFilledNeedsNoReask) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(2), "G1-2 R1");
  EXPECT_EQ(h.replay(1), "D1r D2");
  EXPECT_EQ(h.replay(3), "D3r") << "2 is delivered: 3 is the next one needed";
  EXPECT_EQ(h.c().replay_holes, 0u);
}

// ST10: the END got through but replies before it did not (it found room in the queue after the
// engine's loop had dropped them): what sits below the buffered live batches is asked again.
TEST(SequenceTracker, EndAfterDroppedRepliesContinuesInsteadOfDeclaringALoss) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(6), "G1-6 R1");
  h.replay(1);
  EXPECT_EQ(h.replay(2), "D2r");
  EXPECT_EQ(h.end(), "R3+") << "the ring had 3..5 (6 was published before the request)";
  EXPECT_EQ(h.replay(3), "D3r");
  h.replay(4);
  EXPECT_EQ(h.replay(5), "D5r D6");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().history_lost, 0u);
}

// ST8: only a reply starting later than asked says the ring lost history; in a resumed (warm)
// tracker that is a loss, in a cold one a skip.
TEST(SequenceTracker, ResumeAsksFromTheNextSeqAndCarriesOnWarm) {
  harness h(resumed(101));
  EXPECT_EQ(h.start(), "R101");
  EXPECT_EQ(h.t.phase(), tracker_phase::replaying);
  EXPECT_EQ(h.t.history_from(), std::optional<uint64_t>(0));
  EXPECT_EQ(h.live(105), "");
  EXPECT_EQ(h.replay(101), "D101r");
  for (uint64_t s = 102; s < 104; ++s) h.replay(s);
  EXPECT_EQ(h.replay(104), "D104r D105");
  EXPECT_EQ(h.end(), "");
  EXPECT_TRUE(h.firsts.empty()) << "a resumed incarnation is not a new history (ST7)";
  EXPECT_EQ(h.c().cold_skipped, 0u);
  EXPECT_EQ(h.start(), "") << "start is once";
}

TEST(SequenceTracker, ResumeBeyondTheRingIsHistoryLostWithItsOwnReason) {
  harness h(resumed(101, 40));
  EXPECT_EQ(h.start(), "R101");
  EXPECT_EQ(h.replay(150), "L101-150:resume_outside_ring D150r");
  EXPECT_EQ(h.c().history_lost, 1u);
  EXPECT_EQ(h.c().batches_lost, 49u);
  EXPECT_EQ(h.t.history_from(), std::optional<uint64_t>(40)) << "the consumer clears; the "
                                                                   "tracker's position stays";
}

TEST(SequenceTracker, ResumeAgainstAnEmptyRingBelowTheLiveStreamIsLostToo) {
  harness h(resumed(101));
  h.start();
  EXPECT_EQ(h.live(300), "");
  EXPECT_EQ(h.end(), "R101") << "300 came after the request: asked again (ST11)";
  EXPECT_EQ(h.end(), "L101-300:resume_outside_ring D300");
}

TEST(SequenceTracker, ResumeAgainstARestartedEngineIsANewIncarnation) {
  harness h(resumed(5001));
  h.start();
  EXPECT_EQ(h.end(), "P1") << "nothing from 5001 in the ring; no live batch yet (ST6)";
  EXPECT_EQ(h.live(0), "I0/5001 D0") << "seq 0 far below the restored position (ST1)";
  EXPECT_EQ(h.c().resets, 1u);
  EXPECT_EQ(h.c().history_lost, 0u);
}

TEST(SequenceTracker, ALiveSeqJustBelowTheResumePointIsANewIncarnationNotALateOne) {
  // Caught up from the ring alone, a live seq close behind is a late duplicate (the window);
  // below the resume point no live batch of the same engine can arrive at all.
  harness h(resumed(5001));
  h.start();
  EXPECT_EQ(h.replay(5001), "D5001r");
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.live(4990), "I4990/5002 R0");
  harness late(resumed(5001));
  late.start();
  late.replay(5001);
  late.replay(5002);
  late.end();
  EXPECT_EQ(late.live(5001), "") << "above the resume point: the SUB is behind the ring";
  EXPECT_EQ(late.c().duplicates, 1u);
}

TEST(SequenceTracker, ResumeWithoutReplayEndpointWaitsForTheNextLiveBatch) {
  harness h(resumed(10, 0, /*replay=*/false));
  EXPECT_EQ(h.start(), "");
  EXPECT_EQ(h.live(10), "D10");
  EXPECT_EQ(h.live(12), "G11-12 L11-12:no_replay_endpoint D12");
}

TEST(SequenceTracker, PhaseIsOneValueThroughACatchUp) {
  harness h(with_replay(true));
  EXPECT_EQ(h.t.phase(), tracker_phase::unstarted);
  h.start();
  EXPECT_EQ(h.t.phase(), tracker_phase::replaying);
  h.replay(0);
  h.end();
  EXPECT_EQ(h.t.phase(), tracker_phase::probe_wait);
  h.probe();
  EXPECT_EQ(h.t.phase(), tracker_phase::replaying);
  h.live(1);
  EXPECT_EQ(h.t.phase(), tracker_phase::streaming);
  EXPECT_STREQ(to_string(h.t.phase()), "streaming");
}

// The whole of ST8-ST11 against a model of a busy engine: a ring far longer than its ROUTER's
// queue, replies past the queue dropped but for a few stragglers, END lost half the time, live
// batches arriving throughout. Every seed must end exact: every seq from 0 once, in order, and
// nothing declared lost or skipped (the ring held all of it).
void busy_engine_catch_up(size_t max_buffered, uint64_t live_one_in) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    tracker_options o = with_replay(true);
    o.max_buffered_batches = max_buffered;
    tracker t(o);
    tracker::actions out;
    uint64_t published = 3000 + rng() % 2000;  // already in the ring when kvrelay starts
    std::vector<uint64_t> got;
    std::deque<uint64_t> reply;  // what the engine's current reply will still deliver
    bool end_due = false;
    auto serve = [&](uint64_t from) {
      reply.clear();
      size_t queued = 0;
      for (uint64_t s = from; s < published; ++s, ++queued)
        if (queued < 1000 || rng() % 50 == 0) reply.push_back(s);  // the HWM, and stragglers
      end_due = queued < 1000 || rng() % 2 == 0;
    };
    auto run = [&]() {
      for (auto& a : out) {
        if (a.kind == action_kind::deliver) got.push_back(a.seq);
        if (a.kind == action_kind::request_replay) serve(a.seq);
        EXPECT_NE(a.kind, action_kind::history_lost) << "seed " << seed;
      }
      out.clear();
    };
    t.start(out);
    run();
    for (int step = 0; step < 100000 && (t.phase() != tracker_phase::streaming || !reply.empty());
         ++step) {
      if (rng() % live_one_in == 0) {
        t.on_live(published, "p" + std::to_string(published), out);
        ++published;
      } else if (!reply.empty()) {
        const uint64_t s = reply.front();
        reply.pop_front();
        t.on_replay(s, "p" + std::to_string(s), out);
      } else if (end_due) {
        end_due = false;
        t.on_replay_end(out);
      } else if (t.replay_answering()) {
        t.on_replay_timeout(out);  // the stall
      } else if (t.probing()) {
        t.on_probe_due(out);
      }
      run();
    }
    ASSERT_EQ(t.phase(), tracker_phase::streaming) << "seed " << seed;
    ASSERT_EQ(got.size(), published) << "seed " << seed;
    for (uint64_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i) << "seed " << seed;
    EXPECT_EQ(t.counters().cold_skipped, 0u);
    EXPECT_EQ(t.counters().replays_failed, 0u);
    EXPECT_GT(t.counters().replays_continued, 0u) << "seed " << seed;
    if (max_buffered < 100) {
      EXPECT_GT(t.counters().batches_shed, 0u) << "seed " << seed;
    }
  }
}

TEST(SequenceTracker, BusyEngineCatchUpEndsExactWhateverTheReplyDrops) {
  busy_engine_catch_up(100000, 8);
}

// ST2: the same with a reorder buffer far smaller than what arrives live during the catch-up
// (one live batch in three steps): the buffer sheds, the ring supplies, nothing is lost.
TEST(SequenceTracker, ST2_BusyEngineCatchUpThroughATinyBufferEndsExact) {
  busy_engine_catch_up(16, 3);
}

// ST1 without a live watermark: the live and replay sockets are not ordered with each other, so
// the live copy of a batch the ring already delivered may arrive after it, seq 0 included. Only
// the bytes tell it from a restarted engine's batch of the same seq.
TEST(SequenceTracker, LateLiveCopyOfAReplayedBatchIsADuplicateEvenAtSeqZero) {
  harness h(with_replay(true));
  EXPECT_EQ(h.start(), "R0");
  EXPECT_EQ(h.replay(0), "D0r");
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.live(0), "") << "the late live copy of seq 0";
  EXPECT_EQ(h.live(1), "");
  EXPECT_EQ(h.live(2), "D2");
  EXPECT_EQ(h.c().resets, 0u);
  EXPECT_EQ(h.c().duplicates, 2u);
}

TEST(SequenceTracker, RestartedEngineAfterACatchUpFromTheRingAloneIsANewIncarnation) {
  harness h(with_replay(true));
  h.start();
  for (uint64_t s = 0; s < 60; ++s) h.replay(s);
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.live_restarted(0), "I0/60 D0") << "same seq, other bytes: a new engine";
  EXPECT_EQ(h.live_restarted(1), "D1");
  EXPECT_EQ(h.c().resets, 1u);
  EXPECT_EQ(h.c().duplicates, 0u);
}

TEST(SequenceTracker, FirstLiveSeqBelowWhatTheRingNeverDeliveredIsANewIncarnation) {
  harness h(with_replay(true));
  h.start();
  EXPECT_EQ(h.replay(3000), "D3000r");  // the ring had lost 0..2999 (cold: skipped)
  h.end();
  EXPECT_EQ(h.live(5), "I5/3001 R0") << "seq 5 was never delivered: not a late copy";
}

// A buffer bound of 0 is one batch, not none: the first live batch of a catch-up waits, the
// second overflows the bound and both are shed (half of one batch is none).
TEST(SequenceTracker, ST2_ZeroBufferedBatchesIsClampedToOne) {
  tracker_options o = with_replay(true);
  o.max_buffered_batches = 0;
  harness h(o);
  EXPECT_EQ(h.start(), "R0");
  EXPECT_EQ(h.live(5), "");
  EXPECT_EQ(h.c().buffered, 1u) << "one batch fits";
  EXPECT_EQ(h.c().batches_shed, 0u);
  EXPECT_EQ(h.live(6), "");
  EXPECT_EQ(h.c().buffer_overflows, 1u) << "two do not";
  EXPECT_EQ(h.c().batches_shed, 2u);
  EXPECT_EQ(h.c().buffered, 0u);
}

// The byte bound at its edges: a buffer exactly at the bound is not full; one past it sheds to
// exactly half, newest first.
TEST(SequenceTracker, ST2_TheByteBoundHoldsExactlyItsBytesAndShedsToExactlyHalf) {
  tracker_options o = with_replay();
  o.max_buffered_bytes = 8;  // four 2-byte payloads
  harness h(o);
  h.live(0);
  EXPECT_EQ(h.live(5), "G1-5 R1");
  h.live(6);
  h.live(7);
  EXPECT_EQ(h.live(8), "");
  EXPECT_EQ(h.c().buffer_overflows, 0u) << "8 bytes fit a bound of 8";
  EXPECT_EQ(h.c().buffered_bytes, 8u);
  EXPECT_EQ(h.live(9), "");
  EXPECT_EQ(h.c().buffer_overflows, 1u);
  EXPECT_EQ(h.c().batches_shed, 3u) << "9, 8 and 7: down to 4 bytes, not below";
  EXPECT_EQ(h.c().buffered_bytes, 4u);
  EXPECT_EQ(h.c().buffered, 2u);
}

// A replayed batch larger than the whole byte bound, with no live batch left to shed: the repair
// gives up (cancels, delivers what it holds) instead of waiting on a buffer it cannot fit. A
// single shed live batch is enough not to give up.
TEST(SequenceTracker, ST2_AFullBufferWithNothingLiveToShedGivesUpTheRepair) {
  tracker_options o = with_replay();
  o.max_buffered_bytes = 1;  // less than any one payload
  harness h(o);
  h.live(0);
  EXPECT_EQ(h.live(5), "G1-5 R1");
  EXPECT_EQ(h.replay(1), "D1r") << "the live 5 is shed to make room: one shed is enough";
  EXPECT_EQ(h.c().batches_shed, 1u);
  EXPECT_TRUE(h.t.replay_outstanding());
  EXPECT_EQ(h.replay(2), "C D2r") << "nothing live to shed: give up, deliver what is held";
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.c().buffer_overflows, 2u);
  EXPECT_EQ(h.c().buffered, 0u);
}

// Everything buffered was shed, and a live batch came after: when the ring then answers nothing,
// the hole is lost only up to what the live stream had shown at the request; the later live
// batch is not delivered over the shed ones: they are asked for again.
TEST(SequenceTracker, ST2_AfterEverythingWasShedALaterBatchWaitsAboveTheLostHole) {
  tracker_options o = with_replay();
  o.max_buffered_batches = 1;  // half of it is none: an overflow sheds every live batch
  harness h(o);
  h.live(0);
  EXPECT_EQ(h.live(5), "G1-5 R1");
  EXPECT_EQ(h.live(6), "");
  EXPECT_EQ(h.c().batches_shed, 2u);
  EXPECT_EQ(h.c().buffered, 0u);
  EXPECT_EQ(h.live(7), "");
  EXPECT_EQ(h.end(), "L1-6:history_lost R6");
  EXPECT_EQ(h.replay(6), "D6r") << "7 waited, and is shed again to fit 6";
  EXPECT_EQ(h.end(), "R7+");
  EXPECT_EQ(h.replay(7), "D7r");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().batches_lost, 5u);
}

// The ring sends each seq once; a repeat inside one reply is noise, dropped and counted.
TEST(SequenceTracker, AReplyRepeatedWithinItsReplyIsADuplicate) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(3), "G1-3 R1");
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(1), "");
  EXPECT_EQ(h.c().duplicates, 1u);
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.c().replay_holes, 0u);
}

// replays_continued counts the requests that ask for the rest of a reply, and only those.
TEST(SequenceTracker, OnlyARequestForTheRestOfAReplyCountsAsContinued) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(3), "G1-3 R1");
  h.replay(1);
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().replays_requested, 1u);
  EXPECT_EQ(h.c().replays_continued, 0u) << "a repair";
  EXPECT_EQ(h.live(6), "G4-6 R4");
  EXPECT_EQ(h.replay(4), "D4r");
  EXPECT_EQ(h.timeout(), "R5+");
  EXPECT_EQ(h.c().replays_continued, 1u);
}

// ST6: the late subscription's repair is over once its reply ended; a later gap's replayed
// batches are an ordinary repair, not the tail.
TEST(SequenceTracker, ALateJoinRepairEndsWithItsReply) {
  harness h(with_replay(true));
  h.start();
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.live(3), "R0");
  h.replay(0);
  h.replay(1);
  EXPECT_EQ(h.replay(2), "D2r D3");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().tail_recovered, 3u);
  EXPECT_EQ(h.live(4), "D4");
  EXPECT_EQ(h.live(7), "G5-7 R5");
  h.replay(5);
  EXPECT_EQ(h.replay(6), "D6r D7");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().tail_recovered, 3u) << "5 and 6 repaired a gap";
  EXPECT_EQ(h.c().gaps, 1u);
}

// ST6: a late subscription's repair that is given up is over too.
TEST(SequenceTracker, ALateJoinRepairGivenUpEndsToo) {
  tracker_options o = with_replay(true);
  o.max_replay_attempts = 1;
  harness h(o);
  h.start();
  EXPECT_EQ(h.end(), "P1");
  EXPECT_EQ(h.live(3), "R0");
  EXPECT_EQ(h.timeout(), "C D3");
  EXPECT_EQ(h.live(4), "D4");
  EXPECT_EQ(h.live(7), "G5-7 R5");
  h.replay(5);
  EXPECT_EQ(h.replay(6), "D6r D7");
  EXPECT_EQ(h.c().tail_recovered, 0u) << "5 and 6 repaired a gap";
}

// The gauge follows the buffer from the first batch a gap holds back.
TEST(SequenceTracker, TheBufferGaugeCountsTheBatchAGapHoldsBack) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(4), "G1-4 R1");
  EXPECT_EQ(h.c().buffered, 1u);
  EXPECT_EQ(h.c().buffered_bytes, 2u);
}

// The ZMQ source hands frames by move: the tracker must never need a copy.
struct move_only {
  std::unique_ptr<std::string> s;
  size_t size() const { return s ? s->size() : 0; }
  const char* data() const { return s ? s->data() : ""; }
};

TEST(SequenceTracker, WorksWithMoveOnlyPayloads) {
  tracker_options o = with_replay();
  sequence_tracker<move_only> t(o);
  sequence_tracker<move_only>::actions out;
  t.on_live(0, move_only{std::make_unique<std::string>("a")}, out);
  t.on_live(2, move_only{std::make_unique<std::string>("c")}, out);
  t.on_replay(1, move_only{std::make_unique<std::string>("b")}, out);
  std::string got;
  for (auto& a : out)
    if (a.kind == action_kind::deliver) got += *a.payload.s;
  EXPECT_EQ(got, "abc");
}

}  // namespace
}  // namespace kvrelay::ingress
