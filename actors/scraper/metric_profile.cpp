// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/scraper/metric_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <utility>

namespace kvrelay {

std::vector<std::string> valid_cache_tiers() { return {"auto", "kv", "gpu", "cpu"}; }

bool cache_tier_valid(std::string_view tier) {
  return tier == "auto" || tier == "kv" || tier == "gpu" || tier == "cpu";
}

const char* to_string(engine_profile p) {
  return p == engine_profile::sglang ? "sglang" : "vllm";
}

profile_selection select_profile(std::string_view hash_scheme) {
  profile_selection s;
  if (hash_scheme == "sglang") {
    s.profile = engine_profile::sglang;
  } else if (!hash_scheme.empty() && hash_scheme != "vllm") {
    s.warning = "unknown --hash-scheme \"" + std::string(hash_scheme) +
                "\"; scraping /metrics with the vllm profile";
  }
  return s;
}

namespace {

namespace vllm {
constexpr const char* kUsageKv = "vllm:kv_cache_usage_perc";
constexpr const char* kUsageGpu = "vllm:gpu_cache_usage_perc";
constexpr const char* kUsageCpu = "vllm:cpu_cache_usage_perc";
constexpr const char* kRunning = "vllm:num_requests_running";
constexpr const char* kWaiting = "vllm:num_requests_waiting";
constexpr const char* kHits = "vllm:prefix_cache_hits";
constexpr const char* kQueries = "vllm:prefix_cache_queries";
constexpr const char* kExtHits = "vllm:external_prefix_cache_hits";
constexpr const char* kExtQueries = "vllm:external_prefix_cache_queries";
// Older V1 builds (before the rename) expose the prefix-cache counters under these names. The
// reference ignores them and reports hit_rate 0; we read them only when the new names are absent.
constexpr const char* kHitsOld = "vllm:gpu_prefix_cache_hits";
constexpr const char* kQueriesOld = "vllm:gpu_prefix_cache_queries";
constexpr const char* kKnown[] = {kUsageKv, kUsageGpu, kUsageCpu,   kRunning, kWaiting, kHits,
                                  kQueries, kExtHits,  kExtQueries, kHitsOld, kQueriesOld};
constexpr const char* kSleepState = "vllm:engine_sleep_state";
constexpr const char* kSleepLevel = "vllm:engine_sleep_level";  // #24176's first revision only
constexpr const char* kCacheConfig = "vllm:cache_config_info";
}  // namespace vllm

namespace sglang {
constexpr const char* kRunning = "sglang:num_running_reqs";
constexpr const char* kQueue = "sglang:num_queue_reqs";
constexpr const char* kUsage = "sglang:token_usage";
constexpr const char* kHitRate = "sglang:cache_hit_rate";
constexpr const char* kKnown[] = {kRunning, kQueue, kUsage, kHitRate};
constexpr const char* kUsedTokens = "sglang:num_used_tokens";
constexpr const char* kPageSize = "sglang:page_size";
constexpr const char* kNumPages = "sglang:num_pages";
constexpr const char* kCacheConfig = "sglang:cache_config_info";  // before 0.5.11
}  // namespace sglang

// Sum and max over the series a read selected. `found` is false when no series qualified, which
// the profiles treat as "absent" (distinct from a present 0).
struct aggregate {
  bool found = false;
  double sum = 0.0;
  double max = 0.0;
  void add(double v) {
    max = found ? std::max(max, v) : v;
    sum += v;
    found = true;
  }
};

// --engine-model-name filter (M15-M17): with a filter, only series labelled with exactly that
// model_name count; an unlabelled series is excluded.
bool model_matches(const prom_sample& s, const std::string& filter) {
  if (filter.empty()) return true;
  const std::string* m = s.label("model_name");
  return m != nullptr && *m == filter;
}

// SGLang writes a per-priority breakdown next to the total (priority="" or no label); summing
// both would double-count the load (G02, G08).
bool is_priority_breakdown(const prom_sample& s) {
  const std::string* p = s.label("priority");
  return p != nullptr && !p->empty();
}

bool known_family_present(const prom_exposition& exp, const char* const* names, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::string base(names[i]);
    if (exp.find(base) != nullptr || exp.find(base + "_total") != nullptr) return true;
  }
  return false;
}

// Reads a gauge: only samples of a family typed gauge count (M26); NaN/Inf series are skipped
// (M10, M25, G04).
template <typename Pred>
aggregate read_gauge(const prom_exposition& exp, const char* name, const std::string& filter,
                     Pred keep) {
  aggregate a;
  const metric_family* f = exp.find(name);
  if (f == nullptr || f->type != metric_type::gauge) return a;
  for (const auto& s : f->samples) {
    if (!s.suffix.empty() || !std::isfinite(s.value) || !model_matches(s, filter) || !keep(s))
      continue;
    a.add(s.value);
  }
  return a;
}

aggregate read_gauge(const prom_exposition& exp, const char* name, const std::string& filter) {
  return read_gauge(exp, name, filter, [](const prom_sample&) { return true; });
}

// Reads a counter: the `X_total` family wins over `X` (M25). An OpenMetrics family `X` carries
// its value in `X_total` samples; its `_created` samples are timestamps and never count.
aggregate read_counter(const prom_exposition& exp, const char* name, const std::string& filter) {
  aggregate a;
  std::string base(name);
  const metric_family* f = exp.find(base + "_total");
  if (f == nullptr) f = exp.find(base);
  if (f == nullptr || f->type != metric_type::counter) return a;
  for (const auto& s : f->samples) {
    if ((!s.suffix.empty() && s.suffix != "_total") || !std::isfinite(s.value) ||
        !model_matches(s, filter))
      continue;
    a.add(s.value);
  }
  return a;
}

std::int64_t saturating_int64(double v) {
  if (!(v > 0)) return 0;  // also NaN
  if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(v);  // truncates, as the reference does
}

// A label holding a positive count ("24188"); nothing for "None", "", junk or <= 0.
std::optional<double> count_label(const prom_sample& s, std::string_view name) {
  const std::string* v = s.label(name);
  if (v == nullptr || v->empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v->c_str(), &end);
  if (end != v->c_str() + v->size() || !std::isfinite(d) || d <= 0) return std::nullopt;
  return d;
}

// The engine a series belongs to: vLLM's `engine` label ("" when it has none).
std::string engine_of(const prom_sample& s) {
  const std::string* e = s.label("engine");
  return e ? *e : std::string();
}

bool engine_matches(const prom_sample& s, const std::string& engine_label) {
  return engine_label.empty() || engine_of(s) == engine_label;
}

scrape_result rejected(std::string why) {
  scrape_result r;
  r.error = std::move(why);
  return r;
}

}  // namespace

scraper_logic::scraper_logic(scraper_config cfg)
    : cfg_(std::move(cfg)), selection_(select_profile(cfg_.hash_scheme)) {
  if (!cache_tier_valid(cfg_.cache_tier))
    config_error_ = "invalid --cache-tier \"" + cfg_.cache_tier + "\" (want auto, kv, gpu or cpu)";
}

scrape_result scraper_logic::scrape_response(int http_status, std::string_view body) {
  if (http_status != 200)
    return rejected("metrics endpoint returned HTTP " + std::to_string(http_status));
  return scrape_body(body);
}

scrape_result scraper_logic::scrape_body(std::string_view body) {
  if (!config_error_.empty()) return rejected(config_error_);
  prom_parse_result parsed = parse_prometheus(body);
  if (!parsed.ok) return rejected("parsing metrics: " + parsed.error);
  return scrape_exposition(parsed.exposition);
}

scrape_result scraper_logic::scrape_exposition(const prom_exposition& exp) {
  if (!config_error_.empty()) return rejected(config_error_);
  const bool sglang = selection_.profile == engine_profile::sglang;
  scrape_result r = sglang ? scrape_sglang(exp) : scrape_vllm(exp);
  r.engine = sglang ? sglang_cache_state(exp) : vllm_cache_state(exp);
  return r;
}

engine_cache_state scraper_logic::vllm_cache_state(const prom_exposition& exp) const {
  using namespace vllm;
  const std::string& filter = cfg_.model_name;
  const std::string& engine = cfg_.engine_label;
  engine_cache_state st;
  if (const metric_family* f = exp.find(kSleepState); f && f->type == metric_type::gauge) {
    aggregate awake, sleeping;
    for (const auto& s : f->samples) {
      if (!s.suffix.empty() || !std::isfinite(s.value) || !model_matches(s, filter) ||
          !engine_matches(s, engine))
        continue;
      const std::string* state = s.label("sleep_state");
      if (state == nullptr) sleeping.add(s.value);        // first revision: 1 = sleeping
      else if (*state == "awake") awake.add(s.value);
    }
    // Awake when any selected engine is (vLLM sleeps every DP engine of a server together).
    if (awake.found) st.asleep = awake.max < 0.5;
    else if (sleeping.found) st.asleep = sleeping.max >= 0.5;
  }
  if (!st.asleep) {
    aggregate level = read_gauge(exp, kSleepLevel, filter,
                                 [&](const prom_sample& s) { return engine_matches(s, engine); });
    if (level.found) st.asleep = level.max > 0;
  }
  // Capacity per engine from the config info (no model_name label there), then usage x blocks
  // for each engine that has both; the null block is never usable.
  std::map<std::string, double> blocks;
  if (const metric_family* f = exp.find(kCacheConfig)) {
    for (const auto& s : f->samples) {
      if (!engine_matches(s, engine)) continue;
      if (auto n = count_label(s, "num_gpu_blocks")) blocks[engine_of(s)] = *n;
    }
  }
  if (blocks.empty()) return st;
  double capacity = 0;
  for (const auto& [e, n] : blocks) capacity += n;
  st.capacity_blocks = capacity;
  for (const char* name : {kUsageKv, kUsageGpu}) {
    const metric_family* f = exp.find(name);
    if (f == nullptr || f->type != metric_type::gauge) continue;
    double in_use = 0;
    bool any = false;
    for (const auto& s : f->samples) {
      if (!s.suffix.empty() || !std::isfinite(s.value) || !model_matches(s, filter) ||
          !engine_matches(s, engine))
        continue;
      auto it = blocks.find(engine_of(s));
      if (it == blocks.end() && blocks.size() == 1) it = blocks.begin();  // unlabelled usage
      if (it == blocks.end()) continue;
      in_use += std::clamp(s.value, 0.0, 1.0) * std::max(it->second - 1, 0.0);
      any = true;
    }
    if (any) {
      st.in_use_blocks = in_use;
      break;  // kv_cache_usage_perc wins over the legacy name
    }
  }
  return st;
}

engine_cache_state scraper_logic::sglang_cache_state(const prom_exposition& exp) const {
  using namespace sglang;
  const std::string& filter = cfg_.model_name;
  engine_cache_state st;
  auto totals_only = [](const prom_sample& s) { return !is_priority_breakdown(s); };
  std::optional<double> page, pages;
  if (aggregate g = read_gauge(exp, kPageSize, filter); g.found && g.max > 0) page = g.max;
  if (aggregate g = read_gauge(exp, kNumPages, filter, totals_only); g.found && g.sum > 0)
    pages = g.sum;
  if (const metric_family* f = exp.find(kCacheConfig); f && (!page || !pages)) {
    double n = 0;
    for (const auto& s : f->samples) {
      if (!model_matches(s, filter)) continue;
      if (!page) page = count_label(s, "page_size");
      if (auto p = count_label(s, "num_pages")) n += *p;
    }
    if (!pages && n > 0) pages = n;
  }
  st.capacity_blocks = pages;
  if (page) {
    aggregate used = read_gauge(exp, kUsedTokens, filter, totals_only);
    if (used.found) st.in_use_blocks = std::max(used.sum, 0.0) / *page;
  }
  return st;
}

double scraper_logic::pressure(double load) const {
  if (cfg_.max_concurrency_ceiling <= 0 || !(load > 0)) return 0.0;
  return std::clamp(load / static_cast<double>(cfg_.max_concurrency_ceiling), 0.0, 1.0);
}

// Usage is deliberately not clamped before the multiplication (M27): a ratio above 1 is the
// engine's report and the server sees it as is.
std::int64_t scraper_logic::bytes(double usage) const {
  if (cfg_.cache_size_bytes <= 0) return 0;
  return saturating_int64(usage * static_cast<double>(cfg_.cache_size_bytes));
}

// M27 hit-rate rules; the caller only gets here when both counters are present.
double scraper_logic::hit_rate_delta(const counters& now) {
  if (!baseline_) {
    baseline_ = now;
    return 0.0;
  }
  double dh = now.hits - baseline_->hits;
  double dq = now.queries - baseline_->queries;
  // A counter reset (engine restart) makes a delta negative: report 0 once and rebase, so the
  // next tick is measured against the post-reset values (M05).
  baseline_ = now;
  if (!(dq > 0) || dh < 0) return 0.0;
  return std::clamp(dh / dq, 0.0, 1.0);
}

scrape_result scraper_logic::scrape_vllm(const prom_exposition& exp) {
  using namespace vllm;
  if (!known_family_present(exp, kKnown, std::size(kKnown)))
    return rejected("no vllm:* metric family found (is this a vLLM engine? see --hash-scheme)");
  const std::string& filter = cfg_.model_name;
  aggregate running = read_gauge(exp, kRunning, filter);
  aggregate waiting = read_gauge(exp, kWaiting, filter);
  if (!running.found || !waiting.found)
    return rejected(std::string("load gauges missing: need both ") + kRunning + " and " +
                    kWaiting + (filter.empty() ? "" : " with model_name=\"" + filter + "\""));

  aggregate usage;
  auto take_max = [&](const char* name) {
    aggregate g = read_gauge(exp, name, filter);
    if (g.found) usage.add(g.max);
  };
  // auto takes the max of all tiers, not the first present: a legacy CPU engine reports gpu 0.0
  // next to the real cpu value (M11).
  const std::string& tier = cfg_.cache_tier;
  if (tier == "auto" || tier == "kv") take_max(kUsageKv);
  if (tier == "auto" || tier == "gpu") take_max(kUsageGpu);
  if (tier == "auto" || tier == "cpu") take_max(kUsageCpu);

  scrape_result r;
  r.ok = true;
  r.stats.cache_memory_bytes = usage.found ? bytes(usage.max) : 0;
  r.stats.pressure = pressure(running.sum + waiting.sum);

  aggregate hits = read_counter(exp, kHits, filter);
  aggregate queries = read_counter(exp, kQueries, filter);
  // Fall back to the deprecated pair only as a pair, so one series never mixes two generations.
  if (!hits.found && !queries.found) {
    hits = read_counter(exp, kHitsOld, filter);
    queries = read_counter(exp, kQueriesOld, filter);
  }
  // Either counter absent: 0 and the baseline is left where it was (M19).
  if (hits.found && queries.found) {
    r.stats.hit_rate = hit_rate_delta(counters{hits.sum, queries.sum});
    r.prefix_cache_queries_total = queries.sum;
  }
  r.stats.t2_hit_tokens = saturating_int64(read_counter(exp, kExtHits, filter).sum);
  r.stats.t2_query_tokens = saturating_int64(read_counter(exp, kExtQueries, filter).sum);
  return r;
}

scrape_result scraper_logic::scrape_sglang(const prom_exposition& exp) {
  using namespace sglang;
  if (!known_family_present(exp, kKnown, std::size(kKnown)))
    return rejected("no sglang:* metric family found (is this an SGLang engine? see --hash-scheme)");
  const std::string& filter = cfg_.model_name;
  auto totals_only = [](const prom_sample& s) { return !is_priority_breakdown(s); };
  aggregate running = read_gauge(exp, kRunning, filter, totals_only);
  aggregate queued = read_gauge(exp, kQueue, filter, totals_only);
  if (!running.found || !queued.found)
    return rejected(std::string("load gauges missing: need both ") + kRunning + " and " + kQueue +
                    (filter.empty() ? "" : " with model_name=\"" + filter + "\""));

  scrape_result r;
  r.ok = true;
  r.stats.pressure = pressure(running.sum + queued.sum);
  // SGLang has one usage gauge; explicit gpu/cpu tiers have nothing to read (G08).
  if (cfg_.cache_tier == "auto" || cfg_.cache_tier == "kv") {
    aggregate usage = read_gauge(exp, kUsage, filter);
    if (usage.found) r.stats.cache_memory_bytes = bytes(usage.max);
  }
  // A ratio, read directly: the max across DP ranks, breakdown series included (G02, G08).
  aggregate hit = read_gauge(exp, kHitRate, filter);
  if (hit.found) r.stats.hit_rate = std::clamp(hit.max, 0.0, 1.0);
  return r;
}

std::optional<double> process_start_time(const prom_exposition& exp) {
  const metric_family* f = exp.find("process_start_time_seconds");
  if (f == nullptr) return std::nullopt;
  std::optional<double> value;
  for (const auto& s : f->samples) {
    if (!s.suffix.empty() || !std::isfinite(s.value) || s.value <= 0) continue;
    if (value && *value != s.value) return std::nullopt;  // two processes' worth: no proof
    value = s.value;
  }
  return value;
}

std::optional<double> process_start_time(std::string_view body) {
  auto parsed = parse_prometheus(body);
  if (!parsed.ok) return std::nullopt;
  return process_start_time(parsed.exposition);
}

}  // namespace kvrelay
