// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The real binary: signals, exit codes, configuration errors and the version report. The daemon
// runs as a child process against an in-process policy server and fake engine.

#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "base/build_info.hpp"
#include "tests/support/fault_fixture.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;

const std::string binary = KVRELAY_BINARY_DIR "/kvrelay";

std::string toml_for(fault_env& env, const std::string& window, const std::string& rpc_timeout) {
  return "[server]\naddress = \"" + env.server.target() + "\"\nrpc_timeout = \"" + rpc_timeout +
         "\"\n# These tests check what the server holds after the exit.\non_shutdown = \"keep\"\n\n[admin]\nlisten = \"127.0.0.1:0\"\n\n[log]\nformat = \"text\"\nlevel = \"info\"\n\n"
         "[[engine]]\nreplica_id = \"" + std::string(replica) + "\"\nmodel_id = \"" + model +
         "\"\ntenant_id = \"" + tenant + "\"\nendpoint = \"" + env.engine->live_endpoint() +
         "\"\nreplay_endpoint = \"" + env.engine->replay_endpoint() + "\"\ntopic = \"" + topic +
         "\"\nwindow = \"" + window + "\"\nreconnect_backoff = \"100ms\"\n\n[engine.metrics]\n"
         "url = \"\"\n";
}

// The child's admin port, from its "admin port listening" line (0 until that is written).
uint16_t admin_port(const child_process& p) {
  // 127.0.0.1, or [::] when admin.public applies (a test run inside a Kubernetes pod).
  static const std::regex listening(
      R"(admin port listening listen=(?:127\.0\.0\.1|\[::\]|0\.0\.0\.0):([0-9]+))");
  const std::string err = p.err();
  std::smatch m;
  return std::regex_search(err, m, listening) ? static_cast<uint16_t>(std::stoi(m[1].str())) : 0;
}

// Batches the child has decoded, from its /metrics (-1 while that cannot be read).
double decoded(const child_process& p) {
  const uint16_t port = admin_port(p);
  if (port == 0) return -1;
  const auto page = http_get(port, "/metrics");
  if (page.status != 200) return -1;
  static const std::regex series(R"((^|\n)kvrelay_batches_total(\{[^}]*\})? ([0-9.e+]+))");
  double sum = -1;
  for (std::sregex_iterator it(page.body.begin(), page.body.end(), series), end; it != end; ++it)
    sum = std::max(sum, 0.0) + std::stod((*it)[3].str());
  return sum;
}

// Waits until the child has decoded `n` batches: the proof its SUB read what was published (what
// is still pending then sits in the debouncer's window, not in a socket).
void wait_decoded(const child_process& p, uint64_t n) {
  double got = -1;
  ASSERT_TRUE(wait_until([&] { return (got = decoded(p)) >= static_cast<double>(n); }, 15s))
      << "decoded " << got << " of " << n << " batches\n" << p.err();
}

// Waits until the child's log holds `line` (or it exited).
bool wait_logged(child_process& p, const std::string& line) {
  return wait_until(
      [&] { return p.err().find(line) != std::string::npos || p.wait(0ms).has_value(); }, 15s) &&
         p.err().find(line) != std::string::npos;
}

// Waits until the child has subscribed and indexed what was published so far. The adds wait
// for the window (an eviction no longer flushes them: the eviction of an add that was never
// sent cancels both), so the bound is the window plus generous slack.
void warm_up(fault_env& env, std::chrono::milliseconds window) {
  env.publish_steps(100);
  ASSERT_EQ(env.wait_consistent(window + 15s), "");
}

TEST(ProcessSignals, SigtermDrainsTheFinalFlushAndExitsZero) {
  temp_dir dir;
  fault_env env;
  // A long window: only the shutdown's final flush can deliver what is pending at SIGTERM.
  dir.write("kvrelay.toml", toml_for(env, "8s", "500ms"));
  child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
  ASSERT_GT(p.pid(), 0);
  ASSERT_NO_FATAL_FAILURE(warm_up(env, 8s));

  // Load, then SIGTERM once everything published has been read (the window holds it pending).
  for (int i = 0; i < 10; ++i) {
    env.publish_steps(40);
    std::this_thread::sleep_for(20ms);
  }
  // Everything so far acknowledged (one window), so the tail below is all that is pending.
  ASSERT_EQ(env.wait_consistent(25s), "");
  // No evictions in the last steps: those force a flush and would hide a missing final one.
  env.model.opts().capacity = 100000;
  env.publish_steps(10);
  ASSERT_NO_FATAL_FAILURE(wait_decoded(p, env.engine->next_seq()));
  const auto want = env.model.expected();
  ASSERT_NE(describe_diff(want, server_view(env.server)), "")
      << "the tail should still be pending before SIGTERM (window 8 s)";
  p.signal(SIGTERM);
  const auto code = p.wait(15s);
  ASSERT_TRUE(code.has_value()) << "no exit after SIGTERM\n" << p.err();
  EXPECT_EQ(*code, 0) << p.err();
  // The drain ended by itself, not at its 5 s deadline (the daemon says which).
  EXPECT_NE(p.err().find("shutdown drain finished"), std::string::npos) << p.err();
  EXPECT_EQ(describe_diff(want, server_view(env.server)), "") << p.err();
}

TEST(ProcessSignals, SigtermWhilePublishingExitsZeroInTime) {
  temp_dir dir;
  fault_env env;
  dir.write("kvrelay.toml", toml_for(env, "10ms", "500ms"));
  child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
  ASSERT_GT(p.pid(), 0);
  ASSERT_NO_FATAL_FAILURE(warm_up(env, 10ms));
  const uint64_t before = env.engine->next_seq();
  std::atomic<bool> stop{false};
  std::thread load([&] {
    while (!stop.load()) env.publish_steps(1);
  });
  // Under load: the child has decoded 200 batches published since (the SIGTERM lands mid-flow).
  wait_decoded(p, before + 200);
  const auto t0 = std::chrono::steady_clock::now();
  p.signal(SIGTERM);
  const auto code = p.wait(15s);
  const auto took = std::chrono::steady_clock::now() - t0;
  stop = true;
  load.join();
  ASSERT_TRUE(code.has_value()) << p.err();
  EXPECT_EQ(*code, 0) << p.err();
  // In time: the drain finished by itself (the server answers, so nothing can hold it to main's
  // 5 s deadline: a drain that timed out is a failure here, whatever the exit code), and the
  // process exited soon after it. The bound is the deadline plus the stop's own slack (an
  // emitter's connectivity watch takes up to 1 s to see its stop flag): a drain or stop that
  // hangs past the deadline fails, a slow machine does not.
  EXPECT_NE(p.err().find("shutdown drain finished"), std::string::npos) << p.err();
  EXPECT_EQ(p.err().find("drain timed out"), std::string::npos) << p.err();
  EXPECT_NE(p.err().find("kvevent-subscriber stopped"), std::string::npos) << p.err();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  EXPECT_LT(ms, 5000 + 3000) << "SIGTERM to exit, in ms\n" << p.err();
  std::printf("[ measure  ] SIGTERM to exit while publishing %llu batches: %lld ms\n",
              static_cast<unsigned long long>(env.engine->next_seq()), static_cast<long long>(ms));
}

// A policy server that never answered holds nothing of the replica: the shutdown lines say so
// instead of counting what the index held as left on it.
TEST(ProcessSignals, SigtermWithTheServerNeverReachedLeavesNothingOnIt) {
  temp_dir dir;
  fault_env env;
  std::string text = toml_for(env, "100ms", "500ms");
  const auto at = text.find(env.server.target());
  ASSERT_NE(at, std::string::npos);
  text.replace(at, env.server.target().size(), "127.0.0.1:9");  // nothing listens there
  dir.write("kvrelay.toml", text);
  env.server.stop();
  child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
  ASSERT_GT(p.pid(), 0);
  env.publish_steps(1);
  ASSERT_TRUE(wait_until(
      [&] {
        env.publish_steps(1);
        return decoded(p) >= 5;
      },
      15s))
      << p.err();
  p.signal(SIGTERM);
  ASSERT_TRUE(p.wait(15s).has_value()) << p.err();
  const auto err = p.err();
  EXPECT_NE(err.find("server_reached=false"), std::string::npos) << err;
  EXPECT_NE(err.find("left_on_server=0"), std::string::npos) << err;
  std::smatch m;
  EXPECT_FALSE(std::regex_search(err, m, std::regex("left_on_server=[1-9]"))) << err;
}

TEST(ProcessSignals, SecondSignalExitsAtOnce) {
  temp_dir dir;
  fault_env env;
  // The server swallows calls and the deadline is long, so the drain would take the full 5 s.
  dir.write("kvrelay.toml", toml_for(env, "3s", "20s"));
  child_process p({binary, "--config", dir.file("kvrelay.toml")}, dir.path());
  ASSERT_GT(p.pid(), 0);
  ASSERT_NO_FATAL_FAILURE(warm_up(env, 3s));
  env.server.set_black_hole(true);
  env.model.opts().capacity = 100000;
  env.publish_steps(10);
  ASSERT_NO_FATAL_FAILURE(wait_decoded(p, env.engine->next_seq()));
  p.signal(SIGTERM);
  // The first signal was taken: the drain began (and cannot end before its 5 s deadline).
  ASSERT_TRUE(wait_logged(p, "shutting down: draining")) << p.err();
  ASSERT_FALSE(p.wait(0ms).has_value()) << "the first signal should still be draining\n"
                                        << p.err();
  p.signal(SIGTERM);
  const auto code = p.wait(15s);
  env.server.set_black_hole(false);
  ASSERT_TRUE(code.has_value()) << p.err();
  EXPECT_NE(*code, 0) << "an interrupted drain is not a clean exit";
  EXPECT_NE(p.err().find("second signal: exiting now"), std::string::npos) << p.err();
  // It did not wait for the drain: the drain never got to say how it ended.
  EXPECT_EQ(p.err().find("shutdown drain"), std::string::npos) << p.err();
}

TEST(ProcessConfig, BadConfigExitsTwoWithFileLineColumn) {
  temp_dir dir;
  dir.write("bad.toml",
            "[server]\naddress = \"127.0.0.1:9\"\n\n[[engine]]\nreplica_id = \"r\"\n"
            "model_id = \"m\"\ndp_mode = \"split\"\n");
  child_process p({binary, "--config", dir.file("bad.toml")}, dir.path());
  const auto code = p.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2) << p.err();
  const std::string all = p.out() + p.err();
  // The offending value is on line 7: "dp_mode = \"split\"".
  const std::regex where(std::regex_replace(dir.file("bad.toml"), std::regex(R"([.^$|()\[\]{}*+?\\])"),
                                            R"(\$&)") +
                         ":7:[0-9]+:");
  EXPECT_TRUE(std::regex_search(all, where)) << all;
  EXPECT_NE(all.find("split"), std::string::npos) << all;
}

TEST(ProcessConfig, SyntaxErrorAlsoNamesThePlace) {
  temp_dir dir;
  dir.write("broken.toml", "[server]\naddress = \"127.0.0.1:9\n");
  child_process p({binary, "--config", dir.file("broken.toml")}, dir.path());
  const auto code = p.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2) << p.err();
  EXPECT_NE((p.out() + p.err()).find("broken.toml:2:"), std::string::npos) << p.err();
}

// Every configuration error exits 2 before anything starts, in the daemon and
// in --check alike; nothing may block or read without bound on the way there.

// A daemon configuration that is valid apart from its [admin] table. The server is never dialled:
// the process must stop before that.
std::string admin_toml(const std::string& admin) {
  return "[server]\naddress = \"127.0.0.1:9\"\n\n[log]\nformat = \"text\"\n\n[admin]\n" + admin +
         "\n[[engine]]\nreplica_id = \"r\"\nmodel_id = \"m\"\n[engine.metrics]\nurl = \"\"\n";
}

// Runs the binary on `config`, as the daemon and as --check; both must exit 2 in time, naming
// `key` and `what`, and the daemon must not have started a pipeline.
void expect_refused_before_start(const temp_dir& dir, const std::string& config,
                                 const std::string& key, const std::string& what) {
  for (const bool check : {false, true}) {
    std::vector<std::string> args{binary, "--config", config};
    if (check) args.push_back("--check");
    child_process p(args, dir.path());
    const auto code = p.wait(10s);
    ASSERT_TRUE(code.has_value()) << (check ? "--check" : "daemon") << " did not exit\n"
                                  << p.err();
    EXPECT_EQ(*code, 2) << (check ? "--check: " : "daemon: ") << p.err();
    EXPECT_NE(p.err().find(key), std::string::npos) << p.err();
    EXPECT_NE(p.err().find(what), std::string::npos) << p.err();
    EXPECT_EQ(p.err().find("subscribed"), std::string::npos) << "a pipeline started\n" << p.err();
    EXPECT_EQ(p.out(), "");
  }
}

TEST(ProcessConfig, FifoAsConfigIsRefusedAtOnce) {
  temp_dir dir;
  const std::string fifo = dir.file("kvrelay.toml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_refused_before_start(dir, fifo, fifo + ": config file", "is a FIFO, not a regular file");
}

TEST(ProcessConfig, DeviceOrDirectoryOrEmptyTokenFileExitsTwo) {
  temp_dir dir;
  ::mkdir(dir.file("tokens").c_str(), 0700);
  dir.write("empty", "");
  const std::pair<std::string, std::string> cases[] = {
      {"/dev/zero", "is a character device, not a regular file"},
      {dir.file("tokens"), "is a directory, not a regular file"},
      {dir.file("empty"), "is empty"}};
  for (const auto& [token_file, what] : cases) {
    SCOPED_TRACE(token_file);
    dir.write("kvrelay.toml", admin_toml("listen = \"127.0.0.1:0\"\ntoken_file = \"" +
                                         token_file + "\"\n"));
    expect_refused_before_start(dir, dir.file("kvrelay.toml"), "kvrelay.toml:9:14: "
                                "admin.token_file", what);
  }
}

TEST(ProcessConfig, NonLoopbackAdminWithoutTokenExitsTwo) {
  temp_dir dir;
  for (const char* listen : {"0.0.0.0:0", "127.attacker.example:0", ":0"}) {
    SCOPED_TRACE(listen);
    dir.write("kvrelay.toml", admin_toml(std::string("listen = \"") + listen + "\"\n"));
    expect_refused_before_start(dir, dir.file("kvrelay.toml"), "kvrelay.toml:8:10: admin.listen",
                                "is not a loopback address; set admin.token_file");
  }
}

// A typo in an injected sidecar's arguments: the one line a crash-looping container shows names
// the flag meant, and the usage does not bury it.
TEST(ProcessConfig, UnknownFlagNamesTheLikelyFlagOnOneLine) {
  temp_dir dir;
  child_process p({binary, "--replicaid=vllm-0", "--model-id=m"}, dir.path());
  const auto code = p.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  const auto err = p.err();
  EXPECT_EQ(err.rfind("flag provided but not defined: --replicaid; did you mean --replica-id?\n", 0),
            0u)
      << err;
  EXPECT_NE(err.find("--help"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
  EXPECT_EQ(p.out(), "");
}

// The first line (and every line) follows --log-format / [log] format; before, the daemon set the
// format when it started, after "kvevent-subscriber starting" was already written as JSON.
TEST(ProcessLog, TextFormatHoldsFromTheFirstLine) {
  temp_dir dir;
  dir.write("text.toml", "[log]\nformat = \"text\"\n");
  const std::vector<std::string> engine{"--replica-id=r", "--model-id=m",
                                        "--server=127.0.0.1:9", "--engine-metrics-url=",
                                        "--admin-listen=", "--engine-endpoint=tcp://127.0.0.1:9"};
  for (const bool by_flag : {true, false}) {
    SCOPED_TRACE(by_flag ? "--log-format text" : "[log] format = \"text\"");
    std::vector<std::string> args{binary};
    if (by_flag) args.push_back("--log-format=text");
    else args.insert(args.end(), {"--config", dir.file("text.toml")});
    args.insert(args.end(), engine.begin(), engine.end());
    child_process p(args, dir.path());
    ASSERT_GT(p.pid(), 0);
    // The event that proves the first lines are out: the pipeline subscribed.
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (p.err().find("subscribed to engine KV events") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline && !p.wait(50ms).has_value()) {
    }
    p.signal(SIGTERM);
    const auto code = p.wait(10s);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0) << p.err();
    const auto err = p.err();
    ASSERT_NE(err.find("subscribed to engine KV events"), std::string::npos) << err;
    EXPECT_NE(err.find(" INFO kvevent-subscriber starting "), std::string::npos) << err;
    EXPECT_EQ(err.find('{'), std::string::npos) << "a JSON line under text format:\n" << err;
  }
  // A configuration error is written in the flag's format too.
  child_process bad({binary, "--log-format=text", "--replica-id=r"}, dir.path());
  const auto code = bad.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(bad.err().find(" ERROR invalid config"), std::string::npos) << bad.err();
  EXPECT_EQ(bad.err().find('{'), std::string::npos) << bad.err();
}

// Each thread of process `pid`: its name → the scheduling policies its threads of that name
// run under (field 41 of /proc/PID/task/TID/stat; 0 normal, 3 batch, 5 idle).
std::map<std::string, std::set<int>> thread_policies(pid_t pid) {
  std::map<std::string, std::set<int>> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string stat = read_file(dir + "/" + e->d_name + "/stat");
    const auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));  // field 3 (state) onwards
    std::string field;
    for (int i = 3; i <= 41 && rest >> field; ++i)
      if (i == 41) out[stat.substr(open + 1, close - open - 1)].insert(std::stoi(field));
  }
  closedir(d);
  return out;
}

// [cpu] scheduling: every thread the daemon runs (CAF's, ZMQ's, gRPC's, its own) is SCHED_BATCH
// by default, and keeps the normal policy under `inherit`, by flag or file. (What is kept when
// kvrelay starts under another policy: tests/daemon/cpu_setup_test.cpp.)
TEST(ProcessScheduling, EveryThreadRunsUnderThePolicyTheSettingNames) {
  if ((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) != SCHED_OTHER)
    GTEST_SKIP() << "the test runs under another policy than the normal one, which kvrelay keeps";
  temp_dir dir;
  dir.write("inherit.toml", "[cpu]\nscheduling = \"inherit\"\n");
  const std::vector<std::string> engine{"--replica-id=r", "--model-id=m", "--server=127.0.0.1:9",
                                        "--engine-metrics-url=", "--admin-listen=",
                                        "--engine-endpoint=tcp://127.0.0.1:9"};
  struct run {
    const char* name;
    std::vector<std::string> extra;
    int policy;
    const char* logged;
  };
  const std::vector<run> runs{
      {"default", {}, SCHED_BATCH, "policy=batch why=set"},
      {"--cpu-scheduling=inherit", {"--cpu-scheduling=inherit"}, SCHED_OTHER, "policy=normal"},
      {"[cpu] scheduling = \"inherit\"", {"--config", dir.file("inherit.toml")}, SCHED_OTHER,
       "policy=normal"},
  };
  for (const auto& r : runs) {
    SCOPED_TRACE(r.name);
    std::vector<std::string> args{binary, "--log-format=text"};
    args.insert(args.end(), r.extra.begin(), r.extra.end());
    args.insert(args.end(), engine.begin(), engine.end());
    child_process p(args, dir.path());
    ASSERT_GT(p.pid(), 0);
    ASSERT_TRUE(wait_logged(p, "subscribed to engine KV events")) << p.err();
    // The pipeline runs: kvrelay's own ingress thread and CAF's workers are up (ZMQ's and gRPC's
    // threads were made before them).
    std::map<std::string, std::set<int>> threads;
    const bool up = wait_until(
        [&] {
          threads = thread_policies(p.pid());
          return threads.count("kvr.ingress") && threads.count("caf.multiplexer");
        },
        15s);
    std::string names;
    for (const auto& [name, policies] : threads) names += " " + name;
    ASSERT_TRUE(up) << "threads:" << names;
    EXPECT_GE(threads.size(), 5u) << "threads:" << names;
    for (const auto& [name, policies] : threads)
      EXPECT_EQ(policies, std::set<int>{r.policy}) << "thread " << name;
    const auto err = p.err();
    const auto said = err.find("cpu scheduling");
    EXPECT_NE(said, std::string::npos) << err;
    EXPECT_LT(err.find("kvevent-subscriber starting"), said) << "the start line comes first\n"
                                                             << err;
    EXPECT_NE(err.find(r.logged), std::string::npos) << err;
    p.signal(SIGTERM);
    const auto code = p.wait(10s);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0) << p.err();
  }
}

TEST(ProcessVersion, NamesTheLibrariesItRunsWith) {
  temp_dir dir;
  child_process p({binary, "--version"}, dir.path());
  const auto code = p.wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  const auto out = p.out();
  for (const char* lib : {"kvrelay ", "CAF 0.17.6", "libzmq 4.", "gRPC 1.", "protobuf 3."})
    EXPECT_NE(out.find(lib), std::string::npos) << lib << " missing from:\n" << out;
}

// The source it was built from: the git commit, and that commit's time as the build date (never
// the wall clock, so two builds of one commit are the same bytes).
TEST(ProcessVersion, NamesTheRevisionAndTheCommitsDate) {
  temp_dir dir;
  child_process p({binary, "--version"}, dir.path());
  ASSERT_EQ(p.wait(10s), 0);
  const auto out = p.out();
  const std::string revision = build::revision();
  ASSERT_NE(revision, "unknown") << "built from a git checkout";
  EXPECT_NE(out.find("\nrevision " + revision + "\n"), std::string::npos) << out;
  const std::string hex = revision.substr(0, revision.find('-'));
  ASSERT_EQ(hex.size(), 40u) << revision;
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << revision;
  // The date git gives for that commit, in UTC.
  child_process git({"/bin/sh", "-c",
                     "TZ=UTC git -C \"$0\" log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ "
                     "--format=%cd \"$1\"",
                     KVRELAY_SOURCE_DIR, hex},
                    dir.path());
  ASSERT_EQ(git.wait(10s), 0) << git.err();
  auto date = git.out();
  while (!date.empty() && date.back() == '\n') date.pop_back();
  ASSERT_EQ(date.size(), 20u) << date;
  if (std::getenv("SOURCE_DATE_EPOCH") == nullptr) {
    EXPECT_EQ(std::string(build::date()), date) << "the build date is the commit's time";
  }
  EXPECT_NE(out.find("\nbuild date " + std::string(build::date()) + " "), std::string::npos)
      << out;
}

}  // namespace
}  // namespace kvrelay::faults
