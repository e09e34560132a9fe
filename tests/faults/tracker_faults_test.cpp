// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Deterministic reproductions of two sequence-tracker faults first seen end to end in this folder
// (AdminPort.ReadyzFlipsWhenTheServerAnswers wedged once; EngineRestart.AfterCatchingUpOnlyFromReplay).
// Pure logic: the exact order of live batches, replay replies and END that triggers each.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actors/ingress/sequence_tracker.hpp"

namespace kvrelay::ingress {
namespace {

using tracker = sequence_tracker<std::string>;

std::vector<uint64_t> delivered(const tracker::actions& out) {
  std::vector<uint64_t> seqs;
  for (const auto& a : out)
    if (a.kind == action_kind::deliver) seqs.push_back(a.seq);
  return seqs;
}

size_t count(const tracker::actions& out, action_kind k) {
  size_t n = 0;
  for (const auto& a : out) n += a.kind == k;
  return n;
}

// The engine publishes while the daemon starts: live 0..2 arrive during the cold-start replay;
// then the ring's replies for the same seqs arrive, then END. Everything must be delivered once;
// the first version set the next expected seq to the reply cursor (3) at END, above the whole
// buffer, so nothing was ever delivered and every END asked for a new replay from 3 (a replay
// storm against the engine's ROUTER).
TEST(SequenceTrackerFaults, ColdReplayOverlappingBufferedLiveBatchesDelivers) {
  tracker t(tracker_options{true, true, 4096, size_t{64} << 20, 3});
  tracker::actions out;
  t.start(out);
  ASSERT_EQ(count(out, action_kind::request_replay), 1u);
  for (uint64_t s = 0; s < 3; ++s) t.on_live(s, "live" + std::to_string(s), out);
  for (uint64_t s = 0; s < 3; ++s) t.on_replay(s, "ring" + std::to_string(s), out);
  t.on_replay_end(out);
  EXPECT_EQ(delivered(out), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(count(out, action_kind::request_replay), 1u) << "would loop: END → replay → END";
  EXPECT_FALSE(t.replay_outstanding());
  out.clear();
  t.on_live(3, "live3", out);
  EXPECT_EQ(delivered(out), (std::vector<uint64_t>{3}));
}

// The daemon caught up from the replay ring only (the engine published before the SUB joined,
// then went quiet) and the engine restarted: its seqs start at 0 again. No live seq was ever
// seen, so "seq <= last live" cannot fire and the new engine's batches 0..N are dropped as
// duplicates while the old incarnation's index stays on the server.
TEST(SequenceTrackerFaults, EngineRestartAfterReplayOnlyCatchUpIsANewIncarnation) {
  tracker t(tracker_options{true, true, 4096, size_t{64} << 20, 3});
  tracker::actions out;
  t.start(out);
  for (uint64_t s = 0; s < 60; ++s) t.on_replay(s, "old", out);
  t.on_replay_end(out);
  ASSERT_EQ(delivered(out).size(), 60u);
  out.clear();
  t.on_live(0, "new0", out);  // the restarted engine's first batch
  const bool reset = count(out, action_kind::incarnation_reset) == 1;
  const bool delivered_new = !delivered(out).empty() || count(out, action_kind::request_replay);
  EXPECT_TRUE(reset) << "seq 0 after 0..59 were delivered must be a new incarnation";
  EXPECT_TRUE(delivered_new) << "the new engine's batch was dropped as a duplicate";
  EXPECT_EQ(t.counters().duplicates, 0u);
}

}  // namespace
}  // namespace kvrelay::ingress
