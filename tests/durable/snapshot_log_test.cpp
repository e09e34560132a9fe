// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The delta log's format and the restore's decision (durable/format/snapshot_log.hpp LF1-LF6,
// LR1-LR8), pure: bytes in, records and decisions out.

#include "durable/format/snapshot_log.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kvrelay::snapshot {
namespace {

constexpr uint64_t key = 0x1234abcd5678ef90ULL;

evidence started(double t) {
  evidence e;
  e.start_time = t;
  return e;
}

log_record rec(record_kind k, uint32_t g, uint64_t seq) {
  log_record r;
  r.kind = k;
  r.generation = g;
  r.seq = seq;
  return r;
}

log_record batch(uint32_t g, uint64_t seq, std::string_view payload = "payload") {
  auto r = rec(record_kind::batch, g, seq);
  r.payload = payload;
  return r;
}

log_record begin(uint32_t g, uint64_t seq, bool cold, evidence e = started(100)) {
  auto r = rec(record_kind::begin, g, seq);
  r.cold = cold;
  r.engine = std::move(e);
  return r;
}

log_record lost(uint32_t g, uint64_t first_missing, uint64_t first_available) {
  auto r = rec(record_kind::history_lost, g, first_missing);
  r.first_available = first_available;
  r.reason = 1;
  return r;
}

std::string segment(const std::vector<log_record>& records, uint64_t number = 0) {
  std::string out = encode_header(segment_header{key, number});
  for (const auto& r : records) out += encode_bytes(r);
  return out;
}

// -- format ------------------------------------------------------------------------------------

// LF1, LF2, LF4: every kind round-trips, in order, with its fields.
TEST(DeltaLogFormat, EveryRecordKindRoundTrips) {
  auto ev = rec(record_kind::evidence, 1, 9);
  ev.engine.start_time = 1767225600.25;
  ev.engine.lifetime_id = "sgl-kv-epoch=3f2a";
  auto reset = rec(record_kind::reset, 1, 0);
  reset.previous_seq = 41;
  const std::string big(3000, 'x');  // outlives the records that point into it
  const std::vector<log_record> in = {begin(0, 0, true), rec(record_kind::first_batch, 0, 0),
                                      batch(0, 0, big), batch(0, 1, ""),
                                      lost(0, 2, 7), batch(0, 7), rec(record_kind::asleep, 0, 8),
                                      reset, ev};
  const std::string bytes = segment(in, 42);
  const auto s = scan_segment(bytes, key);
  ASSERT_EQ(s.fault, log_fault::none) << s.detail;
  EXPECT_EQ(s.header.number, 42u);
  EXPECT_EQ(s.valid_bytes, bytes.size());
  ASSERT_EQ(s.records.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& a = in[i];
    const auto& b = s.records[i].record;
    EXPECT_EQ(a.kind, b.kind) << i;
    EXPECT_EQ(a.generation, b.generation) << i;
    EXPECT_EQ(a.seq, b.seq) << i;
    EXPECT_EQ(a.payload, b.payload) << i;
    EXPECT_EQ(a.cold, b.cold) << i;
    EXPECT_EQ(a.engine.start_time, b.engine.start_time) << i;
    EXPECT_EQ(a.engine.lifetime_id, b.engine.lifetime_id) << i;
    EXPECT_EQ(a.first_available, b.first_available) << i;
    EXPECT_EQ(a.previous_seq, b.previous_seq) << i;
    EXPECT_EQ(a.reason, b.reason) << i;
  }
}

// LF6: deterministic, little-endian, and a batch costs its payload plus 28 bytes.
TEST(DeltaLogFormat, DeterministicLittleEndianAndTwentyEightBytesPerBatch) {
  EXPECT_EQ(encode_bytes(batch(3, 77)), encode_bytes(batch(3, 77)));
  const auto b = encode_bytes(batch(3, 0x0102030405060708ULL, "abc"));
  EXPECT_EQ(b.size(), 3 + record_head_bytes + record_trailer_bytes);
  EXPECT_EQ(b.substr(0, 4), std::string("\x03\0\0\0", 4)) << "body length";
  EXPECT_EQ(b.substr(12, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8)) << "seq";
  EXPECT_EQ(encode_header({key, 1}).size(), log_header_bytes);
}

// LF2, LR1: every prefix of a segment is its records up to the cut, and says torn when a record
// was cut; never a crash.
TEST(DeltaLogFormat, EveryPrefixIsAValidPrefixAndATornTail) {
  const std::vector<log_record> in = {begin(0, 0, true), batch(0, 0), batch(0, 1, "xyz"),
                                      lost(0, 2, 5), batch(0, 5)};
  const std::string bytes = segment(in);
  std::vector<size_t> ends{log_header_bytes};
  for (const auto& r : in) ends.push_back(ends.back() + encode_bytes(r).size());
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    const auto s = scan_segment(std::string_view(bytes).substr(0, cut), key);
    size_t whole = 0;
    while (whole + 1 < ends.size() && ends[whole + 1] <= cut) ++whole;
    if (cut < log_header_bytes) {
      EXPECT_TRUE(s.fault == log_fault::torn) << cut << " " << to_string(s.fault);
      continue;
    }
    EXPECT_EQ(s.records.size(), whole) << cut;
    EXPECT_EQ(s.valid_bytes, ends[whole]) << cut;
    EXPECT_EQ(s.fault, cut == ends[whole] ? log_fault::none : log_fault::torn) << cut;
  }
}

// LF2: one flipped bit anywhere in a record is corruption; the records before it stand.
TEST(DeltaLogFormat, AFlippedBitIsCorruptionAndTheRecordsBeforeItStand) {
  const std::vector<log_record> in = {begin(0, 0, true), batch(0, 0), batch(0, 1, "xyz")};
  const std::string bytes = segment(in);
  const size_t second = log_header_bytes + encode_bytes(in[0]).size();
  for (size_t at = second; at < second + encode_bytes(in[1]).size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = bytes;
      b[at] = static_cast<char>(b[at] ^ (1 << bit));
      const auto s = scan_segment(b, key);
      ASSERT_NE(s.fault, log_fault::none) << at << ":" << bit;
      EXPECT_EQ(s.records.size(), 1u) << at << ":" << bit;
      EXPECT_EQ(s.valid_bytes, second);
    }
  }
}

// LF1: another magic, version or pipeline is not this pipeline's log.
TEST(DeltaLogFormat, AnotherMagicVersionOrPipelineIsNotThisLog) {
  const std::string bytes = segment({batch(0, 0)});
  EXPECT_EQ(scan_segment(bytes, key + 1).fault, log_fault::other_pipeline);
  std::string v = bytes;
  v[8] = 9;
  EXPECT_EQ(scan_segment(v, key).fault, log_fault::not_a_log);
  EXPECT_EQ(scan_segment("KVRSNAP\0 a snapshot", key).fault, log_fault::not_a_log);
  EXPECT_TRUE(scan_segment(bytes, key + 1).records.empty());
}

// LF3: a length that lies (checksum recomputed) costs an error, never memory; LF5: a position
// that goes backwards is not the writer's.
TEST(DeltaLogFormat, LyingLengthsAndBackwardPositionsAreRejected) {
  std::string huge = encode_header({key, 0}) + encode_bytes(batch(0, 0));
  huge[log_header_bytes + 3] = '\x7f';  // body length ~2 GiB
  EXPECT_EQ(scan_segment(huge, key).fault, log_fault::corrupt);
  const auto s = scan_segment(segment({batch(1, 5), batch(0, 6)}), key);
  EXPECT_EQ(s.fault, log_fault::corrupt);
  EXPECT_EQ(s.records.size(), 1u);
  EXPECT_NE(s.detail.find("backwards"), std::string::npos) << s.detail;
}

// Random bytes behind a valid header never crash the scanner (a smoke fuzz).
TEST(DeltaLogFormat, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string b = encode_header({key, 0});
    const size_t n = rng() % 200;
    for (size_t j = 0; j < n; ++j) b.push_back(static_cast<char>(rng()));
    const auto s = scan_segment(b, key);
    EXPECT_LE(s.valid_bytes, b.size());
  }
}

// -- restore decisions (LR2-LR8) ---------------------------------------------------------------

std::vector<log_entry> entries(const std::vector<log_record>& records) {
  std::vector<log_entry> out;
  size_t at = log_header_bytes;
  for (const auto& r : records) {
    const size_t n = encode_bytes(r).size();
    log_entry e;
    e.record = r;
    e.record.payload = {};
    e.offset = at;
    e.end = at + n;
    at += n;
    out.push_back(e);
  }
  return out;
}

pipeline_snapshot snap_at(uint32_t g, uint64_t next, evidence e = started(100)) {
  pipeline_snapshot s;
  s.generation = g;
  s.next_seq = next;
  s.history_from = 0;
  s.engine = std::move(e);
  return s;
}

// Nothing on disk: the first start, cold, generation 0.
TEST(DeltaLogRestore, NothingIsTheColdStartOfGenerationZero) {
  const auto d = decide_restore(nullptr, {}, started(100));
  EXPECT_TRUE(d.cold);
  EXPECT_FALSE(d.discard);
  EXPECT_EQ(d.generation, 0u);
}

// LR3, LR5, LR6: a snapshot and the log after it: replay what follows its next seq, resume
// after the last batch.
TEST(DeltaLogRestore, SnapshotThenTheLogsBatchesThenTheRing) {
  const auto s = snap_at(0, 3);
  const auto log = entries({begin(0, 0, true), rec(record_kind::first_batch, 0, 0), batch(0, 0),
                            batch(0, 1), batch(0, 2), batch(0, 3), batch(0, 4)});
  const auto d = decide_restore(&s, log, started(100));
  ASSERT_FALSE(d.cold) << d.detail;
  EXPECT_TRUE(d.use_snapshot);
  EXPECT_EQ(d.replay_from, 5u);
  EXPECT_EQ(d.replay_to, 7u);
  EXPECT_EQ(d.replay_batches, 2u);
  EXPECT_EQ(d.resume_next, 5u);
  EXPECT_EQ(d.history_from, 0u);
  EXPECT_EQ(d.generation, 0u);
}

// LR3: no snapshot yet, but the log holds its generation from a cold begin: the log alone.
TEST(DeltaLogRestore, TheLogAloneFromAColdBegin) {
  const auto log = entries({begin(0, 0, true), rec(record_kind::first_batch, 0, 4), batch(0, 4),
                            batch(0, 5)});
  const auto d = decide_restore(nullptr, log, started(100));
  ASSERT_FALSE(d.cold) << d.detail;
  EXPECT_FALSE(d.use_snapshot);
  EXPECT_EQ(d.replay_from, 1u);
  EXPECT_EQ(d.replay_to, 4u);
  EXPECT_EQ(d.resume_next, 6u);
  EXPECT_EQ(d.history_from, 4u) << "the first batch record says where history starts";
}

// LR2, LR3, LR4: an engine reset in the log after the snapshot: the new generation from its
// reset record, proved by the evidence read after it; the snapshot is superseded.
TEST(DeltaLogRestore, AResetAfterTheSnapshotRestoresTheNewGenerationFromTheLog) {
  const auto s = snap_at(0, 2);
  auto ev = rec(record_kind::evidence, 1, 1);
  ev.engine = started(200);
  const auto log = entries({begin(0, 0, true), batch(0, 0), batch(0, 1), batch(0, 2),
                            rec(record_kind::reset, 1, 0), rec(record_kind::first_batch, 1, 0),
                            batch(1, 0), ev, batch(1, 1)});
  const auto d = decide_restore(&s, log, started(200));
  ASSERT_FALSE(d.cold) << d.detail;
  EXPECT_FALSE(d.use_snapshot);
  EXPECT_TRUE(d.snapshot_superseded);
  EXPECT_EQ(d.generation, 1u);
  EXPECT_EQ(d.replay_from, 5u);
  EXPECT_EQ(d.replay_batches, 2u);
  EXPECT_EQ(d.resume_next, 2u);
  // The same log read by the old process' evidence: another process now.
  const auto old = decide_restore(&s, log, started(100));
  EXPECT_TRUE(old.cold);
  EXPECT_EQ(old.discard, discard_reason::engine_restarted);
  EXPECT_EQ(old.generation, 2u) << "a cold start opens the next generation";
}

// LR4: a reset whose evidence was never read (killed within milliseconds): nothing proves the
// new generation, so the cold start; never the old snapshot for the new process.
TEST(DeltaLogRestore, AResetWithoutEvidenceIsNotRestored) {
  const auto s = snap_at(0, 2);
  const auto log = entries({begin(0, 0, true), batch(0, 0), batch(0, 1),
                            rec(record_kind::reset, 1, 0), batch(1, 0)});
  const auto d = decide_restore(&s, log, started(200));
  EXPECT_TRUE(d.cold);
  EXPECT_EQ(d.discard, discard_reason::no_evidence);
}

// LR4: the snapshot's engine is another process now.
TEST(DeltaLogRestore, AnotherEngineProcessIsTheColdStart) {
  const auto s = snap_at(0, 2);
  const auto d = decide_restore(&s, entries({batch(0, 2)}), started(300));
  EXPECT_TRUE(d.cold);
  EXPECT_EQ(d.snapshot_discard, discard_reason::engine_restarted);
  EXPECT_EQ(d.discard, discard_reason::engine_restarted);
  evidence none;
  EXPECT_EQ(decide_restore(&s, {}, none).discard, discard_reason::proof_missing);
}

// LR5: a hole in the log ends the replay there; the ring is asked from the hole.
TEST(DeltaLogRestore, AHoleEndsTheReplayAndTheRingIsAskedFromIt) {
  const auto s = snap_at(0, 2);
  const auto d = decide_restore(&s, entries({batch(0, 2), batch(0, 3), batch(0, 5)}),
                                started(100));
  ASSERT_FALSE(d.cold);
  EXPECT_EQ(d.replay_to, 2u);
  EXPECT_EQ(d.resume_next, 4u);
  EXPECT_NE(d.hole.find("batch 5"), std::string::npos) << d.hole;
}

// LR5: a declared loss moves the expected seq to the first available one and loses the history.
TEST(DeltaLogRestore, ADeclaredLossIsReplayedAndTheHistoryIsLost) {
  const auto s = snap_at(0, 2);
  const auto d = decide_restore(&s, entries({batch(0, 2), lost(0, 3, 9), batch(0, 9)}),
                                started(100));
  ASSERT_FALSE(d.cold);
  EXPECT_EQ(d.replay_to, 3u);
  EXPECT_EQ(d.resume_next, 10u);
  EXPECT_FALSE(d.history_from);
}

// LR5: a warm begin (an earlier restart that resumed) is not a hole: the batches continue.
TEST(DeltaLogRestore, AWarmBeginContinuesTheGeneration) {
  const auto log = entries({begin(0, 0, true), rec(record_kind::first_batch, 0, 0), batch(0, 0),
                            batch(0, 1), begin(0, 2, false), batch(0, 2), batch(0, 3)});
  const auto d = decide_restore(nullptr, log, started(100));
  ASSERT_FALSE(d.cold) << d.detail;
  EXPECT_EQ(d.replay_batches, 4u);
  EXPECT_EQ(d.resume_next, 4u);
}

// LR6: a cold opening and nothing since: nothing to restore, nothing discarded.
TEST(DeltaLogRestore, AColdOpeningWithoutBatchesIsTheColdStart) {
  const auto d = decide_restore(nullptr, entries({begin(3, 0, true)}), started(100));
  EXPECT_TRUE(d.cold);
  EXPECT_FALSE(d.discard);
  EXPECT_EQ(d.generation, 4u);
}

// LR3: a log whose generation starts in a segment that is gone: not restorable.
TEST(DeltaLogRestore, AGenerationWithoutItsStartIsIncomplete) {
  const auto d = decide_restore(nullptr, entries({batch(0, 7), batch(0, 8)}), started(100));
  EXPECT_TRUE(d.cold);
  EXPECT_EQ(d.discard, discard_reason::log_incomplete);
}

// LR2: a snapshot of a later generation than the log (its log was lost) stands alone.
TEST(DeltaLogRestore, ASnapshotAheadOfTheLogStandsAlone) {
  const auto s = snap_at(2, 40);
  const auto d = decide_restore(&s, entries({begin(1, 0, true), batch(1, 0)}), started(100));
  ASSERT_FALSE(d.cold);
  EXPECT_TRUE(d.use_snapshot);
  EXPECT_EQ(d.replay_batches, 0u);
  EXPECT_EQ(d.resume_next, 40u);
}

// LR8: a segment may go when its successor starts before the snapshot's position.
TEST(DeltaLogRestore, ASegmentIsCoveredWhenItsSuccessorStartsBeforeTheSnapshot) {
  EXPECT_TRUE(segment_covered({0, 10}, {0, 11}));
  EXPECT_FALSE(segment_covered({0, 11}, {0, 11})) << "a record at the position may be needed";
  EXPECT_FALSE(segment_covered({1, 0}, {0, 99}));
  EXPECT_TRUE(segment_covered({0, 99}, {1, 0}));
}

}  // namespace
}  // namespace kvrelay::snapshot
