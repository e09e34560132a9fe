// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The delta log's files (durable/format/snapshot_log_io.hpp): the writer's segments, the reader a
// restore replays from, and LR8's removal of what a snapshot covers. Real files in a temporary
// directory.

#include "durable/format/snapshot_log_io.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "durable/format/state_dir.hpp"
#include "config/loader.hpp"
#include "tests/config/helpers.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kvrelay::snapshot {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t key = 77;

struct scratch {
  scratch() {
    char tmpl[] = "/tmp/kvrelay-log-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string stem() const { return dir + "/vllm-0-0123abcd"; }
  std::string dir;
};

evidence started(double t) {
  evidence e;
  e.start_time = t;
  return e;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

writer_options opts(const scratch& s, size_t segment = 4096) {
  writer_options o;
  o.stem = s.stem();
  o.pipeline_key = key;
  o.segment_bytes = segment;
  return o;
}

// Everything appended is in the segments, in order, and a segment never splits a record.
TEST(DeltaLogFiles, TheWriterRollsSegmentsWithoutSplittingRecords) {
  scratch s;
  log_writer w(opts(s));
  w.begin(true, 0, started(100));
  const std::string payload(1000, 'p');
  for (uint64_t seq = 0; seq < 40; ++seq) w.batch(seq, payload);
  const auto st = w.read();
  EXPECT_TRUE(st.writing);
  EXPECT_EQ(st.batches, 40u);
  const auto files = list_segments(s.stem());
  ASSERT_GE(files.size(), 8u) << "~41 KB in 4 KiB segments";
  EXPECT_EQ(st.segments, files.size());
  uint64_t next = 0, bytes = 0;
  for (const auto& f : files) {
    const auto scan = scan_segment(read(f.path), key);
    EXPECT_EQ(scan.fault, log_fault::none) << f.path << ": " << scan.detail;
    EXPECT_LE(f.bytes, 4096u);
    bytes += f.bytes;
    for (const auto& e : scan.records)
      if (e.record.kind == record_kind::batch) {
        EXPECT_EQ(e.record.seq, next++);
      }
  }
  EXPECT_EQ(next, 40u);
  EXPECT_EQ(st.disk_bytes, bytes);
}

// LR8: after a snapshot at a position, the segments entirely before it go; the one holding it,
// those after and the open one stay.
TEST(DeltaLogFiles, ReleaseRemovesOnlyWhatTheSnapshotCovers) {
  scratch s;
  log_writer w(opts(s));
  w.begin(true, 0, started(100));
  const std::string payload(1000, 'p');
  for (uint64_t seq = 0; seq < 40; ++seq) w.batch(seq, payload);
  const auto before = list_segments(s.stem());
  const uint64_t removed = w.release(log_position{0, 20});
  const auto after = list_segments(s.stem());
  EXPECT_GT(removed, 0u);
  ASSERT_LT(after.size(), before.size());
  // What is left still holds every batch from 20 on.
  uint64_t first_batch = ~uint64_t{0};
  for (const auto& f : after)
    for (const auto& e : scan_segment(read(f.path), key).records)
      if (e.record.kind == record_kind::batch) first_batch = std::min(first_batch, e.record.seq);
  EXPECT_LE(first_batch, 20u);
  EXPECT_GT(first_batch, 10u) << "most of what precedes 20 is gone";
  EXPECT_EQ(w.read().segments, after.size());
  // Past everything: only the open segment is kept.
  w.release(log_position{5, 0});
  EXPECT_EQ(list_segments(s.stem()).size(), 1u);
}

// The reader gives back the records of its ranges that change the index, payloads intact.
TEST(DeltaLogFiles, TheReaderReplaysItsRangesInOrder) {
  scratch s;
  log_writer w(opts(s, 1 << 20));
  w.begin(true, 0, started(100));
  w.first_batch(0);
  for (uint64_t seq = 0; seq < 5; ++seq) w.batch(seq, "batch-" + std::to_string(seq));
  w.evidence(started(100));
  w.history_lost(5, 9, 1);
  w.batch(9, "batch-9");
  w.asleep();
  const auto files = list_segments(s.stem());
  ASSERT_EQ(files.size(), 1u);
  const auto scan = scan_segment(read(files[0].path), key);
  auto replay = std::make_shared<log_replay>();
  replay->pipeline_key = key;
  replay->ranges.push_back({files[0].path, scan.records[4].offset, scan.records.back().end});
  replay_reader r(replay);
  std::string error;
  std::vector<std::string> got;
  while (auto it = r.next(error)) {
    const auto& rec = it->record;
    got.push_back(std::string(to_string(rec.kind)) + ":" + std::to_string(rec.seq) +
                  (rec.kind == record_kind::batch ? ":" + std::string(rec.payload) : ""));
  }
  EXPECT_EQ(error, "");
  const std::vector<std::string> want = {"batch:2:batch-2", "batch:3:batch-3", "batch:4:batch-4",
                                         "history_lost:5", "batch:9:batch-9", "asleep:10"};
  EXPECT_EQ(got, want);
}

// A segment that changed under the reader (shorter than the restore step saw) is an error.
TEST(DeltaLogFiles, ASegmentThatShrankIsAReplayError) {
  scratch s;
  log_writer w(opts(s, 1 << 20));
  w.begin(true, 0, started(100));
  for (uint64_t seq = 0; seq < 5; ++seq) w.batch(seq, "x");
  const auto files = list_segments(s.stem());
  auto replay = std::make_shared<log_replay>();
  replay->pipeline_key = key;
  replay->ranges.push_back({files[0].path, log_header_bytes, files[0].bytes});
  fs::resize_file(files[0].path, files[0].bytes - 3);
  replay_reader r(replay);
  std::string error;
  EXPECT_FALSE(r.next(error));
  EXPECT_NE(error.find("changed since"), std::string::npos) << error;
}

// A writer that cannot write stops for good (the log ends at its last whole record); one past
// its bound stops and says why; a closed one appends nothing more.
TEST(DeltaLogFiles, AWriterStopsOnErrorsAtItsBoundAndWhenClosed) {
  scratch s;
  auto o = opts(s);
  o.stem = s.dir + "/no-such-dir/x";
  log_writer broken(o);
  broken.batch(0, "x");
  EXPECT_FALSE(broken.read().writing);
  EXPECT_NE(broken.read().stopped.find("cannot create"), std::string::npos);

  auto b = opts(s);
  b.max_bytes = 2000;
  log_writer bounded(b);
  for (uint64_t seq = 0; seq < 100; ++seq) bounded.batch(seq, std::string(100, 'x'));
  EXPECT_FALSE(bounded.read().writing);
  EXPECT_NE(bounded.read().stopped.find("bound"), std::string::npos);
  EXPECT_LE(bounded.read().disk_bytes, 2000u);

  scratch t;
  log_writer closing(opts(t));
  closing.batch(0, "x");
  closing.close();
  closing.batch(1, "y");
  EXPECT_EQ(closing.read().batches, 1u);
}

// Compaction's callback runs once when the appended bytes reach the threshold.
TEST(DeltaLogFiles, TheCompactionCallbackRunsOnceAtItsThreshold) {
  scratch s;
  log_writer w(opts(s));
  int calls = 0;
  w.notify_at(1000, [&calls] { ++calls; });
  for (uint64_t seq = 0; seq < 9; ++seq) w.batch(seq, std::string(72, 'x'));  // 100 B each
  EXPECT_EQ(calls, 0);
  w.batch(9, std::string(72, 'x'));
  EXPECT_EQ(calls, 1);
  w.batch(10, std::string(72, 'x'));
  EXPECT_EQ(calls, 1);
}

// A reset opens a generation; positions never go back along the log (LF5).
TEST(DeltaLogFiles, AResetOpensAGenerationAndPositionsOnlyGrow) {
  scratch s;
  log_writer w(opts(s, 1 << 20));
  w.begin(true, 0, started(100));
  w.batch(7, "a");
  w.reset(7, 3);
  w.first_batch(0);
  w.batch(0, "b");
  w.evidence(started(200));
  EXPECT_EQ(w.read().generation, 1u);
  const auto scan = scan_segment(read(list_segments(s.stem())[0].path), key);
  ASSERT_EQ(scan.fault, log_fault::none) << scan.detail;
  ASSERT_EQ(scan.records.size(), 6u);
  EXPECT_EQ(scan.records[2].record.kind, record_kind::reset);
  EXPECT_EQ(scan.records[2].record.generation, 1u);
  EXPECT_EQ(scan.records[5].record.position(), (log_position{1, 1}));
}

// The state dir's size is said: what it holds now, and what bounds it (`kvrelay --check`).
TEST(DeltaLogFiles, TheStateDirsUsageIsSaidByCheck) {
  scratch s;
  log_writer w(opts(s));
  w.batch(0, std::string(100, 'x'));
  std::ofstream(s.stem() + ".kvsnap") << std::string(40, 's');
  std::ofstream(s.dir + "/unrelated.txt") << "not ours";
  const auto u = state_dir_usage(s.dir);
  EXPECT_EQ(u.snapshots, 1u);
  EXPECT_EQ(u.segments, 1u);
  EXPECT_EQ(u.bytes, 40u + w.read().disk_bytes);
  std::ostringstream out, err;
  const auto f = config::testing_helpers::flags(
      {"--check", "--replica-id=r", "--model-id=m", "--state-dir=" + s.dir});
  EXPECT_EQ(config::run_check(f, out, err), 0);
  EXPECT_NE(err.str().find("note: state.dir " + s.dir + " holds 1 snapshot(s), 1 delta log "
                           "segment(s): " + std::to_string(u.bytes) + " bytes"),
            std::string::npos)
      << err.str();
}

}  // namespace
}  // namespace kvrelay::snapshot
