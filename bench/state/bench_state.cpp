// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// What one durable-index snapshot costs at N resident blocks (default 1 M):
//   bench_state [blocks] [adapters] [dir]
// Per repeat: the shard's pause (export_partitions: the only part that runs on the shard actor,
// so the worst pause ingestion sees), encoding (CPU), bytes on disk, the atomic write (temp file,
// fsync, rename, fsync of the directory), and the restore (read + decode + import into a fresh
// partition set, with the upserts it reports). Wall times of one process on a shared machine:
// compare figures within one run. Prints one JSON object per repeat and a summary line.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "actors/shard/partition_set.hpp"
#include "base/fingerprint.hpp"
#include "durable/format/snapshot_format.hpp"
#include "durable/state_store.hpp"

namespace {

using namespace kvrelay;
using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double cpu_ms() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 + ru.ru_stime.tv_sec * 1e3 +
         ru.ru_stime.tv_usec / 1e3;
}

// `blocks` resident blocks in chains of 4 over `adapters` partitions (adapter 0 = the base model).
partition_set build(size_t blocks, size_t adapters) {
  partition_set p;
  std::mt19937_64 rng(42);
  std::vector<std::string> names;
  for (size_t a = 0; a < adapters; ++a) names.push_back(a == 0 ? "" : "lora-" + std::to_string(a));
  const size_t per_event = 4;
  size_t made = 0;
  bool declared = false;
  while (made < blocks) {
    shard_work w;
    w.epoch = 1;
    if (!declared) {
      w.new_partitions = names;
      declared = true;
    }
    for (size_t e = 0; e < 64 && made < blocks; ++e) {
      kv_event ev;
      ev.type = event_type::stored;
      auto& s = ev.stored;
      for (size_t b = 0; b < per_event; ++b) s.block_hashes.push_back(engine_hash::from_int(rng()));
      s.token_ids.resize(per_event * 16);
      for (auto& t : s.token_ids) t = static_cast<uint32_t>(rng() % 151936);
      s.block_size = 16;
      s.first_tainted_block = static_cast<uint32_t>(per_event);
      w.events.push_back(std::move(ev));
      w.partitions.push_back(static_cast<uint32_t>(rng() % adapters));
      made += per_event;
    }
    p.apply(w);
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t blocks = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const size_t adapters = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const std::string dir = argc > 3 ? argv[3] : "/tmp";
  const std::string file = dir + "/bench_state.kvsnap";
  std::fprintf(stderr, "building %zu blocks over %zu adapter partition(s)...\n", blocks, adapters);
  partition_set parts = build(blocks, adapters);
  size_t resident = 0;
  for (uint32_t i = 0; i < parts.size(); ++i) resident += parts.index(i).size();
  std::vector<double> pauses, encodes, writes, restores, pause_cpus, encode_cpus, restore_cpus;
  size_t bytes = 0;
  for (int rep = 0; rep < 5; ++rep) {
    snapshot::pipeline_snapshot s;
    s.who = snapshot::identity{"bench", "m", "", "vllm", "tcp://127.0.0.1:5557", "", 0};
    s.engine.start_time = 1767225600.25;
    s.next_seq = 123456;
    s.history_from = 0;
    auto t0 = clock_type::now();
    double cp = cpu_ms();
    parts.export_partitions(s.partitions);  // what the shard actor does: its pause
    const double pause = ms_since(t0);
    const double pause_cpu = cpu_ms() - cp;
    const double c0 = cpu_ms();
    t0 = clock_type::now();
    const std::string encoded = snapshot::encode(s);
    const double encode = ms_since(t0);
    const double encode_cpu = cpu_ms() - c0;
    bytes = encoded.size();
    t0 = clock_type::now();
    // The production path: streamed encode into the temp file, fsync, rename, fsync dir.
    const auto w = write_atomically(
        file, [&s](const std::function<void(std::string_view)>& sink) { snapshot::encode(s, sink); });
    const double write = ms_since(t0);
    if (!w) {
      std::fprintf(stderr, "write failed: %s\n", w.error().context.c_str());
      return 1;
    }
    t0 = clock_type::now();
    cp = cpu_ms();
    std::string read_back;
    {
      std::ifstream in(file, std::ios::binary);
      in.seekg(0, std::ios::end);
      read_back.resize(static_cast<size_t>(in.tellg()));
      in.seekg(0);
      in.read(read_back.data(), static_cast<std::streamsize>(read_back.size()));
    }
    const double read_ms = ms_since(t0);
    auto t1 = clock_type::now();
    auto d = snapshot::decode(read_back);
    if (!d.snapshot) {
      std::fprintf(stderr, "decode failed: %s\n", d.detail.c_str());
      return 1;
    }
    const double decode_ms = ms_since(t1);
    t1 = clock_type::now();
    partition_set fresh;
    const size_t upserts = fresh.import_partitions(d.snapshot->partitions);
    const double import_ms = ms_since(t1);
    const double restore = ms_since(t0);
    const double restore_cpu = cpu_ms() - cp;
    pauses.push_back(pause);
    pause_cpus.push_back(pause_cpu);
    encode_cpus.push_back(encode_cpu);
    restore_cpus.push_back(restore_cpu);
    encodes.push_back(encode);
    writes.push_back(write);
    restores.push_back(restore);
    std::printf("{\"blocks\": %zu, \"adapters\": %zu, \"bytes\": %zu, \"bytes_per_block\": %.2f, "
                "\"shard_pause_ms\": %.2f, \"shard_pause_cpu_ms\": %.2f, \"encode_ms\": %.2f, \"encode_cpu_ms\": %.2f, "
                "\"encode_write_fsync_ms\": %.2f, \"restore_ms\": %.2f, \"read_ms\": %.2f, \"decode_ms\": %.2f, "
                "\"import_ms\": %.2f, \"restore_cpu_ms\": %.2f, \"restored_upserts\": %zu}\n",
                resident, adapters, bytes, static_cast<double>(bytes) / resident, pause, pause_cpu,
                encode, encode_cpu, write, restore, read_ms, decode_ms, import_ms, restore_cpu,
                upserts);
  }
  const auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const auto worst = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::printf("[bench_state] %zu blocks, %zu B on disk (%.2f B/block); medians of 5, wall (CPU): "
              "shard pause %.1f ms (%.1f; worst wall %.1f), encode %.1f ms (%.1f), streamed encode+write+fsync "
              "%.1f ms, restore %.1f ms (%.1f)\n",
              resident, bytes, static_cast<double>(bytes) / resident, med(pauses),
              med(pause_cpus), worst(pauses), med(encodes), med(encode_cpus), med(writes),
              med(restores), med(restore_cpus));
  std::remove(file.c_str());
  return 0;
}
