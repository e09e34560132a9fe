// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// kvrelay-bench-loadgen: the engine side of the end-to-end benchmark. It pre-generates a realistic
// workload with the fake engine's workload model (block size 16, prompts of 512–8192 tokens with
// Zipf-shared system prefixes, LoRA traffic over 8 adapters, LRU evictions once the cache is full,
// a clear now and then), encodes it once, measures the same-run floor over exactly those payloads,
// then publishes it over ZMQ PUB at a target block rate or as fast as it can. The engine batch
// time (envelope ts) is patched in at publish time, so latency is measured from the real send.
//
// With --evict-go-file, a second phase: once that file exists, the engine frees its whole cache
// (BlockRemoved for every block still resident, in LRU order, in batches shaped like the stored
// phase's), so a benchmark can time evictions of blocks the server has seen.
//
// With --replay-bind, the engine also serves replay requests from a ring of its last
// --buffer-steps batches (as vLLM's ROUTER does); --prelude-batches N publishes the first N
// batches before waiting for --go-file, so a benchmark can start kvrelay against an engine whose
// ring already holds them (the cold-start catch-up).
//
// Output: one JSON object per line on stdout ({"kind":"generated"|"floor"|"published"|"evicted",
// ...}).
// tools/fake-engine paces by batches and encodes on the fly; a benchmark needs blocks/s pacing,
// longer prompts and an encoder that is not in the measured path, hence this separate tool.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sys/stat.h>

#include "base/fingerprint.hpp"
#include "bench/floor/floor.hpp"
#include "tools/fake-engine/engine_http.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/fake-engine/workload.hpp"

namespace {

using namespace kvrelay::fake;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

const char* k_usage =
    "Usage: kvrelay-bench-loadgen [flags]   (--x v or --x=v)\n"
    "  --bind EP            PUB endpoint of rank 0 (default tcp://127.0.0.1:5557; rank r: port+r)\n"
    "  --dp-size N          one engine's DP ranks on port+r, one workload each (default 1)\n"
    "  --engines N          N single-rank engines (a node) on port+10*i (default 1)\n"
    "  --blocks N           stored blocks to generate per rank (default 200000)\n"
    "  --rate B             total stored blocks/s; 0 = as fast as possible (default 0)\n"
    "  --block-size N       tokens per block (default 16)\n"
    "  --prompt-min T       shortest prompt in tokens (default 512)\n"
    "  --prompt-max T       longest prompt in tokens (default 8192)\n"
    "  --system-prompts N   shared prefixes, Zipf-picked (default 64)\n"
    "  --lora-adapters N    adapters in use (default 8)\n"
    "  --lora-fraction F    share of requests with an adapter (default 0.2)\n"
    "  --capacity N         engine GPU cache in blocks; LRU eviction beyond (default 65536)\n"
    "  --clear-prob P       AllBlocksCleared probability per batch (default 0.0005)\n"
    "  --clear-after N      one AllBlocksCleared once N blocks were stored (default 0: none)\n"
    "  --era ERA            wire era (default G)\n"
    "  --seed N             workload seed (default 1)\n"
    "  --floor-repeats N    floor passes (best of N; 0 = skip the floor; default 3)\n"
    "  --go-file PATH       wait (up to 120 s) until PATH exists before publishing\n"
    "  --replay-bind EP     serve replay requests on this ROUTER endpoint (default: no replay)\n"
    "  --buffer-steps N     the replay ring, in batches (default 10000; with --replay-bind)\n"
    "  --sndhwm N           the PUB's send high-water mark in messages; past it the engine drops\n"
    "                       (default 0: unbounded, the benchmark never drops on the engine side)\n"
    "  --prelude-batches N  publish the first N batches (per rank) as fast as possible before\n"
    "                       waiting for --go-file (\"prelude\" line; default 0)\n"
    "  --floor-only         generate, measure the floor, exit\n"
    "  --metrics-port-file PATH  serve vLLM's /metrics on an ephemeral loopback port (written to\n"
    "                       PATH): cache_config_info with num_gpu_blocks = --capacity (and idle\n"
    "                       request gauges), as an\n"
    "                       engine says what its cache holds\n"
    "  --linger-ms N        wait for queued messages at exit (default 30000)\n"
    "  --block-times PATH   write (fingerprint u64, publish time us i64) per stored block (two native\n"
    "                       int64), for exact per-block latency against the sink's receipts\n"
    "  --eviction-times PATH  the same records per removed block (its fingerprint, the publish\n"
    "                       time of its BlockRemoved), to join with the sink's eviction receipts\n"
    "  --evict-go-file PATH after publishing, wait (up to 300 s) until PATH exists, then remove\n"
    "                       every block still resident (LRU order; each batch has the shape of a\n"
    "                       stored batch: one BlockRemoved per BlockStored, as many hashes)\n"
    "  --evict-rate B       removed blocks/s of that phase; 0 = as fast as possible (default 0)\n"
    "  --hold-file PATH     after publishing, keep the engine (its replay ring) up until PATH\n"
    "                       exists (up to 600 s): a subscriber still replaying can finish\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "%s\n%s", msg.c_str(), k_usage);
  std::exit(2);
}

struct options {
  std::string bind = "tcp://127.0.0.1:5557";
  long dp_size = 1;
  long engines = 1;
  long blocks = 200000;
  double rate = 0;
  long block_size = 16, prompt_min = 512, prompt_max = 8192, system_prompts = 64;
  long lora_adapters = 8;
  double lora_fraction = 0.2;
  long capacity = 65536;
  double clear_prob = 0.0005;
  long clear_after = 0;
  double evict_rate = 0;
  std::string era = "G";
  long seed = 1, floor_repeats = 3, linger_ms = 30000;
  long buffer_steps = 10000, prelude_batches = 0, sndhwm = 0;
  std::string replay_bind;
  std::string go_file, block_times, eviction_times, evict_go_file, hold_file;
  bool floor_only = false;
  std::string metrics_port_file;
};

double to_double(const std::string& name, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') usage_error("invalid value for --" + name);
  return d;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(k_usage, stdout);
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0) usage_error("unexpected argument: " + a);
    std::string name = a.substr(2), value;
    if (name == "floor-only") {
      o.floor_only = true;
      continue;
    }
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      if (i + 1 >= argc) usage_error("flag needs an argument: --" + name);
      value = argv[++i];
    }
    const auto num = [&] { return static_cast<long>(to_double(name, value)); };
    if (name == "bind") o.bind = value;
    else if (name == "dp-size") o.dp_size = num();
    else if (name == "engines") o.engines = num();
    else if (name == "blocks") o.blocks = num();
    else if (name == "rate") o.rate = to_double(name, value);
    else if (name == "block-size") o.block_size = num();
    else if (name == "prompt-min") o.prompt_min = num();
    else if (name == "prompt-max") o.prompt_max = num();
    else if (name == "system-prompts") o.system_prompts = num();
    else if (name == "lora-adapters") o.lora_adapters = num();
    else if (name == "lora-fraction") o.lora_fraction = to_double(name, value);
    else if (name == "capacity") o.capacity = num();
    else if (name == "clear-prob") o.clear_prob = to_double(name, value);
    else if (name == "clear-after") o.clear_after = num();
    else if (name == "era") o.era = value;
    else if (name == "seed") o.seed = num();
    else if (name == "floor-repeats") o.floor_repeats = num();
    else if (name == "go-file") o.go_file = value;
    else if (name == "replay-bind") o.replay_bind = value;
    else if (name == "buffer-steps") o.buffer_steps = num();
    else if (name == "prelude-batches") o.prelude_batches = num();
    else if (name == "sndhwm") o.sndhwm = num();
    else if (name == "linger-ms") o.linger_ms = num();
    else if (name == "block-times") o.block_times = value;
    else if (name == "eviction-times") o.eviction_times = value;
    else if (name == "evict-go-file") o.evict_go_file = value;
    else if (name == "hold-file") o.hold_file = value;
    else if (name == "evict-rate") o.evict_rate = to_double(name, value);
    else if (name == "metrics-port-file") o.metrics_port_file = value;
    else usage_error("unknown flag --" + name);
  }
  if (o.dp_size < 1 || o.dp_size > 64) usage_error("--dp-size must be in [1, 64]");
  if (o.engines < 1 || o.engines > 64) usage_error("--engines must be in [1, 64]");
  if (o.engines > 1 && o.dp_size > 1) usage_error("--engines and --dp-size do not combine");
  if (o.block_size < 1 || o.prompt_min < o.block_size || o.prompt_max < o.prompt_min) {
    usage_error("need 1 <= block-size <= prompt-min <= prompt-max");
  }
  if (o.blocks < 1 || o.rate < 0) usage_error("--blocks must be >= 1 and --rate >= 0");
  if (o.evict_rate < 0) usage_error("--evict-rate must be >= 0");
  if (o.buffer_steps < 1 || o.prelude_batches < 0 || o.sndhwm < 0) {
    usage_error("--buffer-steps must be >= 1, --prelude-batches and --sndhwm >= 0");
  }
  if (!o.replay_bind.empty() && o.dp_size * o.engines > 1) {
    usage_error("--replay-bind serves one rank only");
  }
  return o;
}

// Prompt length in blocks = Zipf-picked system prefix + a user tail; together they span
// [prompt_min, prompt_max] tokens. A quarter of the shortest prompt and half of the longest is
// shared prefix, so popular prefixes are long and hit often, as with real system prompts.
workload_options workload_for(const options& o, long rank) {
  workload_options w;
  w.seed = static_cast<uint64_t>(o.seed + rank);
  w.block_size = o.block_size;
  const size_t min_b = static_cast<size_t>(o.prompt_min / o.block_size);
  const size_t max_b = static_cast<size_t>(o.prompt_max / o.block_size);
  w.system_prompts = static_cast<size_t>(std::max(1L, o.system_prompts));
  w.system_blocks_min = std::max<size_t>(1, min_b / 4);
  w.system_blocks_max = std::max(w.system_blocks_min, max_b / 2);
  w.user_blocks_min = std::max<size_t>(1, min_b - w.system_blocks_min);
  w.user_blocks_max = std::max(w.user_blocks_min, max_b - w.system_blocks_max);
  w.capacity_blocks = static_cast<size_t>(std::max(1L, o.capacity));
  w.lora_adapters = static_cast<size_t>(std::max(0L, o.lora_adapters));
  w.lora_fraction = o.lora_fraction;
  w.clear_probability = o.clear_prob;
  w.clear_after_blocks = static_cast<uint64_t>(std::max(0L, o.clear_after));
  w.hashes = hash_mode::u64;
  return w;
}

struct batch {
  std::string payload;
  uint32_t blocks = 0;  // what its phase paces by: stored hashes, or removed ones (eviction phase)
  uint32_t events = 0;
  std::vector<uint64_t> fingerprints;  // of its stored blocks, with --block-times
  std::vector<uint64_t> removed;       // of its removed blocks, with --eviction-times
  int64_t published_us = 0;
};

struct rank_load {
  std::vector<batch> batches;
  std::vector<batch> evictions;  // the eviction phase (--evict-go-file)
  uint64_t blocks = 0, removed_blocks = 0, events = 0, clears = 0;
  size_t resident = 0;
};

// The envelope's ts is a float64 right after the array header; patched per send so event age is
// measured from the moment the engine publishes, not from generation.
constexpr size_t k_ts_offset = 1;

// The content fingerprint kvrelay will report for each stored block (policy-contract §3): chained
// from the parent's fingerprint, which we remember by engine hash as the daemon's shard does.
class fingerprint_tracker {
 public:
  void stored(const fake_event& ev, std::vector<uint64_t>& out) {
    bool has_parent = false;
    uint64_t parent = 0;
    if (ev.parent) {
      const auto it = by_engine_hash_.find(ev.parent->value);
      if (it == by_engine_hash_.end()) return;  // the daemon drops these too (unknown parent)
      has_parent = true;
      parent = it->second;
    }
    const auto fps = kvrelay::fingerprint::prefixes(ev.token_ids, ev.block_size, has_parent, parent);
    for (size_t i = 0; i < fps.size() && i < ev.block_hashes.size(); ++i) {
      by_engine_hash_[ev.block_hashes[i].value] = fps[i];
      out.push_back(fps[i]);
    }
  }
  // A removed block's fingerprint is the one its engine hash was last stored with.
  void removed(const fake_event& ev, std::vector<uint64_t>& out) const {
    for (const auto& h : ev.block_hashes) {
      const auto it = by_engine_hash_.find(h.value);
      if (it != by_engine_hash_.end()) out.push_back(it->second);
    }
  }

 private:
  std::unordered_map<uint64_t, uint64_t> by_engine_hash_;
};

// Encodes a batch's events into b.payload; exits if the era does not allow patching its ts.
void encode_into(batch& b, const std::vector<fake_event>& events, const encode_options& eo) {
  b.payload = encode_batch(events, eo);
  if (b.payload.size() < k_ts_offset + 9 ||
      static_cast<unsigned char>(b.payload[k_ts_offset]) != 0xcb) {
    std::fprintf(stderr, "loadgen: era %s has no float64 ts at offset 1\n", era_name(eo.era));
    std::exit(1);
  }
}

// The eviction phase: `all` (every resident block, in the order the engine frees them) cut into
// batches shaped like the stored ones, cycling through `shapes` (stored hashes per BlockStored of
// each stored batch), so the engine frees at the pace and granularity at which it filled.
std::vector<batch> eviction_batches(fake_event all, const std::vector<std::vector<uint32_t>>& shapes,
                                    const encode_options& eo, const fingerprint_tracker* fps) {
  std::vector<batch> out;
  const std::vector<fake_hash> order = std::move(all.block_hashes);
  all.block_hashes.clear();
  size_t next = 0, empty_run = 0;
  for (size_t i = 0; next < order.size() && empty_run < shapes.size(); ++i) {
    batch b;
    std::vector<fake_event> events;
    for (const uint32_t n : shapes[i % shapes.size()]) {
      if (next >= order.size()) break;
      const size_t end = std::min(order.size(), next + n);
      fake_event ev = all;
      ev.block_hashes.assign(order.begin() + static_cast<std::ptrdiff_t>(next),
                             order.begin() + static_cast<std::ptrdiff_t>(end));
      next = end;
      b.blocks += static_cast<uint32_t>(ev.block_hashes.size());
      ++b.events;
      if (fps) fps->removed(ev, b.removed);
      events.push_back(std::move(ev));
    }
    if (events.empty()) {  // a stored batch without stores (a clear alone): no shape to copy
      ++empty_run;
      continue;
    }
    empty_run = 0;
    encode_into(b, events, eo);
    out.push_back(std::move(b));
  }
  return out;
}

rank_load generate(const options& o, long rank, long wire_rank, wire_era era,
                   kvrelay::bench::floor_input* floor_in) {
  workload wl(workload_for(o, rank));
  fingerprint_tracker fps;
  rank_load out;
  encode_options eo;
  eo.era = era;
  eo.ts = 0.5;  // non-integral: always written as float64 (0xcb), so it can be patched in place
  eo.dp_rank = wire_rank;
  const bool evict_phase = !o.evict_go_file.empty();
  std::vector<std::vector<uint32_t>> shapes;  // with evict_phase
  while (out.blocks < static_cast<uint64_t>(o.blocks)) {
    const auto events = wl.next_batch();
    batch b;
    if (evict_phase) shapes.emplace_back();
    for (const auto& ev : events) {
      ++b.events;
      if (ev.t == fake_event::type::stored) {
        b.blocks += static_cast<uint32_t>(ev.block_hashes.size());
        if (evict_phase) shapes.back().push_back(static_cast<uint32_t>(ev.block_hashes.size()));
        if (!o.block_times.empty() || !o.eviction_times.empty()) fps.stored(ev, b.fingerprints);
        if (floor_in) {
          floor_in->tokens.insert(floor_in->tokens.end(), ev.token_ids.begin(),
                                  ev.token_ids.end());
        }
      } else if (ev.t == fake_event::type::removed) {
        out.removed_blocks += ev.block_hashes.size();
        if (!o.eviction_times.empty()) fps.removed(ev, b.removed);
      } else if (ev.t == fake_event::type::cleared) {
        ++out.clears;
      }
    }
    encode_into(b, events, eo);
    if (floor_in) floor_in->payloads.push_back(b.payload);
    out.blocks += b.blocks;
    out.events += b.events;
    out.batches.push_back(std::move(b));
  }
  out.resident = wl.stats().gpu_resident;
  if (evict_phase) {
    out.evictions = eviction_batches(wl.evict_all(), shapes, eo,
                                     o.eviction_times.empty() ? nullptr : &fps);
  }
  return out;
}

void patch_ts(std::string& payload, double ts) {
  uint64_t bits;
  std::memcpy(&bits, &ts, sizeof bits);
  for (int i = 0; i < 8; ++i) {
    payload[k_ts_offset + 1 + static_cast<size_t>(i)] = static_cast<char>(bits >> (56 - 8 * i));
  }
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Engine i of a node listens on the base port + 10 * i (config/examples/node-4-engines.toml).
std::string engine_endpoint(const std::string& base, long i) {
  const auto colon = base.rfind(':');
  if (i == 0 || colon == std::string::npos) return base;
  const long port = std::strtol(base.c_str() + colon + 1, nullptr, 10);
  if (port <= 0) usage_error("--engines needs a numeric port in --bind");
  return base.substr(0, colon + 1) + std::to_string(port + 10 * i);
}

// (fingerprint, publish µs) of every block in `which` (stored or removed) of each sent batch, of
// both phases.
bool write_block_times(const std::string& path, const std::vector<rank_load>& loads,
                       std::vector<uint64_t> batch::*which) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = true;
  for (const auto& l : loads) {
    for (const auto* phase : {&l.batches, &l.evictions}) {
      for (const auto& b : *phase) {
        if (b.published_us == 0) continue;  // never sent (stopped early)
        for (uint64_t fp : b.*which) {
          const int64_t rec[2] = {static_cast<int64_t>(fp), b.published_us};
          ok = std::fwrite(rec, sizeof rec, 1, f) == 1 && ok;
        }
      }
    }
  }
  return std::fclose(f) == 0 && ok;
}

bool wait_for_file(const std::string& path, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  struct stat st {};
  while (!g_stop.load() && std::chrono::steady_clock::now() < deadline) {
    if (::stat(path.c_str(), &st) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Publishes one phase's batches [first, last) of each rank, round-robin over ranks (one batch
// each), paced by the batches' blocks when a rate is given; the envelope ts is patched at send.
// Prints the phase's JSON line.
void publish_phase(const char* kind, std::vector<rank_load>& loads,
                   std::vector<batch> rank_load::*phase, double rate,
                   std::vector<std::unique_ptr<publisher>>& pubs, bool retain, size_t first = 0,
                   size_t last = SIZE_MAX) {
  const double t0 = wall_seconds();
  const auto s0 = std::chrono::steady_clock::now();
  std::vector<size_t> next(loads.size(), first);
  uint64_t sent_blocks = 0, sent_batches = 0;
  bool more = true;
  while (more && !g_stop.load()) {
    more = false;
    for (size_t r = 0; r < loads.size(); ++r) {
      auto& batches = loads[r].*phase;
      if (next[r] >= std::min(last, batches.size())) continue;
      more = true;
      batch& b = batches[next[r]++];
      if (rate > 0) {
        const auto due = s0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(
                                      static_cast<double>(sent_blocks) / rate));
        std::this_thread::sleep_until(due);
      }
      const double ts = wall_seconds();
      patch_ts(b.payload, ts);
      b.published_us = static_cast<int64_t>(ts * 1e6);
      pubs[r]->publish(b.payload, retain);
      sent_blocks += b.blocks;
      ++sent_batches;
    }
  }
  const double t1 = wall_seconds();
  std::printf("{\"kind\":\"%s\",\"batches\":%llu,\"blocks\":%llu,\"start_unix\":%.6f,"
              "\"end_unix\":%.6f,\"seconds\":%.4f,\"blocks_per_s\":%.0f}\n",
              kind, static_cast<unsigned long long>(sent_batches),
              static_cast<unsigned long long>(sent_blocks), t0, t1, t1 - t0,
              t1 > t0 ? static_cast<double>(sent_blocks) / (t1 - t0) : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const auto era = parse_era(o.era);
  if (!era) usage_error("unknown --era " + o.era);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  const long sources = std::max(o.dp_size, o.engines);
  // Bind first so the subscriber can connect while we generate.
  std::vector<std::unique_ptr<publisher>> pubs;
  if (!o.floor_only) {
    for (long r = 0; r < sources; ++r) {
      publisher_options po;
      po.bind = o.engines > 1 ? engine_endpoint(o.bind, r) : o.bind;
      po.topic = "kv-events";
      po.dp_rank = o.engines > 1 ? 0 : static_cast<int>(r);
      po.sndhwm = static_cast<int>(o.sndhwm);  // 0 (default): a benchmark never drops
      po.linger_ms = static_cast<int>(o.linger_ms);
      po.buffer_steps = o.replay_bind.empty() ? 1 : static_cast<size_t>(o.buffer_steps);
      po.replay_bind = o.replay_bind;
      try {
        pubs.push_back(std::make_unique<publisher>(po));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "loadgen: %s\n", e.what());
        return 1;
      }
      std::fprintf(stderr, "loadgen: rank %ld publishing on %s\n", r,
                   pubs.back()->live_endpoint().c_str());
    }
  }

  // The engine's own /metrics, as vLLM serves it: kvrelay's scraper reads the cache size there.
  std::unique_ptr<engine_http> http;
  if (!o.metrics_port_file.empty()) {
    engine_description d;
    d.metrics_text = "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"" +
                     std::to_string(o.block_size) + "\",num_gpu_blocks=\"" +
                     std::to_string(o.capacity) + "\"} 1.0\n"
                     "# TYPE vllm:num_requests_running gauge\n"
                     "vllm:num_requests_running{model_name=\"bench\"} 0.0\n"
                     "# TYPE vllm:num_requests_waiting gauge\n"
                     "vllm:num_requests_waiting{model_name=\"bench\"} 0.0\n";
    try {
      http = std::make_unique<engine_http>(d, "127.0.0.1", 0, [] { return metrics_sample{}; });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loadgen: %s\n", e.what());
      return 1;
    }
    const std::string tmp = o.metrics_port_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d\n", http->port());
      std::fclose(f);
      std::rename(tmp.c_str(), o.metrics_port_file.c_str());
    }
  }

  const auto g0 = std::chrono::steady_clock::now();
  kvrelay::bench::floor_input floor_in;
  floor_in.block_size = o.block_size;
  floor_in.resident = static_cast<uint64_t>(o.capacity);  // one engine's index, as each pipeline's
  std::vector<rank_load> loads;
  uint64_t blocks = 0, events = 0, batches = 0, removed = 0, clears = 0, resident = 0;
  for (long r = 0; r < sources; ++r) {
    loads.push_back(generate(o, r, o.engines > 1 ? 0 : r, *era,
                             o.floor_repeats > 0 ? &floor_in : nullptr));
    blocks += loads.back().blocks;
    events += loads.back().events;
    batches += loads.back().batches.size();
    removed += loads.back().removed_blocks;
    clears += loads.back().clears;
    resident += loads.back().resident;
  }
  const double gen_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
  std::printf("{\"kind\":\"generated\",\"ranks\":%ld,\"batches\":%llu,\"blocks\":%llu,"
              "\"events\":%llu,\"removed_blocks\":%llu,\"clears\":%llu,"
              "\"engine_resident_blocks\":%llu,\"seconds\":%.3f}\n",
              sources, static_cast<unsigned long long>(batches),
              static_cast<unsigned long long>(blocks), static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(removed), static_cast<unsigned long long>(clears),
              static_cast<unsigned long long>(resident), gen_s);
  std::fflush(stdout);

  if (o.floor_repeats > 0) {
    const auto f = kvrelay::bench::measure_floor(floor_in, static_cast<int>(o.floor_repeats));
    std::printf("{\"kind\":\"floor\",%s\n", kvrelay::bench::to_json(f).substr(1).c_str());
    std::fflush(stdout);
  }
  floor_in = {};  // release the copies before publishing
  if (o.floor_only) return 0;

  const bool retain = !o.replay_bind.empty();
  const auto prelude = static_cast<size_t>(o.prelude_batches);
  if (prelude > 0) publish_phase("prelude", loads, &rank_load::batches, 0, pubs, retain, 0, prelude);
  if (!o.go_file.empty() && !wait_for_file(o.go_file, 120)) {
    std::fprintf(stderr, "loadgen: no go file %s\n", o.go_file.c_str());
    return 1;
  }
  publish_phase("published", loads, &rank_load::batches, o.rate, pubs, retain, prelude);
  if (!o.evict_go_file.empty()) {
    // Generous: the harness first waits until kvrelay has drained the stored phase.
    if (!wait_for_file(o.evict_go_file, 300)) {
      std::fprintf(stderr, "loadgen: no evict go file %s\n", o.evict_go_file.c_str());
      return 1;
    }
    publish_phase("evicted", loads, &rank_load::evictions, o.evict_rate, pubs, retain);
  }
  if (!o.block_times.empty() && !write_block_times(o.block_times, loads, &batch::fingerprints)) {
    std::fprintf(stderr, "loadgen: cannot write %s\n", o.block_times.c_str());
    return 1;
  }
  if (!o.eviction_times.empty() &&
      !write_block_times(o.eviction_times, loads, &batch::removed)) {
    std::fprintf(stderr, "loadgen: cannot write %s\n", o.eviction_times.c_str());
    return 1;
  }
  // A subscriber behind the engine (a catch-up, an overrun) reads the ring after the last publish.
  if (!o.hold_file.empty() && !wait_for_file(o.hold_file, 600))
    std::fprintf(stderr, "loadgen: no hold file %s; stopping\n", o.hold_file.c_str());
  for (auto& p : pubs) p->stop();  // lingers until the subscriber has the queued messages
  return 0;
}
