// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Capture and replay end to end, on loopback: a fake engine (with its replay ring) feeds kvrelay
// while kvrelay-capture's loop records it; the capture, replayed as fast as possible into a
// fresh kvrelay and policy server, gives the same index as the live run. The committed capture
// (tests/fixtures/captures/, made by the DISABLED_ generator below) rebuilds the index its engine
// held, so a change in what kvrelay makes of a recorded stream shows up here.
#include <csignal>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include "tests/support/fault_fixture.hpp"
#include "tests/tools/zmq_peer.hpp"
#include "tools/capture/capturer.hpp"
#include "tools/capture/kvcap.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/replay/replayer.hpp"

namespace kvrelay::capture {
namespace {

using faults::describe_diff;
using faults::fault_env;
using faults::index_view;
using faults::server_view;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string fixture = KVRELAY_FIXTURES_DIR "/captures/lora-evictions.kvcap";
const std::string fixture_index = KVRELAY_FIXTURES_DIR "/captures/lora-evictions.index.json";

// A capture running on its own thread until stopped.
struct running_capture {
  capturer c;
  std::atomic<bool> stop{false};
  std::thread t;
  outcome<void> result;
  explicit running_capture(capture_options o) : c(std::move(o)) {
    t = std::thread([this] { result = c.run(stop); });
  }
  outcome<void> finish() {
    stop = true;
    if (t.joinable()) t.join();
    return result;
  }
  ~running_capture() { finish(); }
};

// Publishes a live run: some history first (the engine's ring holds it before anyone listens),
// then the daemon and the capture join, then `steps` more engine steps. Returns the index the
// live run's server holds (the engine model's truth: asserted).
index_view live_run(fault_env& env, const std::string& out, size_t history, size_t steps) {
  env.publish_steps(history);
  std::string err;
  EXPECT_TRUE(env.start_daemon(&err)) << err;
  capture_options o;
  o.endpoint = env.engine->live_endpoint();
  o.replay_endpoint = env.engine->replay_endpoint();
  o.topic = faults::topic;
  o.out = out;
  running_capture cap(o);
  // Both the daemon's SUB and the capture's must be past the slow joiner.
  EXPECT_TRUE(faults::wait_until(
      [&] {
        env.publish_steps(1);
        return env.ingress_field("messages") > 0 && cap.c.live_messages() > 0;
      },
      seconds(20)));
  env.publish_steps(steps);
  EXPECT_EQ(env.wait_consistent(seconds(30)), "") << "the live run itself";
  // The last batch published reached the capture too.
  const auto last = static_cast<int64_t>(env.engine->next_seq()) - 1;
  EXPECT_TRUE(faults::wait_until([&] { return cap.c.last_seq() == last; }, seconds(20)));
  auto r = cap.finish();
  EXPECT_TRUE(r) << r.error().render();
  EXPECT_TRUE(cap.c.stats().replay_ended) << "the ring's contents were recorded";
  return server_view(env.server);
}

// Replays `file` into a fresh daemon and server; returns the diff against `want` once the
// server's view matches (or the last diff after the bound).
std::string replay_into_fresh_daemon(const std::string& file, const index_view& want,
                                     bool shift_timestamps) {
  replay_options o;
  o.in = file;
  o.bind = "tcp://127.0.0.1:*";
  o.replay_bind = "tcp://127.0.0.1:*";
  o.speed = 0;  // as fast as possible
  o.linger = seconds(30);  // stopped below once the index matches
  o.shift_timestamps = shift_timestamps;
  auto rep = replayer::create(o);
  if (!rep) return "replayer: " + rep.error().render();
  fault_env::options eo;
  eo.start_engine = false;
  fault_env env(eo);
  env.cfg.engines[0].endpoint = rep.value()->live_endpoint();
  env.cfg.engines[0].replay_endpoint = rep.value()->replay_endpoint();
  std::string err;
  if (!env.start_daemon(&err)) return "daemon: " + err;
  std::atomic<bool> stop{false};
  std::thread play([&] { rep.value()->run(stop); });
  std::string diff;
  faults::wait_until(
      [&] {
        diff = describe_diff(want, server_view(env.server));
        return diff.empty() && rep.value()->sent() == rep.value()->live_records();
      },
      seconds(30));
  stop = true;
  play.join();
  if (!rep.value()->stats().subscriber_seen) diff += "(the replayer never saw a subscriber)\n";
  if (!diff.empty()) diff += "daemon tree: " + env.d->tree_json() + "\n";
  return diff;
}

nlohmann::json to_json(const index_view& v) {
  auto out = nlohmann::json::array();
  for (const auto& [key, val] : v) out.push_back({key.first, key.second, val.first, val.second});
  return out;
}

index_view from_json(const nlohmann::json& j) {
  index_view v;
  for (const auto& e : j)
    v[{e[0].get<std::string>(), e[1].get<std::string>()}] = {e[2].get<int32_t>(),
                                                             e[3].get<int32_t>()};
  return v;
}

TEST(CaptureReplay, ReplayingACaptureGivesTheLiveRunsIndex) {
  faults::temp_dir dir;
  const std::string file = dir.file("live.kvcap");
  faults::engine_model::options mo;
  mo.seed = 42;
  mo.capacity = 200;  // evictions early
  index_view live;
  {
    fault_env::options eo;
    eo.model = mo;
    fault_env env(eo);
    live = live_run(env, file, 20, 150);
  }
  ASSERT_FALSE(live.empty());
  auto contents = read_all(file);
  ASSERT_TRUE(contents) << contents.error().render();
  size_t replies = 0;
  for (const auto& r : contents.value().records) replies += r.kind == record_kind::replay_reply;
  EXPECT_GT(replies, 20u) << "the ring's history (20 batches and the END) is in the capture";
  EXPECT_EQ(replay_into_fresh_daemon(file, live, false), "");
}

TEST(CaptureReplay, TheCommittedCaptureRebuildsItsEnginesIndex) {
  std::ifstream in(fixture_index);
  ASSERT_TRUE(in) << fixture_index << " (run the DISABLED_ generator to make it)";
  const auto want = from_json(nlohmann::json::parse(in));
  ASSERT_FALSE(want.empty());
  // Made weeks before this run: the timestamps move to now, or a policy server that expires
  // entries by their timestamps would drop them.
  EXPECT_EQ(replay_into_fresh_daemon(fixture, want, true), "");
}

TEST(CaptureReplay, RecordedSpeedIsNeverFasterThanTheRecording) {
  // Four messages 100 ms apart, played at 2x: at least 150 ms (a lower bound holds under any
  // load; an upper one would not).
  faults::temp_dir dir;
  const std::string file = dir.file("paced.kvcap");
  {
    auto w = writer::create(file, "{}");
    ASSERT_TRUE(w);
    for (int i = 0; i < 4; ++i) {
      std::string seq(8, '\0');
      seq[7] = static_cast<char>(i);
      ASSERT_TRUE(w.value()->write(record_kind::live, int64_t{i} * 100'000'000,
                                   {"kv", seq, std::string("\x92\xcb\0\0\0\0\0\0\0\0\x90", 11)}));
    }
  }
  replay_options o;
  o.in = file;
  o.bind = "tcp://127.0.0.1:*";
  o.speed = 2;
  o.wait_subscriber = milliseconds(0);
  o.linger = milliseconds(0);
  auto rep = replayer::create(o);
  ASSERT_TRUE(rep) << rep.error().render();
  std::atomic<bool> stop{false};
  const auto t0 = std::chrono::steady_clock::now();
  rep.value()->run(stop);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(150));
  EXPECT_EQ(rep.value()->stats().live_sent, 4u);
}

// A subscriber asks the ring as soon as its SUB connects, before anything live is sent: the
// capture's history must be there already, or a fast replay's subscriber first sees an empty
// ring and then live batches from the middle of the stream (bench.sh's replay case, 1 run in 2).
// --go-file holds the live records back until the file exists; the ring answers meanwhile.
TEST(CaptureReplay, TheRingHoldsTheHistoryBeforeTheFirstLiveMessageAndGoFileHoldsThemBack) {
  faults::temp_dir dir;
  const std::string file = dir.file("history.kvcap");
  const std::string batch("\x92\xcb\0\0\0\0\0\0\0\0\x90", 11);
  {
    auto w = writer::create(file, "{}");
    ASSERT_TRUE(w);
    // The capture's replay request was answered with 0..2 and END; live went on from 2.
    for (uint64_t s = 0; s < 3; ++s)
      ASSERT_TRUE(w.value()->write(record_kind::replay_reply, 1, {fake::be8(s), batch}));
    ASSERT_TRUE(w.value()->write(record_kind::replay_reply, 1, {fake::END, ""}));
    for (uint64_t s = 2; s < 5; ++s)
      ASSERT_TRUE(w.value()->write(record_kind::live, 2, {"kv", fake::be8(s), batch}));
  }
  replay_options o;
  o.in = file;
  o.bind = "tcp://127.0.0.1:*";
  o.replay_bind = "tcp://127.0.0.1:*";
  o.speed = 0;
  o.wait_subscriber = milliseconds(0);
  o.linger = milliseconds(0);
  o.go_file = dir.file("go");
  auto rep = replayer::create(o);
  ASSERT_TRUE(rep) << rep.error().render();
  auto& r = *rep.value();
  fake::zmq_peer peer;
  const auto seqs_from_ring = [&] {
    auto d = peer.dealer(r.replay_endpoint());
    std::vector<std::string> seqs;
    for (const auto& reply : peer.replay(d, 0))
      if (reply.size() == 3) seqs.push_back(reply[1]);
    return seqs;
  };
  const std::vector<std::string> history{fake::be8(0), fake::be8(1), fake::be8(2), fake::END};
  EXPECT_EQ(seqs_from_ring(), history) << "before run(): the capture's history, then END";

  std::atomic<bool> stop{false};
  std::thread play([&] { r.run(stop); });
  auto sub = peer.sub(r.live_endpoint(), "");
  EXPECT_EQ(seqs_from_ring(), history) << "waiting for the go file";
  EXPECT_EQ(r.sent(), 0u) << "nothing live before the go file";
  dir.write("go", "");
  EXPECT_TRUE(faults::wait_until([&] { return r.sent() == 3; }, seconds(20)));
  stop = true;
  play.join();
  EXPECT_EQ(seqs_from_ring(),
            (std::vector<std::string>{fake::be8(0), fake::be8(1), fake::be8(2), fake::be8(3),
                                      fake::be8(4), fake::END}));
}

// The two programs as an operator runs them: flags, exit codes, what they print.
TEST(CaptureReplayTools, CaptureAndReplayFromTheCommandLine) {
  const std::string cap = KVRELAY_BINARY_DIR "/tools/capture/kvrelay-capture";
  const std::string rep = KVRELAY_BINARY_DIR "/tools/replay/kvrelay-replay";
  faults::temp_dir dir;
  const auto exit_of = [&](std::vector<std::string> args, std::string* err = nullptr) {
    faults::child_process p(args, dir.path());
    auto rc = p.wait(seconds(30));
    if (err) *err = p.err() + p.out();
    return rc ? *rc : -1;
  };
  std::string err;
  EXPECT_EQ(exit_of({cap, "--help"}), 0);
  EXPECT_EQ(exit_of({rep, "--help"}), 0);
  EXPECT_EQ(exit_of({cap, "--out", dir.file("x")}, &err), 2) << "no --endpoint";
  EXPECT_EQ(exit_of({cap, "--endpoint", "tcp://127.0.0.1:1", "--out", dir.file("x"),
                     "--max-bytes", "lots"}, &err), 2) << err;
  EXPECT_EQ(exit_of({rep, "--in", dir.file("x"), "--speed", "-1"}, &err), 2) << err;
  EXPECT_EQ(exit_of({rep, "--in", dir.file("missing.kvcap")}, &err), 1);
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;

  // Five messages from an engine, recorded by the binary, then played by the other one.
  fake::publisher_options po;
  po.topic = "kv";
  fake::publisher engine(po);
  faults::child_process capture({cap, "--endpoint", engine.live_endpoint(), "--out",
                                 dir.file("five.kvcap"), "--max-messages", "5"}, dir.path());
  std::optional<int> rc;
  ASSERT_TRUE(faults::wait_until(
      [&] {
        engine.publish(std::string("\x92\xcb\0\0\0\0\0\0\0\0\x90", 11));
        return (rc = capture.wait(milliseconds(20))).has_value();
      },
      seconds(30)));
  EXPECT_EQ(*rc, 0) << capture.err();
  EXPECT_NE(capture.err().find("5 live messages"), std::string::npos) << capture.err();
  EXPECT_NE(capture.err().find("stopped by max_messages"), std::string::npos) << capture.err();
  EXPECT_EQ(exit_of({rep, "--in", dir.file("five.kvcap"), "--bind", "tcp://127.0.0.1:*",
                     "--speed", "max", "--wait-subscriber", "0", "--linger", "0"},
                    &err),
            0)
      << err;
  EXPECT_NE(err.find("sent 5 live messages"), std::string::npos) << err;
}

// The way an operator ends a capture: SIGINT. It interrupts the capture's poll; the capture
// must finish its file and exit 0 (it aborted on cppzmq's EINTR exception).
TEST(CaptureReplayTools, SigintEndsACaptureCleanly) {
  const std::string cap = KVRELAY_BINARY_DIR "/tools/capture/kvrelay-capture";
  faults::temp_dir dir;
  fake::publisher_options po;
  po.topic = "kv";
  fake::publisher engine(po);
  faults::child_process capture({cap, "--endpoint", engine.live_endpoint(), "--out",
                                 dir.file("int.kvcap")},
                                dir.path());
  ASSERT_TRUE(faults::wait_until(
      [&] {
        engine.publish(std::string("\x92\xcb\0\0\0\0\0\0\0\0\x90", 11));
        return capture.err().find("live") != std::string::npos ||
               std::ifstream(dir.file("int.kvcap")).peek() != EOF;
      },
      seconds(30)));
  capture.signal(SIGINT);
  const auto rc = capture.wait(seconds(30));
  ASSERT_TRUE(rc.has_value()) << "the capture did not stop";
  EXPECT_EQ(*rc, 0) << capture.err();
  EXPECT_EQ(capture.err().find("terminate called"), std::string::npos) << capture.err();
  EXPECT_NE(capture.err().find("stopped by stop"), std::string::npos) << capture.err();
}

// Regenerates the committed capture and its expected index:
//   capture_replay_test --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Write*'
// Era D (lora_name), a LoRA adapter on 30 % of the chains, a 200-block cache (evictions), 20
// batches of ring history before the capture starts, then 250 batches.
TEST(CaptureReplay, DISABLED_WriteTheCommittedCapture) {
  faults::engine_model::options mo;
  mo.seed = 2026;
  mo.capacity = 200;
  fault_env::options eo;
  eo.model = mo;
  index_view live;
  {
    fault_env env(eo);
    live = live_run(env, fixture, 20, 250);
    ASSERT_EQ(describe_diff(env.model.expected(), live), "");
  }
  std::ofstream out(fixture_index);
  const auto entries = to_json(live);
  out << "[\n";  // one entry a line: [adapter, prefix (BE8 hex), token count, tier]
  for (size_t i = 0; i < entries.size(); ++i)
    out << "  " << entries[i].dump() << (i + 1 < entries.size() ? ",\n" : "\n");
  out << "]\n";
  std::cout << "wrote " << fixture << " and " << fixture_index << " (" << live.size()
            << " entries)" << std::endl;
}

}  // namespace
}  // namespace kvrelay::capture
