// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Engine metric profiles (vLLM, SGLang): turn one parsed /metrics exposition into the
// ReplicaStats values kvrelay reports, with the reference's rules (docs/spec/reference-behaviour.md
// §1.8, §1.9). scraper_logic carries the hit-rate baseline across ticks. No I/O, no logging:
// warnings are returned as text for the caller to log.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/scraper/prom_parser.hpp"

namespace kvrelay {

// --cache-tier values in fallback order (auto = kv, then gpu, then cpu). A fresh copy per call,
// so callers may not mutate a shared list (M18).
std::vector<std::string> valid_cache_tiers();
// Case-sensitive: "AUTO", "" and "default" are invalid (M18).
bool cache_tier_valid(std::string_view tier);

enum class engine_profile { vllm, sglang };
const char* to_string(engine_profile p);

struct profile_selection {
  engine_profile profile = engine_profile::vllm;
  std::string warning;  // non-empty when an unknown --hash-scheme fell back to vLLM (M09)
};
// "sglang" selects SGLang; "", "vllm" select vLLM silently; anything else selects vLLM and says so.
profile_selection select_profile(std::string_view hash_scheme);

struct scraper_config {
  std::string hash_scheme = "vllm";       // --hash-scheme (selects the profile)
  std::string cache_tier = "auto";        // --cache-tier
  std::string model_name;                 // --engine-model-name; "" = aggregate every series
  std::int64_t cache_size_bytes = 0;      // --engine-cache-size-bytes; 0 emits 0 bytes
  std::int64_t max_concurrency_ceiling = 256;  // --max-concurrency-ceiling; <= 0 disables
  // vLLM's `engine` label (its DP rank) whose cache state this pipeline compares itself with;
  // "" = every engine series of the exposition (one engine, or all ranks merged).
  std::string engine_label;
};

// What the engine's /metrics say about its KV cache as a whole (not part of ReplicaStats): its
// sleep state, and its own block counts for the index-coverage gauges. Each is absent when the
// exposition does not carry it. "In use" is what the engines call used: blocks referenced by
// running requests. Both vLLM (BlockPool.get_usage) and SGLang (num_used_tokens) count cached
// blocks that no request holds as free, so the engine's prefix cache holds between in_use and
// capacity blocks.
struct engine_cache_state {
  // vLLM: vllm:engine_sleep_state{sleep_state="awake"} == 0 (vLLM #24176); also the unlabelled
  // first-revision form (1 = sleeping) and vllm:engine_sleep_level > 0. SGLang exposes none.
  std::optional<bool> asleep;
  // vLLM: num_gpu_blocks, a label of vllm:cache_config_info. SGLang: sglang:num_pages (>= 0.5.11)
  // or the num_pages label of sglang:cache_config_info.
  std::optional<double> capacity_blocks;
  // vLLM: kv_cache_usage_perc (legacy gpu_cache_usage_perc) x (num_gpu_blocks - 1: the null
  // block); SGLang: sglang:num_used_tokens / page size (sglang:page_size or the label).
  std::optional<double> in_use_blocks;
};

// The engine process' start time (Unix seconds): `process_start_time_seconds`, which
// prometheus_client's default process collector exports on Linux. vLLM serves the default
// registry on /metrics with one API server (vllm/v1/metrics/prometheus.py
// get_prometheus_registry; with --api-server-count > 1 it switches to the multiprocess collector,
// which has no process metrics). SGLang serves only the multiprocess collector
// (sglang/srt/utils.py add_prometheus_middleware: CollectorRegistry + MultiProcessCollector), so
// it has none. The durable index's proof that an engine is the same process
// (durable/format/snapshot_policy.hpp RD3). Absent (or not a positive finite value, or given twice
// with different values): nullopt.
std::optional<double> process_start_time(const prom_exposition& exp);
std::optional<double> process_start_time(std::string_view body);

// Mirrors proto ReplicaStats' value fields (identity is added by the caller).
struct replica_stats {
  std::int64_t cache_memory_bytes = 0;
  double hit_rate = 0.0;  // [0, 1]
  double pressure = 0.0;  // [0, 1]
  std::int64_t t2_hit_tokens = 0;    // cumulative, not a delta (M03)
  std::int64_t t2_query_tokens = 0;  // cumulative
};

struct scrape_result {
  bool ok = false;
  std::string error;   // why the scrape was rejected; empty when ok
  replica_stats stats; // zero-valued when !ok (M21)
  // vLLM's summed prefix_cache_queries counter when present and the scrape was accepted: feeds
  // silent_stream_detector. Always empty for SGLang (it exposes a ratio, not a counter).
  std::optional<double> prefix_cache_queries_total;
  // Read from every body that parses, accepted or not (a sleeping engine's scrape may lack the
  // load gauges and still say it sleeps).
  engine_cache_state engine;
};

class scraper_logic {
 public:
  explicit scraper_logic(scraper_config cfg);

  // Empty unless the config is unusable (invalid --cache-tier); then every scrape is rejected.
  const std::string& config_error() const { return config_error_; }
  // The M09 fallback warning to log once at startup; empty when none.
  const std::string& warning() const { return selection_.warning; }
  engine_profile profile() const { return selection_.profile; }
  const scraper_config& config() const { return cfg_; }

  // M24 steps 2..6 for an HTTP response: a non-200 status is an error.
  scrape_result scrape_response(int http_status, std::string_view body);
  // M24 steps 3..6 on a 200 body. A rejected scrape never moves the hit-rate baseline.
  scrape_result scrape_body(std::string_view body);
  // Profile step only, on an already-parsed exposition (used by the fuzzer and by tests).
  scrape_result scrape_exposition(const prom_exposition& exp);

  // Forgets the hit-rate baseline, e.g. when the engine restarted.
  void reset_baseline() { baseline_.reset(); }

 private:
  struct counters {
    double hits;
    double queries;
  };
  scrape_result scrape_vllm(const prom_exposition& exp);
  scrape_result scrape_sglang(const prom_exposition& exp);
  engine_cache_state vllm_cache_state(const prom_exposition& exp) const;
  engine_cache_state sglang_cache_state(const prom_exposition& exp) const;
  double pressure(double load) const;
  std::int64_t bytes(double usage) const;
  double hit_rate_delta(const counters& now);

  scraper_config cfg_;
  profile_selection selection_;
  std::string config_error_;
  std::optional<counters> baseline_;
};

}  // namespace kvrelay
