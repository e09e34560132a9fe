// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Unit tests of the ingress sequence state machine: every rule of sequence_tracker.hpp, driven
// through its public API with string payloads and read back as a compact action trace.

#include "actors/ingress/sequence_tracker.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace kvrelay::ingress {
namespace {

using tracker = sequence_tracker<std::string>;

std::string payload(uint64_t seq) { return "p" + std::to_string(seq); }

// Renders actions as "D3 D4r G2-5 R2 C L2-5:history_lost I0/6", and checks on the way that every
// delivered payload is the one fed for that seq (no mix-ups when reordering).
std::string trace(const tracker::actions& out) {
  std::ostringstream os;
  for (const auto& a : out) {
    if (a.kind == action_kind::first_batch) continue;  // rule 7 has its own tests (firsts)
    if (os.tellp() > 0) os << ' ';
    switch (a.kind) {
      case action_kind::deliver:
        os << 'D' << a.seq << (a.replayed ? "r" : "");
        if (a.payload != payload(a.seq)) os << "!BADPAYLOAD(" << a.payload << ')';
        break;
      case action_kind::gap_detected: os << 'G' << a.seq << '-' << a.seq2; break;
      case action_kind::request_replay: os << 'R' << a.seq; break;
      case action_kind::cancel_replay: os << 'C'; break;
      case action_kind::history_lost:
        os << 'L' << a.seq << '-' << a.seq2 << ':' << to_string(a.reason);
        break;
      case action_kind::incarnation_reset: os << 'I' << a.seq << '/' << a.seq2; break;
      case action_kind::schedule_probe: os << 'P' << a.seq2; break;
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
  std::string replay(uint64_t s) {
    return run([&](auto& out) { t.on_replay(s, payload(s), out); });
  }
  std::string end() { return run([&](auto& out) { t.on_replay_end(out); }); }
  std::string timeout() { return run([&](auto& out) { t.on_replay_timeout(out); }); }
  std::string probe() { return run([&](auto& out) { t.on_probe_due(out); }); }
  // The seqs of every first_batch action (rule 7) since the harness was made.
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

TEST(SequenceTracker, HoleInsideTheReplayStreamIsLost) {
  // vLLM consumes a seq on a failed send that never reaches its ring.
  harness h(with_replay());
  h.live(0);
  h.live(5);
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(3), "L2-3:history_lost D3r");
  EXPECT_EQ(h.replay(4), "D4r D5");
}

TEST(SequenceTracker, ColdStartAsksForEverythingAndMissingHistoryIsNoLoss) {
  harness h(with_replay(true));
  EXPECT_EQ(h.start(), "R0");
  EXPECT_EQ(h.replay(7), "D7r");
  EXPECT_EQ(h.replay(8), "D8r");
  EXPECT_EQ(h.end(), "P1");  // no live batch yet: rule 6 will ask again
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
  // The SUB joined late and missed 0..2: they are in the ring now. Not a gap (rule 6).
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
  EXPECT_EQ(h.timeout(), "R0");
  EXPECT_EQ(h.timeout(), "C D5 D6");
  EXPECT_EQ(h.c().replays_failed, 2u);
  EXPECT_EQ(h.c().history_lost, 0u);
  EXPECT_EQ(h.replay(0), "");  // late reply of the abandoned replay
  EXPECT_EQ(h.c().stray_replies, 1u);
}

TEST(SequenceTracker, TimeoutResumesFromWhatIsStillMissing) {
  harness h(with_replay());
  h.live(0);
  h.live(5);
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(2), "D2r");
  EXPECT_EQ(h.timeout(), "R3");
  EXPECT_EQ(h.replay(3), "D3r");
  EXPECT_EQ(h.replay(4), "D4r D5");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().replays_requested, 2u);
  EXPECT_EQ(h.c().replays_failed, 1u);
}

TEST(SequenceTracker, ProgressRestoresTheAttemptBudget) {
  tracker_options o = with_replay();
  o.max_replay_attempts = 2;
  harness h(o);
  h.live(0);
  h.live(9);
  EXPECT_EQ(h.timeout(), "R1");
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.timeout(), "R2");  // not given up: the reply reset the count
  EXPECT_EQ(h.timeout(), "C L2-9:replay_failed D9");
}

TEST(SequenceTracker, RepeatedTimeoutsGiveUpAndDeclareTheLoss) {
  tracker_options o = with_replay();
  o.max_replay_attempts = 2;
  harness h(o);
  h.live(0);
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.timeout(), "R1");
  EXPECT_EQ(h.timeout(), "C L1-5:replay_failed D5 D6");
  EXPECT_FALSE(h.t.replay_outstanding());
  EXPECT_EQ(h.end(), "");  // END of the abandoned request
  EXPECT_EQ(h.c().stray_replies, 1u);
  EXPECT_EQ(h.live(7), "D7");
}

TEST(SequenceTracker, BufferOverflowByCountGivesUpTheReplay) {
  tracker_options o = with_replay();
  o.max_buffered_batches = 3;
  harness h(o);
  h.live(0);
  EXPECT_EQ(h.live(5), "G1-5 R1");
  EXPECT_EQ(h.live(6), "");
  EXPECT_EQ(h.live(7), "");
  EXPECT_EQ(h.c().buffered, 3u);
  EXPECT_EQ(h.live(8), "C L1-5:buffer_overflow D5 D6 D7 D8");
  EXPECT_EQ(h.c().buffer_overflows, 1u);
  EXPECT_EQ(h.c().buffered, 0u);
  EXPECT_EQ(h.replay(1), "");
  EXPECT_EQ(h.c().stray_replies, 1u);
}

TEST(SequenceTracker, BufferOverflowByBytesGivesUpTheReplay) {
  tracker_options o = with_replay();
  o.max_buffered_bytes = 7;  // "p5" + "p6" + "p7" = 6 bytes fit, "p8" does not
  harness h(o);
  h.live(0);
  h.live(5);
  h.live(6);
  EXPECT_EQ(h.live(7), "");
  EXPECT_EQ(h.live(8), "C L1-5:buffer_overflow D5 D6 D7 D8");
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
}

TEST(SequenceTracker, LiveLossAfterTheRingWasReadTriggersAFollowUpReplay) {
  harness h(with_replay());
  h.live(0);
  EXPECT_EQ(h.live(3), "G1-3 R1");
  h.live(4);
  h.live(7);  // 5 and 6 lost live after the request: the ring may not have had them yet
  EXPECT_EQ(h.replay(1), "D1r");
  EXPECT_EQ(h.replay(2), "D2r D3 D4");
  EXPECT_EQ(h.end(), "R5");
  EXPECT_EQ(h.replay(5), "D5r");
  EXPECT_EQ(h.replay(6), "D6r D7");
  EXPECT_EQ(h.end(), "");
  EXPECT_EQ(h.c().history_lost, 0u);
  EXPECT_EQ(h.c().replays_succeeded, 2u);
}

TEST(SequenceTracker, FollowUpReplayThatCannotFillTheHoleEndsWithALoss) {
  harness h(with_replay());
  h.live(0);
  h.live(3);
  h.live(7);
  h.replay(1);
  h.replay(2);
  EXPECT_EQ(h.end(), "R4");
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

// Rule 6, the cold-start tail (issue 16 item 1): the engine published 2 and 3 after the ring was
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
  EXPECT_EQ(h.probe(), "R2");
  EXPECT_EQ(h.replay(2), "D2r");
  EXPECT_EQ(h.replay(3), "D3r");
  EXPECT_EQ(h.end(), "P2");
  EXPECT_EQ(h.probe(), "R4");
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
  EXPECT_EQ(h.probe(), "R0");
  EXPECT_EQ(h.end(), "P2");
  EXPECT_EQ(h.probe(), "R0");
  EXPECT_EQ(h.end(), "P3");
  EXPECT_EQ(h.probe(), "R0");
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
  EXPECT_EQ(h.probe(), "R1");
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
  EXPECT_EQ(h.probe(), "R1");
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

// Rule 7: the first delivery of an incarnation says where the index's knowledge starts.
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

// The ZMQ source hands frames by move: the tracker must never need a copy.
struct move_only {
  std::unique_ptr<std::string> s;
  size_t size() const { return s ? s->size() : 0; }
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
