// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// What the durable index's delta log costs:
//   bench_log [seconds_per_rate (0: skip)] [replay_blocks]
// 1. `append`: log_writer::batch over the fake engine's realistic batches (block size 16, Zipf
//    system prompts, 8 LoRA adapters, LRU evictions once the 64 Ki-block cache is full), on one
//    thread as the ingress' ZMQ thread calls it: CPU and bytes per block, and, for the choice in
//    docs/architecture.md, what a log of index deltas would write instead (20 B per stored or
//    removed block as the snapshot stores it, plus the same 28 B record per batch).
// 2. `rate`: the daemon in process, the fake publisher paced at 10 k and 100 k blocks/s for N s,
//    with a state dir and without: CPU of the ingress thread (kvr.ingress, where the log is
//    appended), of the state thread (kvr.state: evidence, snapshots) and of the process, per
//    block; bytes the log and the snapshots wrote per block (kvrelay_state_log_bytes_total,
//    kvrelay_snapshot_written_bytes_total).
// 3. `replay`: a log of `replay_blocks` blocks (no snapshot; default the most a restore at 1 M and
//    at 10 M resident blocks replays) restored through the real data path (read, decode, index):
//    seconds from the start to the plan and to the log replayed.
// One process on a shared machine: compare figures within one run. One JSON object per line.

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include "durable/format/snapshot_log_io.hpp"
#include "durable/state_store.hpp"
#include "tests/support/fault_fixture.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/fake-engine/workload.hpp"

namespace {

using namespace kvrelay;
using namespace kvrelay::faults;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

double secs_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double thread_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

// CPU seconds of every thread of this process named `comm` (utime + stime from /proc).
double threads_cpu_s(const std::string& comm) {
  double total = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return 0;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    std::ifstream c(base + "/comm");
    std::string name;
    std::getline(c, name);
    if (name != comm) continue;
    std::ifstream s(base + "/stat");
    std::string line;
    std::getline(s, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    std::vector<std::string> f;
    while (rest >> field) f.push_back(field);
    if (f.size() > 12) total += (std::stod(f[11]) + std::stod(f[12])) / tick;
  }
  ::closedir(d);
  return total;
}

struct batch {
  std::string payload;
  uint64_t blocks = 0;       // stored + removed block hashes
  uint64_t stored = 0;
};

// The workload's batches, encoded once (not in the measured path).
std::vector<batch> make_batches(size_t n) {
  fake::workload_options o;
  o.seed = 36;
  o.capacity_blocks = 65536;
  o.lora_adapters = 8;
  fake::workload w(o);
  std::vector<batch> out;
  out.reserve(n);
  fake::encode_options eo;
  eo.ts = 1767225600.0;
  for (size_t i = 0; i < n; ++i) {
    const auto events = w.next_batch();
    batch b;
    b.payload = fake::encode_batch(events, eo);
    for (const auto& e : events) {
      b.blocks += e.block_hashes.size();
      if (e.t == fake::fake_event::type::stored) b.stored += e.block_hashes.size();
    }
    out.push_back(std::move(b));
  }
  return out;
}

void append(const std::vector<batch>& batches) {
  temp_dir dir;
  snapshot::writer_options o;
  o.stem = dir.path() + "/bench-0000abcd";
  o.pipeline_key = 1;
  o.max_bytes = uint64_t{1} << 40;
  snapshot::log_writer w(o);
  uint64_t blocks = 0, payload = 0;
  for (const auto& b : batches) {
    blocks += b.blocks;
    payload += b.payload.size();
  }
  const double c0 = thread_cpu_s();
  const auto t0 = clock_type::now();
  uint64_t seq = 0;
  for (const auto& b : batches) w.batch(seq++, b.payload);
  const double wall = secs_since(t0);
  const double cpu = thread_cpu_s() - c0;
  const auto st = w.read();
  const double deltas = 20.0 * static_cast<double>(blocks) +
                        static_cast<double>(batches.size()) * 28.0;
  std::printf("{\"part\": \"append\", \"batches\": %zu, \"blocks\": %llu, "
              "\"blocks_per_batch\": %.1f, \"payload_bytes_per_block\": %.1f, "
              "\"log_bytes_per_block\": %.1f, \"index_delta_log_bytes_per_block\": %.1f, "
              "\"cpu_ns_per_block\": %.1f, \"cpu_ns_per_batch\": %.0f, \"wall_s\": %.3f}\n",
              batches.size(), static_cast<unsigned long long>(blocks),
              static_cast<double>(blocks) / static_cast<double>(batches.size()),
              static_cast<double>(payload) / static_cast<double>(blocks),
              static_cast<double>(st.appended_bytes) / static_cast<double>(blocks),
              deltas / static_cast<double>(blocks), cpu * 1e9 / static_cast<double>(blocks),
              cpu * 1e9 / static_cast<double>(batches.size()), wall);
}

// The daemon in process against the fake publisher at `rate` blocks/s for `seconds`.
void rate(const std::vector<batch>& batches, double blocks_per_s, int seconds, bool durable) {
  fault_env::options o;
  o.buffer_steps = 10000;
  fault_env env(o);
  temp_dir dir;
  fake::engine_http http(fake::engine_description{}, "127.0.0.1", 0, nullptr);
  env.cfg.engines[0].metrics.url = durable ? http.url() + "/metrics" : "";
  if (durable) env.cfg.state.dir = dir.path() + "/state";
  env.cfg.log.level = config::log_level::error;
  std::string err;
  if (!env.start_daemon(&err)) {
    std::fprintf(stderr, "start: %s\n", err.c_str());
    std::exit(1);
  }
  const double ing0 = threads_cpu_s("kvr.ingress"), st0 = threads_cpu_s("kvr.state");
  const double p0 = process_cpu_s();
  const auto t0 = clock_type::now();
  uint64_t blocks = 0;
  size_t i = 0;
  while (secs_since(t0) < seconds) {
    const auto& b = batches[i++ % batches.size()];
    env.engine->publish(b.payload);
    blocks += b.blocks;
    const double due = static_cast<double>(blocks) / blocks_per_s;
    const double now = secs_since(t0);
    if (due > now) std::this_thread::sleep_for(std::chrono::duration<double>(due - now));
  }
  // Until the ingress has delivered everything published (or 30 s).
  wait_until([&] { return env.metric("kvrelay_batches_total") >= static_cast<double>(i); }, 30s);
  const double wall = secs_since(t0);
  const double ing = threads_cpu_s("kvr.ingress") - ing0;
  const double st = threads_cpu_s("kvr.state") - st0;
  const double proc = process_cpu_s() - p0;
  const double log_bytes = durable ? env.metric("kvrelay_state_log_bytes_total") : 0;
  const double snap_bytes = durable ? env.metric("kvrelay_snapshot_written_bytes_total") : 0;
  const double n = static_cast<double>(blocks);
  std::printf("{\"part\": \"rate\", \"state_dir\": %s, \"target_blocks_per_s\": %.0f, "
              "\"blocks\": %llu, \"achieved_blocks_per_s\": %.0f, "
              "\"ingress_cpu_ns_per_block\": %.0f, \"state_cpu_ns_per_block\": %.0f, "
              "\"process_cpu_ns_per_block\": %.0f, \"log_bytes_per_block\": %.1f, "
              "\"snapshot_bytes_per_block\": %.1f, \"snapshots\": %g}\n",
              durable ? "true" : "false", blocks_per_s, static_cast<unsigned long long>(blocks),
              n / wall, ing * 1e9 / n, st * 1e9 / n, proc * 1e9 / n, log_bytes / n,
              snap_bytes / n,
              durable ? env.metric("kvrelay_snapshot_writes_total", {{"outcome", "written"}}) : 0);
  env.d->stop();
  env.d.reset();
}

// A restart whose state is a delta log of `want_blocks` blocks (written here as the ingress would
// have, in the pipeline's state dir, for the engine process the fake /metrics names): seconds from
// the start to the plan (reading and checking the segments, the engine's evidence) and to every
// logged batch decoded and indexed. A restore's log is at most the last snapshot's size (RD9):
// at ~47 B a block in the log, 0.43 blocks of log per resident block.
void replay(const std::vector<batch>& batches, uint64_t want_blocks) {
  fault_env::options o;
  o.buffer_steps = 10000;
  fault_env env(o);
  temp_dir dir;
  fake::engine_http http(fake::engine_description{}, "127.0.0.1", 0, nullptr);
  const std::string metrics = http.url() + "/metrics";
  env.cfg.engines[0].metrics.url = metrics;
  env.cfg.state.dir = dir.path() + "/state";
  env.cfg.log.level = config::log_level::error;
  ::mkdir(env.cfg.state.dir.c_str(), 0700);
  const auto& e = env.cfg.engines[0];
  const snapshot::identity who{e.replica_id, e.model_id, e.tenant_id, e.hash_scheme,
                               e.endpoint, e.topic, 0};
  std::string err;
  const auto evidence = metrics_evidence(metrics, 2s)(err);
  if (evidence.empty()) {
    std::fprintf(stderr, "evidence: %s\n", err.c_str());
    std::exit(1);
  }
  snapshot::writer_options w;
  w.stem = snapshot::log_stem(snapshot_file(env.cfg.state.dir, e.replica_id, who));
  w.pipeline_key = snapshot::pipeline_key(who);
  w.segment_bytes = size_t{8} << 20;
  w.max_bytes = uint64_t{1} << 40;
  uint64_t blocks = 0, seq = 0;
  {
    snapshot::log_writer log(w);
    log.begin(true, 0, evidence);
    log.first_batch(0);
    while (blocks < want_blocks) {
      const auto& b = batches[seq % batches.size()];
      log.batch(seq++, b.payload);
      blocks += b.blocks;
    }
  }
  // The engine holds those seqs too (its ring is asked from the log's end).
  env.engine->skip(seq);
  const auto t0 = clock_type::now();
  if (!env.start_daemon(&err, /*sync=*/false)) {
    std::fprintf(stderr, "start: %s\n", err.c_str());
    std::exit(1);
  }
  wait_until([&] { return env.metric("kvrelay_snapshot_restores_total",
                                     {{"outcome", "restored"}}) == 1; },
             120s);
  const double planned = secs_since(t0);
  wait_until([&] { return env.metric("kvrelay_batches_total") >= static_cast<double>(seq); },
             600s);
  const double replayed = secs_since(t0);
  std::printf("{\"part\": \"replay\", \"batches\": %llu, \"blocks\": %llu, \"log_mb\": %.1f, "
              "\"start_to_plan_s\": %.3f, \"start_to_replayed_s\": %.3f, "
              "\"replay_blocks_per_s\": %.0f, \"decoded\": %g}\n",
              static_cast<unsigned long long>(seq), static_cast<unsigned long long>(blocks),
              static_cast<double>(snapshot::list_segments(w.stem).size()) * 8.0, planned,
              replayed, static_cast<double>(blocks) / (replayed - planned),
              env.metric("kvrelay_batches_total"));
  env.d->stop();
  env.d.reset();
}

}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 10;
  // The log a restore at 1 M and at 10 M resident blocks replays at most (0.43 per block).
  std::vector<uint64_t> replays{430000, 4300000};
  if (argc > 2) replays = {std::strtoull(argv[2], nullptr, 10)};
  const auto batches = make_batches(20000);
  append(batches);
  if (seconds > 0) {
    for (double r : {10000.0, 100000.0}) {
      rate(batches, r, seconds, false);
      rate(batches, r, seconds, true);
    }
  }
  for (uint64_t n : replays) replay(batches, n);
  return 0;
}
