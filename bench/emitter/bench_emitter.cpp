// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter's eviction path alone: units of evictions from a stand-in debouncer, through the
// real emitter and gRPC port, to a policy server on loopback. Prints one JSON line per
// configuration: evictions/s (wall) and CPU µs per eviction. `rpc` with max_in_flight 64 and one
// PublishEvent call object per eviction is what the emitter did before the eviction modes; the
// ratios between lines of one run are the figure (the machine is shared).
//
//   bench_emitter [--evictions N] [--unit N] [--cases rpc-64,rpc-256,rpc-1024,expire]
//                 [--sink PATH | --target HOST:PORT]
// The server is, by default, the demo policy server in count-only mode in this process
// (cpu_us_per_eviction is then both sides). --sink PATH starts that kvrelay-bench-sink binary in
// a process of its own and reads its CPU apart (sink_cpu_us_per_eviction; cpu_us_per_eviction is
// then the client's alone) and its stats after each case (sink_evictions, which must equal
// evictions): pass two builds of the sink to compare them on the same client. --target uses a
// server already listening (its CPU is not read).
#include <absl/synchronization/mutex.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/emitter/emitter_actor.hpp"
#include "messages/system_setup.hpp"
#include "tools/policy-server/service.hpp"

namespace {

using namespace kvrelay;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// A kvrelay-bench-sink in a child process: its port, CPU and eviction count.
class sink_process {
 public:
  explicit sink_process(const std::string& binary) {
    char dir_template[] = "/tmp/bench-emitter.XXXXXX";
    if (!mkdtemp(dir_template)) fail("mkdtemp");
    dir_ = dir_template;
    const std::string port_file = dir_ + "/port", stats_file = dir_ + "/stats";
    pid_ = fork();
    if (pid_ < 0) fail("fork");
    if (pid_ == 0) {
      execl(binary.c_str(), binary.c_str(), "--listen", "127.0.0.1:0", "--port-file",
            port_file.c_str(), "--stats-file", stats_file.c_str(), static_cast<char*>(nullptr));
      std::perror(binary.c_str());
      _exit(127);
    }
    for (int i = 0; i < 1000 && port_.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::ifstream in(port_file);
      std::getline(in, port_);
    }
    if (port_.empty()) fail("the sink wrote no port file within 10 s");
  }
  ~sink_process() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    std::remove((dir_ + "/port").c_str());
    std::remove((dir_ + "/stats").c_str());
    rmdir(dir_.c_str());
  }
  sink_process(const sink_process&) = delete;
  sink_process& operator=(const sink_process&) = delete;

  std::string target() const { return "127.0.0.1:" + port_; }

  // utime + stime of every thread of the sink, from /proc/<pid>/stat (clock-tick resolution).
  double cpu_seconds() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')');
    if (paren == std::string::npos) fail("cannot read the sink's /proc stat");
    std::istringstream fields(text.substr(paren + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    // After the command name: state is field 3, utime 14 and stime 15.
    for (int i = 3; i <= 13; ++i) fields >> field;
    fields >> utime >> stime;
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  // The sink's "evictions" counter (SIGUSR1 writes its stats file).
  unsigned long long evictions() const {
    const std::string path = dir_ + "/stats";
    std::remove(path.c_str());
    kill(pid_, SIGUSR1);
    for (int i = 0; i < 1000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::ifstream in(path);
      std::string json;
      if (!std::getline(in, json)) continue;
      const auto at = json.find("\"evictions\":");
      if (at != std::string::npos) return std::strtoull(json.c_str() + at + 12, nullptr, 10);
    }
    fail("the sink wrote no stats within 10 s");
  }

 private:
  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "bench_emitter: %s\n", what);
    std::exit(1);
  }

  std::string dir_, port_;
  pid_t pid_ = -1;
};

struct run_result {
  double seconds = 0, cpu = 0;
  bool ok = true, stalled = false;
};

run_result run(caf::actor_system& sys, const std::string& target, emitter::eviction_mode mode,
               size_t in_flight, size_t evictions, size_t per_unit) {
  pipeline_context ctx;
  ctx.name = "bench";
  ctx.identity = {"bench-0", "bench-model", "bench-tenant", "vllm"};
  emitter_options o;
  o.client.target = target;
  o.sequencer.mode = mode;
  o.sequencer.max_evictions_in_flight = in_flight;
  std::string err;
  auto em = spawn_emitter(sys, ctx, o, err);
  if (!em) {
    std::fprintf(stderr, "emitter: %s\n", err.c_str());
    std::exit(1);
  }
  caf::scoped_actor self{sys};
  // Warm up the connection with one clear.
  auto warm = std::make_shared<emit_unit>();
  warm->id = 0;
  warm->clear = true;
  self->send(em, target, emit_unit_ptr(warm));
  self->receive([](const emit_result&) {});
  std::vector<emit_unit_ptr> units;
  uint64_t fp = 1;
  for (size_t done = 0; done < evictions; done += per_unit) {
    auto u = std::make_shared<emit_unit>();
    u->id = units.size() + 1;
    for (size_t i = 0; i < per_unit && done + i < evictions; ++i)
      u->evicts.push_back({fp++ * 0x9e3779b97f4a7c15ULL, (i % 5 == 0) ? "lora-1" : "", 1});
    units.push_back(std::move(u));
  }
  run_result r;
  const double c0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  // Two units in flight, as the debouncer's credit window allows.
  size_t sent = 0, answered = 0;
  while (sent < units.size() && sent < 2) self->send(em, target, units[sent++]);
  // A unit unanswered for 30 s ends the case as stalled: the figures are then meaningless, and
  // a hung emitter must not hang the run.
  while (answered < units.size() && !r.stalled) {
    self->receive(
        [&](const emit_result& res) {
          r.ok = r.ok && res.ok;
          ++answered;
          if (sent < units.size()) self->send(em, target, units[sent++]);
        },
        caf::after(std::chrono::seconds(30)) >> [&] { r.stalled = true; });
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu = cpu_seconds() - c0;
  self->send_exit(em, caf::exit_reason::user_shutdown);
  self->wait_for(em);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // As the daemon does (daemon/main.cpp): Abseil's deadlock detection, on in Debian's build,
  // was ~5 % of the client's CPU here.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  size_t evictions = 200'000, per_unit = 4096;
  std::string sink_binary, target, cases = "rpc-64,rpc-256,rpc-1024,expire";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--evictions")) evictions = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--unit")) per_unit = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--sink")) sink_binary = argv[i + 1];
    else if (!std::strcmp(argv[i], "--target")) target = argv[i + 1];
    else if (!std::strcmp(argv[i], "--cases")) cases = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_emitter: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::unique_ptr<policy::policy_server> server;
  std::unique_ptr<sink_process> sink;
  if (!sink_binary.empty()) {
    sink = std::make_unique<sink_process>(sink_binary);
    target = sink->target();
  } else if (target.empty()) {
    policy::server_options so;
    so.index.count_only = true;
    server = std::make_unique<policy::policy_server>(so);
    if (!server->start()) return 1;
    target = server->target();
  }
  caf::actor_system_config cfg;
  setup_actor_system(cfg);
  // The daemon's scheduler, so the client CPU per eviction is the daemon's: with CAF's defaults
  // (4+ workers polling 500 times with a sleep after each job) their polling was a third of it.
  tune_scheduler(cfg);
  caf::actor_system sys{cfg};
  struct conf {
    const char* name;
    emitter::eviction_mode mode;
    size_t in_flight;
  };
  const conf confs[] = {{"rpc-64", emitter::eviction_mode::rpc, 64},
                        {"rpc-256", emitter::eviction_mode::rpc, 256},
                        {"rpc-1024", emitter::eviction_mode::rpc, 1024},
                        {"expire", emitter::eviction_mode::expire, 256}};
  unsigned long long sink_before = sink ? sink->evictions() : 0;
  for (const auto& c : confs) {
    if (("," + cases + ",").find(std::string(",") + c.name + ",") == std::string::npos) continue;
    // expire is orders of magnitude faster: give it more to measure.
    const size_t n = c.mode == emitter::eviction_mode::expire ? evictions * 10 : evictions;
    const double sink_c0 = sink ? sink->cpu_seconds() : 0;
    const auto r = run(sys, target, c.mode, c.in_flight, n, per_unit);
    std::string sink_fields;
    if (sink) {
      const double sink_cpu = sink->cpu_seconds() - sink_c0;
      const unsigned long long sink_after = sink->evictions();
      char buf[160];
      std::snprintf(buf, sizeof buf, ",\"sink_cpu_us_per_eviction\":%.3f,\"sink_evictions\":%llu",
                    sink_cpu / static_cast<double>(n) * 1e6, sink_after - sink_before);
      sink_fields = buf;
      sink_before = sink_after;
    }
    std::printf(
        "{\"case\":\"%s\",\"evictions\":%zu,\"ok\":%s,\"seconds\":%.3f,"
        "\"evictions_per_s\":%.0f,\"cpu_us_per_eviction\":%.3f%s%s}\n",
        c.name, n, r.ok && !r.stalled ? "true" : "false", r.seconds, static_cast<double>(n) / r.seconds,
        r.cpu / static_cast<double>(n) * 1e6, sink_fields.c_str(),
        r.stalled ? ",\"stalled\":true" : "");
    std::fflush(stdout);
  }
  return 0;
}
