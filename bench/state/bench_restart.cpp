// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// A kvrelay restart under load: the fake engine publishes ~20 k blocks/s (50 k blocks
// resident, its replay ring 10 000 batches: vLLM's default, ~2.5 s of this load); kvrelay is
// stopped the way SIGTERM does it (drain, final flush, last snapshot) and started again while the
// engine goes on. Reported: the restart's own time, then seconds from the stop until kvrelay has
// caught up with the engine, and until the policy server holds exactly what the engine holds
// (the engine paused once kvrelay caught up, so "exact" is a fixed target). With a state dir, and
// without it (the control: the ring cannot rebuild what was stored before its window).
//   bench_restart [seconds_of_warmup]
// One process on a shared machine: compare the two modes of one run.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/support/fault_fixture.hpp"
#include "tools/fake-engine/engine_http.hpp"

namespace {

using namespace kvrelay;
using namespace kvrelay::faults;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

double secs_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct paced_engine {
  explicit paced_engine(fault_env& e) : env(e) {}
  fault_env& env;
  std::atomic<bool> run{false};
  std::atomic<uint64_t> blocks{0};
  std::thread t;
  void start(double blocks_per_s) {
    run = true;
    t = std::thread([this, blocks_per_s] {
      const auto t0 = clock_type::now();
      uint64_t ops0 = env.model.ops();
      while (run.load()) {
        env.publish_steps(1);
        blocks = env.model.ops() - ops0;
        const double due = static_cast<double>(blocks.load()) / blocks_per_s;
        const double now = secs_since(t0);
        if (due > now) std::this_thread::sleep_for(std::chrono::duration<double>(due - now));
      }
    });
  }
  void stop() {
    run = false;
    if (t.joinable()) t.join();
  }
};

// With the engine paused across the restart: from the moment the restore step proved the engine
// (kvrelay_snapshot_restores_total{outcome="restored"} is 1) until the server holds every block
// the engine held at the stop (nothing changes meanwhile): how fast a restore reaches the server.
void restore_to_server(int warmup_s) {
  fault_env::options o;
  o.buffer_steps = 10000;
  o.model.capacity = 50000;
  o.model.lora_fraction = 0.2;
  fault_env env(o);
  temp_dir dir;
  fake::engine_http http(fake::engine_description{}, "127.0.0.1", 0, nullptr);
  env.cfg.engines[0].metrics.url = http.url() + "/metrics";
  env.cfg.state.dir = dir.path() + "/state";
  env.cfg.log.level = config::log_level::error;
  std::string err;
  if (!env.start_daemon(&err)) std::exit(1);
  paced_engine engine(env);
  engine.start(20000);
  std::this_thread::sleep_for(std::chrono::seconds(warmup_s));
  engine.stop();
  if (!env.wait_consistent(30s).empty()) std::exit(1);
  env.d->drain(5s);
  env.d->stop();
  env.d.reset();
  const auto t0 = clock_type::now();
  if (!env.start_daemon(&err, /*sync=*/false)) std::exit(1);
  wait_until([&] { return env.metric("kvrelay_snapshot_restores_total",
                                     {{"outcome", "restored"}}) == 1; },
             30s);
  const double proved = secs_since(t0);
  const std::string diff = env.wait_consistent(30s);
  const double on_server = secs_since(t0);
  std::printf("{\"mode\": \"state_dir_quiet\", \"resident\": %zu, \"start_to_proof_s\": %.3f, "
              "\"proof_to_server_exact_s\": %s}\n",
              env.model.resident(), proved,
              diff.empty() ? std::to_string(on_server - proved).c_str() : "null");
  env.d->stop();
  env.d.reset();
}

void one(bool durable, int warmup_s) {
  fault_env::options o;
  o.buffer_steps = 10000;
  o.model.capacity = 50000;
  o.model.lora_fraction = 0.2;
  fault_env env(o);
  temp_dir dir;
  env.cfg.engines[0].metrics.url = "";
  env.cfg.log.level = config::log_level::error;
  std::unique_ptr<fake::engine_http> http;
  if (durable) {
    http = std::make_unique<fake::engine_http>(fake::engine_description{}, "127.0.0.1", 0, nullptr);
    env.cfg.engines[0].metrics.url = http->url() + "/metrics";
    env.cfg.state.dir = dir.path() + "/state";
  }
  std::string err;
  if (!env.start_daemon(&err)) {
    std::fprintf(stderr, "start: %s\n", err.c_str());
    std::exit(1);
  }
  paced_engine engine(env);
  engine.start(20000);
  std::this_thread::sleep_for(std::chrono::seconds(warmup_s));
  const auto t0 = clock_type::now();
  env.d->drain(5s);
  env.d->stop();
  env.d.reset();
  if (!env.start_daemon(&err, /*sync=*/false)) {
    std::fprintf(stderr, "restart: %s\n", err.c_str());
    std::exit(1);
  }
  const double restarted = secs_since(t0);
  wait_until([&] { return env.ingress_flag("live") && !env.ingress_flag("catching_up"); }, 60s);
  const double caught_up = secs_since(t0);
  engine.stop();
  const std::string diff = env.wait_consistent(30s);
  const double exact = secs_since(t0);
  const auto restores = env.metric("kvrelay_snapshot_restores_total", {{"outcome", "restored"}});
  std::printf("{\"mode\": \"%s\", \"resident\": %zu, \"published_blocks\": %llu, "
              "\"restart_s\": %.2f, \"caught_up_s\": %.2f, \"exact_s\": %s, \"restored\": %g, "
              "\"history_lost\": %g, \"index_incomplete\": %g}\n",
              durable ? "state_dir" : "none", env.model.resident(),
              static_cast<unsigned long long>(engine.blocks.load()), restarted, caught_up,
              diff.empty() ? std::to_string(exact).c_str() : "null", restores,
              env.metric("kvrelay_history_lost_total"), env.metric("kvrelay_index_incomplete"));
  if (!diff.empty()) std::fprintf(stderr, "%s: not exact after 30 s: %s\n",
                                  durable ? "state_dir" : "none", diff.substr(0, 200).c_str());
  env.d->stop();
  env.d.reset();
}

}  // namespace

int main(int argc, char** argv) {
  const int warmup = argc > 1 ? std::atoi(argv[1]) : 10;
  restore_to_server(warmup);
  one(true, warmup);
  one(false, warmup);
  return 0;
}
