// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The restore step and the writes of durable/state_store.hpp with a delta log: LR1 on real files
// (a torn or corrupt tail cut off and said, the valid prefix replayed), LR7 (a cold start removes
// what describes another history), LR8 after a write, and one snapshot per served
// endpoint. The engine's evidence is a function here (no HTTP).

#include "durable/state_store.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "durable/format/snapshot_log.hpp"
#include "durable/format/snapshot_log_io.hpp"

namespace kvrelay {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct scratch {
  scratch() {
    char tmpl[] = "/tmp/kvrelay-store-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string dir;
};

snapshot::evidence started(double t) {
  snapshot::evidence e;
  e.start_time = t;
  return e;
}

snapshot::identity who(const std::string& endpoint = "tcp://10.0.0.1:5557") {
  return snapshot::identity{"vllm-0", "llama", "t1", "vllm", endpoint, "kv", 0};
}

state_options options(const scratch& s, double engine_start = 100,
                      const std::string& endpoint = "tcp://10.0.0.1:5557") {
  state_options o;
  o.who = who(endpoint);
  o.pipeline = "vllm-0";
  o.file = snapshot_file(s.dir, o.pipeline, o.who);
  o.segment_bytes = 4096;
  o.evidence = [engine_start](std::string&) { return started(engine_start); };
  return o;
}

restore_plan_ptr restore(state_store& store) {
  std::promise<restore_plan_ptr> p;
  store.restore(1, [&p](restore_plan_ptr plan) { p.set_value(std::move(plan)); });
  return p.get_future().get();
}

write_report write(state_store& store, snapshot_ptr s, const snapshot::evidence& inc,
                   std::shared_ptr<snapshot::log_writer> log) {
  std::promise<write_report> p;
  store.write(std::move(s), inc, write_mode::write, false, std::move(log),
              [&p](write_report r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

// A log as a data path writes it: a cold begin, the first batch, `n` batches of 1000 bytes.
std::shared_ptr<snapshot::log_writer> logged(const state_options& o, uint64_t n) {
  snapshot::writer_options w;
  w.stem = snapshot::log_stem(o.file);
  w.pipeline_key = snapshot::pipeline_key(o.who);
  w.segment_bytes = o.segment_bytes;
  auto writer = std::make_shared<snapshot::log_writer>(w);
  writer->begin(true, 0, started(100));
  writer->first_batch(0);
  for (uint64_t seq = 0; seq < n; ++seq) writer->batch(seq, std::string(1000, 'b'));
  return writer;
}

// No snapshot yet, and the log: restored from the log alone, the ring asked after its end.
TEST(DurableStore, TheLogAloneIsRestored) {
  scratch s;
  const auto o = options(s);
  logged(o, 30)->close();
  state_store store(o);
  const auto plan = restore(store);
  ASSERT_FALSE(plan->cold) << plan->detail;
  EXPECT_FALSE(plan->snapshot);
  ASSERT_TRUE(plan->log);
  EXPECT_EQ(plan->log->batches, 30u);
  EXPECT_EQ(plan->resume_next, 30u);
  EXPECT_TRUE(plan->history_known);
  EXPECT_EQ(plan->history_from, 0u);
  EXPECT_EQ(plan->log_detail, "");
  EXPECT_GT(plan->next_segment, 5u);
}

// LR1: a torn tail (a write cut short) is cut off and said; the records before it replay.
TEST(DurableStore, ATornTailIsCutOffAndTheValidPrefixReplayed) {
  scratch s;
  const auto o = options(s);
  logged(o, 30)->close();
  auto segs = snapshot::list_segments(snapshot::log_stem(o.file));
  fs::resize_file(segs.back().path, segs.back().bytes - 10);
  state_store store(o);
  const auto plan = restore(store);
  ASSERT_FALSE(plan->cold) << plan->detail;
  EXPECT_EQ(plan->resume_next, 29u) << "the last batch was torn";
  EXPECT_NE(plan->log_detail.find("torn"), std::string::npos) << plan->log_detail;
  segs = snapshot::list_segments(snapshot::log_stem(o.file));
  std::ifstream in(segs.back().path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(snapshot::scan_segment(bytes, snapshot::pipeline_key(o.who)).fault,
            snapshot::log_fault::none)
      << "the torn record is gone from the file";
}

// LR1: a corrupt record in an early segment: it and everything after (later segments too) is
// dropped; the replay stops before it.
TEST(DurableStore, ACorruptRecordDropsEverythingAfterIt) {
  scratch s;
  const auto o = options(s);
  logged(o, 30)->close();
  auto segs = snapshot::list_segments(snapshot::log_stem(o.file));
  ASSERT_GE(segs.size(), 5u);
  {
    std::fstream f(segs[2].path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(segs[2].bytes - 100));
    f.put('!');
  }
  state_store store(o);
  const auto plan = restore(store);
  ASSERT_FALSE(plan->cold) << plan->detail;
  EXPECT_LT(*plan->resume_next, 12u);
  EXPECT_GT(*plan->resume_next, 4u);
  EXPECT_NE(plan->log_detail.find("corrupt"), std::string::npos) << plan->log_detail;
  EXPECT_EQ(snapshot::list_segments(snapshot::log_stem(o.file)).size(), 3u)
      << "later segments removed";
}

// LR4, LR7: another engine process: the cold start, and the old files go.
TEST(DurableStore, AnotherEngineProcessStartsColdAndRemovesTheOldFiles) {
  scratch s;
  logged(options(s), 10)->close();
  state_store store(options(s, 200));
  const auto plan = restore(store);
  EXPECT_TRUE(plan->cold);
  EXPECT_EQ(plan->discarded, snapshot::discard_reason::engine_restarted);
  EXPECT_GT(plan->log_generation, 0u) << "a new generation";
  EXPECT_TRUE(snapshot::list_segments(snapshot::log_stem(options(s).file)).empty());
}

// LR8 after a write, and one snapshot per endpoint: a snapshot of this endpoint removes the files of the
// pipeline's earlier endpoints; another pipeline's files stay.
TEST(DurableStore, AWriteRemovesCoveredSegmentsAndOlderEndpointsFiles) {
  scratch s;
  const auto old = options(s, 100, "tcp://10.0.0.1:40001");
  logged(old, 10)->close();
  ASSERT_TRUE(write_atomically(old.file, "old snapshot"));
  auto other = options(s);
  other.pipeline = "vllm-1";
  other.who.replica_id = "vllm-1";
  other.file = snapshot_file(s.dir, other.pipeline, other.who);
  ASSERT_TRUE(write_atomically(other.file, "another pipeline"));

  const auto o = options(s, 100, "tcp://10.0.0.1:40002");
  auto log = logged(o, 30);
  state_store store(o);
  auto snap = std::make_shared<snapshot::pipeline_snapshot>();
  snap->next_seq = 25;
  snap->history_from = 0;
  const auto r = write(store, snap, started(100), log);
  ASSERT_EQ(r.what, write_report::outcome::written) << r.detail;
  EXPECT_GT(r.log_released, 0u);
  EXPECT_GT(r.stale_removed, 0u);
  EXPECT_FALSE(fs::exists(old.file));
  EXPECT_TRUE(snapshot::list_segments(snapshot::log_stem(old.file)).empty());
  EXPECT_TRUE(fs::exists(other.file));
  EXPECT_TRUE(fs::exists(o.file));
  EXPECT_EQ(r.state_bytes, pipeline_state_bytes(o.file));
  // Then a restore: the snapshot and the log's batches from 25.
  log->close();
  const auto plan = restore(store);
  ASSERT_FALSE(plan->cold) << plan->detail;
  ASSERT_TRUE(plan->snapshot);
  EXPECT_EQ(plan->log->batches, 5u);
  EXPECT_EQ(plan->resume_next, 30u);
}

}  // namespace
}  // namespace kvrelay
