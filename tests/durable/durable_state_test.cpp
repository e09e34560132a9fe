// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The supervisor's durable-index bookkeeping, rule by rule (durable/durable_state.hpp DS1-DS9),
// and its store's thread: the restore step's decisions and a write's outcomes on a real
// directory, with the engine's evidence injected.

#include "durable/durable_state.hpp"

#include <gtest/gtest.h>

#include "durable/format/snapshot_log.hpp"
#include "durable/format/snapshot_log_io.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace kvrelay {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct scratch {
  scratch() {
    char tmpl[] = "/tmp/kvrelay-durable-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string dir;
};

// The engine's evidence as the test says it is now.
struct engine_clock {
  std::mutex mu;
  std::optional<double> start = 100.0;
  evidence_reader reader() {
    return [this](std::string& error) {
      std::lock_guard<std::mutex> lk(mu);
      snapshot::evidence e;
      e.start_time = start;
      if (!start) error = "no process_start_time_seconds";
      return e;
    };
  }
  void set(std::optional<double> s) {
    std::lock_guard<std::mutex> lk(mu);
    start = s;
  }
};

snapshot::identity who() { return {"r0", "m", "t", "vllm", "tcp://127.0.0.1:5557", "kv", 0}; }

struct fixture {
  explicit fixture(std::chrono::milliseconds interval = 0ms) {
    ctx.name = "r0";
    state_options o;
    o.who = who();
    o.file = snapshot_file(dir.dir, "r0", who());
    o.interval = interval;
    o.ring_batches = 10000;
    o.evidence = engine.reader();
    d = std::make_unique<durable_state>(ctx, o, nullptr);
  }
  // Runs the restore step and waits for its plan.
  restore_plan_ptr restore(uint64_t datapath_inc = 1) {
    const uint64_t gen = d->begin_restore(datapath_inc);
    std::mutex mu;
    std::condition_variable cv;
    restore_plan_ptr plan;
    d->store().restore(gen, [&](restore_plan_ptr p) {
      std::lock_guard<std::mutex> lk(mu);
      plan = std::move(p);
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, 10s, [&] { return plan != nullptr; });
    return plan;
  }
  write_report write(snapshot_ptr s, bool establish = false) {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<write_report> r;
    d->submitted();
    d->store().write(std::move(s), d->incarnation_evidence(),
                     establish ? write_mode::establish : write_mode::write, false, d->writer(),
                     [&](write_report w) {
                       std::lock_guard<std::mutex> lk(mu);
                       r = std::move(w);
                       cv.notify_all();
                     });
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, 10s, [&] { return r.has_value(); });
    d->on_report(*r);
    return *r;
  }
  double metric(const std::string& name, label_set extra) const {
    label_set l{{"replica", "r0"}};
    l.insert(l.end(), extra.begin(), extra.end());
    return ctx.metrics->value(name, l);
  }
  scratch dir;
  engine_clock engine;
  pipeline_context ctx;
  std::unique_ptr<durable_state> d;
};

snapshot_ptr cut(uint64_t next_seq, uint64_t incarnation = 0, size_t blocks = 3) {
  auto s = std::make_shared<snapshot::pipeline_snapshot>();
  s->next_seq = next_seq;
  s->incarnation = incarnation;
  s->history_from = 0;
  snapshot::partition_image p;
  for (size_t i = 0; i < blocks; ++i) p.blocks.push_back({i + 1, i * 7, 16u | (1u << 24)});
  s->partitions.push_back(std::move(p));
  return s;
}

TEST(DurableState, AFirstStartFindsNoFileAndReadsTheEvidence) {  // DS1
  fixture f;
  const auto plan = f.restore();
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->found);
  EXPECT_FALSE(plan->snapshot);
  EXPECT_TRUE(plan->engine.start_time);
  bool current = false;
  EXPECT_FALSE(f.d->on_plan(*plan, current));
  EXPECT_TRUE(current);
  EXPECT_EQ(f.metric("kvrelay_snapshot_restores_total", {{"outcome", "absent"}}), 1);
}

TEST(DurableState, AStalePlanIsIgnored) {  // DS1
  fixture f;
  const auto old = f.restore(1);
  f.d->begin_restore(2);  // a newer data path asked since
  bool current = true;
  EXPECT_FALSE(f.d->on_plan(*old, current));
  EXPECT_FALSE(current);
  EXPECT_TRUE(f.d->restore_pending());
}

TEST(DurableState, AWrittenSnapshotIsRestoredForTheSameProcessOnly) {  // DS1 + RD3 + RD7
  fixture f;
  bool current = false;
  f.d->on_plan(*f.restore(), current);
  ASSERT_EQ(f.d->judge(*cut(50)), durable_state::decision::write);
  const auto r = f.write(cut(50));
  ASSERT_EQ(r.what, write_report::outcome::written) << r.detail;
  EXPECT_EQ(r.blocks, 3u);
  EXPECT_EQ(f.metric("kvrelay_snapshot_bytes", {}), static_cast<double>(r.bytes));
  // The same process: used.
  auto plan = f.restore(2);
  auto snap = f.d->on_plan(*plan, current);
  ASSERT_TRUE(snap) << plan->detail;
  EXPECT_EQ(snap->next_seq, 50u);
  EXPECT_EQ(snap->blocks(), 3u);
  // Another process: discarded, said, and on /readyz.
  f.engine.set(160.0);
  plan = f.restore(3);
  EXPECT_FALSE(f.d->on_plan(*plan, current));
  EXPECT_EQ(f.metric("kvrelay_snapshot_discards_total", {{"reason", "engine_restarted"}}), 1);
  EXPECT_NE(f.d->readyz_line().find("the engine restarted"), std::string::npos);
}

TEST(DurableState, AnUnchangedCutIsNotWrittenAgain) {  // DS3
  fixture f;
  bool current = false;
  f.d->on_plan(*f.restore(), current);
  ASSERT_EQ(f.d->judge(*cut(50)), durable_state::decision::write);
  f.write(cut(50));
  EXPECT_EQ(f.d->judge(*cut(50)), durable_state::decision::skip_unchanged);
  EXPECT_EQ(f.d->judge(*cut(51)), durable_state::decision::write);
}

TEST(DurableState, ANewIncarnationOnlyEstablishesItsEvidenceFirst) {  // DS4 + RD7
  fixture f;
  bool current = false;
  f.d->on_plan(*f.restore(), current);
  f.engine.set(200.0);  // the engine restarted; the decoder saw the reset (incarnation 1)
  ASSERT_EQ(f.d->judge(*cut(5, 1)), durable_state::decision::establish);
  const auto r = f.write(cut(5, 1), /*establish=*/true);
  EXPECT_EQ(r.what, write_report::outcome::established);
  EXPECT_EQ(f.d->judge(*cut(9, 1)), durable_state::decision::write);
  EXPECT_EQ(f.write(cut(9, 1)).what, write_report::outcome::written);
}

TEST(DurableState, ACutWhoseEngineChangedOrCannotBeReadIsSkipped) {  // RD7
  fixture f;
  bool current = false;
  f.d->on_plan(*f.restore(), current);
  f.engine.set(300.0);
  auto r = f.write(cut(7));
  EXPECT_EQ(r.what, write_report::outcome::skipped);
  EXPECT_NE(r.detail.find("another process"), std::string::npos) << r.detail;
  f.engine.set(std::nullopt);
  r = f.write(cut(8));
  EXPECT_EQ(r.what, write_report::outcome::skipped);
  EXPECT_NE(r.detail.find("no process_start_time_seconds"), std::string::npos) << r.detail;
  EXPECT_TRUE(f.d->store().options().file.find(".kvsnap") != std::string::npos);
  EXPECT_FALSE(fs::exists(f.d->store().options().file)) << "nothing written";
}

TEST(DurableState, TheIntervalIsFiveSecondsFirstThenDerivedOrFixed) {  // DS2 + RD8
  fixture derived;
  EXPECT_EQ(derived.d->next_delay(), durable_state::first_delay);
  fixture fixed(1500ms);
  EXPECT_EQ(fixed.d->next_delay(), 1500ms);
}

TEST(DurableState, ATornTemporaryFileIsRemovedAndTheSnapshotStays) {
  fixture f;
  bool current = false;
  f.d->on_plan(*f.restore(), current);
  f.write(cut(50));
  const std::string file = f.d->store().options().file;
  std::ofstream(file + ".tmp.99999") << "half a snapshot";  // a SIGKILL mid-write
  const auto plan = f.restore(2);
  EXPECT_TRUE(plan->snapshot) << plan->detail;
  EXPECT_FALSE(fs::exists(file + ".tmp.99999"));
}

// DS6: a data path gets a log writer only when the engine's evidence was read; it begins with
// that evidence (LR7). RD9: with the log, the first snapshot is due soon after the start, then
// the timer only watches (compaction decides).
TEST(DurableState, ALogWriterBeginsWithTheEvidenceAndTakesOverTheInterval) {  // DS6 + RD9
  fixture f;
  bool current = false;
  const auto plan = f.restore();
  f.d->on_plan(*plan, current);
  int compactions = 0;
  const auto w = f.d->start_writer(*plan, [&compactions] { ++compactions; });
  ASSERT_TRUE(w);
  EXPECT_TRUE(f.d->log_working());
  EXPECT_EQ(f.d->next_delay(), durable_state::first_delay);
  EXPECT_TRUE(f.d->tick_takes_snapshot());
  ASSERT_EQ(f.d->judge(*cut(50)), durable_state::decision::write);
  ASSERT_EQ(f.write(cut(50)).what, write_report::outcome::written);
  EXPECT_EQ(f.d->next_delay(), durable_state::log_check_delay);
  EXPECT_FALSE(f.d->tick_takes_snapshot()) << "compaction decides now";
  // Compaction: due once the log grew by the snapshot's size, at least 256 KiB.
  const std::string payload(1000, 'p');
  for (uint64_t seq = 50; seq < 50 + 200 && compactions == 0; ++seq) w->batch(seq, payload);
  EXPECT_EQ(compactions, 0) << "200 KB is below 256 KiB";
  for (uint64_t seq = 250; seq < 400 && compactions == 0; ++seq) w->batch(seq, payload);
  EXPECT_EQ(compactions, 1);
  // The begin record carries the evidence the restore read.
  const auto segs = snapshot::list_segments(snapshot::log_stem(f.d->store().options().file));
  ASSERT_FALSE(segs.empty());
  std::ifstream in(segs.front().path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto scan = snapshot::scan_segment(bytes, snapshot::pipeline_key(who()));
  ASSERT_FALSE(scan.records.empty());
  EXPECT_EQ(scan.records.front().record.kind, snapshot::record_kind::begin);
  EXPECT_EQ(scan.records.front().record.engine.start_time, 100.0);

  fixture unproved;
  unproved.engine.set(std::nullopt);
  const auto p2 = unproved.restore();
  unproved.d->on_plan(*p2, current);
  EXPECT_FALSE(unproved.d->start_writer(*p2, [] {})) << "nothing could prove the log";
  EXPECT_FALSE(unproved.d->log_working());
}

// DS7: an engine reset reads the new process' evidence at once and appends it to the log, so
// the log's new generation is proved without waiting for a cut.
TEST(DurableState, AnEngineResetAppendsTheNewProcessEvidenceToTheLog) {  // DS7
  fixture f;
  bool current = false;
  const auto plan = f.restore();
  f.d->on_plan(*plan, current);
  const auto w = f.d->start_writer(*plan, [] {});
  ASSERT_TRUE(w);
  w->batch(0, "a");
  w->reset(0, 0);  // the ingress logged the reset
  f.engine.set(250.0);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<write_report> r;
  f.d->store().establish(f.d->on_reset(), w, [&](write_report x) {
    std::lock_guard<std::mutex> lk(mu);
    r = std::move(x);
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return r.has_value(); }));
  }
  EXPECT_EQ(r->what, write_report::outcome::established);
  EXPECT_FALSE(r->cut);
  f.d->on_report(*r);
  EXPECT_EQ(f.d->judge(*cut(3, 1)), durable_state::decision::write) << "proved already";
  const auto segs = snapshot::list_segments(snapshot::log_stem(f.d->store().options().file));
  std::ifstream in(segs.back().path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const auto scan = snapshot::scan_segment(bytes, snapshot::pipeline_key(who()));
  ASSERT_EQ(scan.fault, snapshot::log_fault::none) << scan.detail;
  const auto& last = scan.records.back().record;
  EXPECT_EQ(last.kind, snapshot::record_kind::evidence);
  EXPECT_EQ(last.generation, 1u);
  EXPECT_EQ(last.engine.start_time, 250.0);
}

// DS4: the shutdown's last cut, from an engine incarnation whose evidence was not read yet (the
// engine restarted moments before the SIGTERM): it is read now, written with the snapshot and
// into the log, so the next start is not a cold one.
TEST(DurableState, TheLastCutOfAnUnprovedIncarnationIsProvedAndWritten) {  // DS4
  fixture f;
  bool current = false;
  const auto plan = f.restore();
  f.d->on_plan(*plan, current);
  const auto w = f.d->start_writer(*plan, [] {});
  ASSERT_TRUE(w);
  w->reset(7, 0);       // the ingress logged the reset...
  f.engine.set(400.0);  // ...of a new process, whose evidence nobody read yet
  auto s = cut(12, 1);
  ASSERT_EQ(f.d->judge(*s), durable_state::decision::establish);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<write_report> r;
  f.d->submitted();
  f.d->store().write(s, f.d->incarnation_evidence(), write_mode::establish_and_write,
                     /*final=*/true, w, [&](write_report x) {
                       std::lock_guard<std::mutex> lk(mu);
                       r = std::move(x);
                       cv.notify_all();
                     });
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return r.has_value(); }));
  }
  ASSERT_EQ(r->what, write_report::outcome::written) << r->detail;
  EXPECT_TRUE(r->final);
  f.d->on_report(*r);
  // The next start proves it and uses it.
  w->close();
  const auto next = f.restore(2);
  ASSERT_FALSE(next->cold) << next->detail;
  ASSERT_TRUE(next->snapshot);
  EXPECT_EQ(next->snapshot->generation, 1u);
  EXPECT_EQ(next->snapshot->engine.start_time, 400.0);
  EXPECT_EQ(next->resume_next, 12u);
}

// RD9: a compaction whose write is skipped (the engine could not be proved at that moment) is due
// again at once, and the timer sees it overdue until a snapshot covers the log.
TEST(DurableState, ACompactionWhoseWriteIsSkippedIsDueAgain) {  // RD9
  fixture f;
  bool current = false;
  const auto plan = f.restore();
  f.d->on_plan(*plan, current);
  int compactions = 0;
  const auto w = f.d->start_writer(*plan, [&compactions] { ++compactions; });
  ASSERT_TRUE(w);
  ASSERT_EQ(f.d->judge(*cut(50)), durable_state::decision::write);
  ASSERT_EQ(f.write(cut(50)).what, write_report::outcome::written);
  EXPECT_FALSE(f.d->tick_takes_snapshot());
  const std::string payload(1000, 'p');
  uint64_t seq = 50;
  while (compactions == 0 && seq < 1000) w->batch(seq++, payload);
  ASSERT_EQ(compactions, 1);
  EXPECT_TRUE(f.d->tick_takes_snapshot()) << "overdue";
  f.engine.set(999.0);
  f.d->cut_requested();
  ASSERT_EQ(f.write(cut(seq)).what, write_report::outcome::skipped);
  EXPECT_TRUE(f.d->tick_takes_snapshot()) << "still overdue";
  w->batch(seq++, payload);
  EXPECT_EQ(compactions, 2) << "re-armed, and the threshold is met already";
  f.engine.set(100.0);
  f.d->cut_requested();
  ASSERT_EQ(f.d->judge(*cut(seq)), durable_state::decision::write);
  ASSERT_EQ(f.write(cut(seq)).what, write_report::outcome::written);
  EXPECT_FALSE(f.d->tick_takes_snapshot());
  w->batch(seq++, payload);
  EXPECT_EQ(compactions, 2);
}

}  // namespace
}  // namespace kvrelay

namespace kvrelay {
namespace {

// DS8: the ring is asked from where the plan's records end, and what the index then knows of
// the engine's history is said — but only when something was restored.
TEST(DurableState, ADataPathResumesWhereThePlanEndsAndSaysWhatItKnows) {  // DS8
  restore_plan p;
  EXPECT_FALSE(durable_state::start_of(p).resume) << "a cold plan starts the ring cold";
  EXPECT_FALSE(durable_state::start_of(p).history);

  p.cold = false;
  p.resume_next = 50;
  p.history_from = 0;
  p.history_known = true;
  auto d = durable_state::start_of(p);
  ASSERT_TRUE(d.resume);
  EXPECT_EQ(d.resume->next, 50u);
  EXPECT_FALSE(d.history) << "neither a snapshot nor a log: nothing restored to speak of";

  p.snapshot = cut(50);
  EXPECT_EQ(durable_state::start_of(p).history, health_fact::history_complete);
  p.history_from = 7;
  d = durable_state::start_of(p);
  EXPECT_EQ(d.resume->history_from, 7u);
  EXPECT_EQ(d.history, health_fact::history_skipped);
  p.history_known = false;
  EXPECT_EQ(durable_state::start_of(p).history, health_fact::history_lost);

  p.snapshot = nullptr;
  p.log = std::make_shared<snapshot::log_replay>();
  EXPECT_EQ(durable_state::start_of(p).history, health_fact::history_lost) << "a log alone";

  p.cold = true;
  EXPECT_FALSE(durable_state::start_of(p).resume) << "cold wins over a stale resume point";
  EXPECT_FALSE(durable_state::start_of(p).history);
}

// DS9: an older timer's tick neither cuts nor re-arms; one write at a time; nothing is cut while
// a restore step is pending, on a tick or on the log writer's call.
TEST(DurableState, OnlyTheCurrentTimerCutsAndOneWriteAtATime) {  // DS9 + DS2
  fixture f;
  bool current = false;
  f.d->on_plan(*f.restore(), current);
  ASSERT_TRUE(current);
  const auto old_timer = f.d->arm_timer();
  const auto timer = f.d->arm_timer();
  EXPECT_NE(old_timer.generation, timer.generation);
  EXPECT_NE(timer.generation, 0u) << "0 is the log writer's call";
  EXPECT_EQ(timer.delay, durable_state::first_delay);
  EXPECT_EQ(f.d->on_tick(old_timer.generation), durable_state::tick::stale);
  EXPECT_EQ(f.d->on_tick(timer.generation), durable_state::tick::cut_and_rearm);
  EXPECT_TRUE(f.d->may_cut());
  EXPECT_TRUE(f.d->on_compaction_due());

  ASSERT_EQ(f.d->submit(*cut(50), false), write_mode::write);
  EXPECT_TRUE(f.d->write_outstanding());
  EXPECT_EQ(f.d->on_tick(timer.generation), durable_state::tick::rearm) << "a write outstanding";
  EXPECT_FALSE(f.d->on_compaction_due()) << "its report re-arms the threshold";

  f.d->begin_restore(2);  // a new data path: the old one's write is forgotten, a plan pending
  EXPECT_FALSE(f.d->write_outstanding());
  EXPECT_FALSE(f.d->may_cut());
  EXPECT_EQ(f.d->on_tick(timer.generation), durable_state::tick::rearm);
  EXPECT_FALSE(f.d->on_compaction_due());
}

// DS3 + DS4 through submit: the mode a cut is written in.
TEST(DurableState, ACutIsWrittenProvedOrLeftByItsIncarnationAndTheShutdown) {  // DS3 + DS4
  fixture f;
  bool current = false;
  f.d->on_plan(*f.restore(), current);
  EXPECT_EQ(f.d->submit(*cut(5, 1), false), write_mode::establish);
  EXPECT_EQ(f.d->submit(*cut(5, 1), true), write_mode::establish_and_write) << "the last cut";
  ASSERT_EQ(f.d->submit(*cut(50), false), write_mode::write);
  ASSERT_EQ(f.write(cut(50)).what, write_report::outcome::written);
  EXPECT_EQ(f.d->submit(*cut(50), true), std::nullopt) << "unchanged: nothing to write";
  EXPECT_FALSE(f.d->write_outstanding());
  EXPECT_EQ(f.d->submit(*cut(51), true), write_mode::write);
}

}  // namespace
}  // namespace kvrelay
