// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The scraper's /metrics profiles, rule by rule (docs/spec/reference-behaviour.md §1.8 M01-M19, the vLLM
// and SGLang families, cache size and sleep state): ~680 lines because each engine version's
// families get their own small tests against the shared fixtures.
#include "actors/scraper/metric_profile.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tests/scraper/scraper_test_util.hpp"

namespace kvrelay {
namespace {

using testing::read_metrics_fixture;

constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;

scraper_config vllm_cfg(std::int64_t capacity = kGiB, std::int64_t ceiling = 256) {
  scraper_config c;
  c.hash_scheme = "vllm";
  c.cache_size_bytes = capacity;
  c.max_concurrency_ceiling = ceiling;
  return c;
}

scraper_config sglang_cfg(std::int64_t capacity = kGiB) {
  scraper_config c = vllm_cfg(capacity);
  c.hash_scheme = "sglang";
  return c;
}

scrape_result scrape_fixture(scraper_logic& s, const char* name) {
  return s.scrape_body(read_metrics_fixture(name));
}

// --- vLLM profile (docs/spec/reference-behaviour.md §1.8) ---------------------------------------------------

TEST(VllmProfile, M01FirstTickHasZeroHitRate) {
  scraper_logic s(vllm_cfg());
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.hit_rate, 0.0);
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.42 * kGiB, 1.0);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 8.0 / 256);
  EXPECT_EQ(r.stats.t2_hit_tokens, 0);
}

TEST(VllmProfile, M02SecondTickHasHitRateDelta) {
  scraper_logic s(vllm_cfg());
  ASSERT_TRUE(scrape_fixture(s, "vllm_metrics_cpu.txt").ok);
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu_tick2.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, (95.0 - 25) / (200 - 100));
  EXPECT_DOUBLE_EQ(r.stats.pressure, 8.0 / 256);
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.55 * kGiB, 1.0);
}

TEST(VllmProfile, M03ReadsT2ExternalCountersCumulatively) {
  scraper_config c = vllm_cfg();
  c.model_name = "m";
  scraper_logic s(c);
  scrape_result r = scrape_fixture(s, "vllm_metrics_t2.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.t2_hit_tokens, 750);
  EXPECT_EQ(r.stats.t2_query_tokens, 1000);
  // Cumulative, not deltas: the same body again gives the same values.
  r = scrape_fixture(s, "vllm_metrics_t2.txt");
  EXPECT_EQ(r.stats.t2_hit_tokens, 750);
  EXPECT_EQ(r.stats.t2_query_tokens, 1000);
}

TEST(VllmProfile, M04T2CountersAbsentAreZero) {
  scraper_logic s(vllm_cfg());
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu.txt");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.stats.t2_hit_tokens, 0);
  EXPECT_EQ(r.stats.t2_query_tokens, 0);
}

TEST(VllmProfile, M05CounterResetRebasesBaseline) {
  scraper_logic s(vllm_cfg());
  ASSERT_TRUE(scrape_fixture(s, "vllm_metrics_cpu_tick2.txt").ok);
  scrape_result reset = scrape_fixture(s, "vllm_metrics_cpu.txt");
  ASSERT_TRUE(reset.ok);
  EXPECT_EQ(reset.stats.hit_rate, 0.0);
  scrape_result next = scrape_fixture(s, "vllm_metrics_cpu_tick2.txt");
  ASSERT_TRUE(next.ok);
  EXPECT_GT(next.stats.hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(next.stats.hit_rate, 0.7);
}

TEST(VllmProfile, M06MissingMetricsDegradeGracefully) {
  scraper_logic s(vllm_cfg());
  scrape_result r = scrape_fixture(s, "vllm_metrics_partial.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.cache_memory_bytes, 0);
  EXPECT_EQ(r.stats.hit_rate, 0.0);
  EXPECT_EQ(r.stats.pressure, 0.0);
  EXPECT_FALSE(r.prefix_cache_queries_total.has_value());
}

TEST(VllmProfile, M07UnrecognizedMetricsFailLoud) {
  scraper_logic s(vllm_cfg());
  scrape_result r = scrape_fixture(s, "sglang_metrics.txt");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("vllm"), std::string::npos);
  EXPECT_EQ(r.stats.cache_memory_bytes, 0);
  EXPECT_EQ(r.stats.pressure, 0.0);
}

TEST(VllmProfile, M08RejectedScrapeDoesNotPoisonBaseline) {
  scraper_logic s(vllm_cfg());
  ASSERT_TRUE(scrape_fixture(s, "vllm_metrics_cpu.txt").ok);  // 25/100
  scrape_result bad = scrape_fixture(s, "vllm_metrics_no_load_gauges.txt");  // 60/150
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("load gauges"), std::string::npos);
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu_tick2.txt");  // 95/200
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, 0.70);
}

TEST(VllmProfile, M08ParseErrorDoesNotPoisonBaseline) {
  scraper_logic s(vllm_cfg());
  ASSERT_TRUE(scrape_fixture(s, "vllm_metrics_cpu.txt").ok);
  std::string broken = read_metrics_fixture("vllm_metrics_no_load_gauges.txt") + "bad{\n";
  scrape_result bad = s.scrape_body(broken);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("line "), std::string::npos);
  EXPECT_DOUBLE_EQ(scrape_fixture(s, "vllm_metrics_cpu_tick2.txt").stats.hit_rate, 0.70);
}

TEST(VllmProfile, M09SchemeSelection) {
  profile_selection sel = select_profile("sglang-custom");
  EXPECT_EQ(sel.profile, engine_profile::vllm);
  EXPECT_NE(sel.warning.find("unknown --hash-scheme"), std::string::npos);
  EXPECT_NE(sel.warning.find("sglang-custom"), std::string::npos);
  for (const char* quiet : {"sglang", "", "vllm"})
    EXPECT_TRUE(select_profile(quiet).warning.empty()) << quiet;
  EXPECT_EQ(select_profile("sglang").profile, engine_profile::sglang);
  EXPECT_EQ(select_profile("").profile, engine_profile::vllm);

  scraper_config c = vllm_cfg();
  c.hash_scheme = "sglang-custom";
  scraper_logic s(c);
  EXPECT_EQ(s.profile(), engine_profile::vllm);
  EXPECT_NE(s.warning().find("unknown --hash-scheme"), std::string::npos);
  EXPECT_TRUE(scrape_fixture(s, "vllm_metrics_cpu.txt").ok);
}

TEST(VllmProfile, M10NonFiniteLoadGaugeFailsLoud) {
  scraper_logic s(vllm_cfg());
  scrape_result r = scrape_fixture(s, "vllm_metrics_nan_running.txt");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("vllm:num_requests_running"), std::string::npos);
  // +Inf is skipped the same way.
  scrape_result inf = s.scrape_body(
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running +Inf\n"
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n");
  EXPECT_FALSE(inf.ok);
}

TEST(VllmProfile, M11LegacyCpuWithZeroGpuTakesMax) {
  scraper_logic s(vllm_cfg());
  scrape_result r = scrape_fixture(s, "vllm_metrics_legacy_cpu.txt");
  ASSERT_TRUE(r.ok);
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.42 * kGiB, 1.0);
}

TEST(VllmProfile, M12LegacyGpuFallback) {
  scraper_logic s(vllm_cfg());
  scrape_result r = scrape_fixture(s, "vllm_metrics_gpu.txt");
  ASSERT_TRUE(r.ok);
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.61 * kGiB, 1.0);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 12.0 / 256);
}

TEST(VllmProfile, M13ExplicitTierPinsLookup) {
  scraper_config c = vllm_cfg();
  c.cache_tier = "gpu";
  scraper_logic s(c);
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu.txt");  // kv-only
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.cache_memory_bytes, 0);

  c.cache_tier = "cpu";
  scraper_logic cpu(c);
  EXPECT_NEAR(static_cast<double>(
                  scrape_fixture(cpu, "vllm_metrics_legacy_cpu.txt").stats.cache_memory_bytes),
              0.42 * kGiB, 1.0);
  c.cache_tier = "gpu";
  scraper_logic gpu(c);
  ASSERT_TRUE(scrape_fixture(gpu, "vllm_metrics_legacy_cpu.txt").ok);
  EXPECT_EQ(scrape_fixture(gpu, "vllm_metrics_legacy_cpu.txt").stats.cache_memory_bytes, 0);
  c.cache_tier = "kv";
  scraper_logic kv(c);
  EXPECT_EQ(scrape_fixture(kv, "vllm_metrics_gpu.txt").stats.cache_memory_bytes, 0);
  EXPECT_GT(scrape_fixture(kv, "vllm_metrics_cpu.txt").stats.cache_memory_bytes, 0);
}

TEST(VllmProfile, M14CountersWithoutTotalSuffix) {
  scraper_logic s(vllm_cfg(kGiB, 8));
  scrape_result r1 = scrape_fixture(s, "vllm_metrics_openmetrics.txt");
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_NEAR(static_cast<double>(r1.stats.cache_memory_bytes), 0.30 * kGiB, 1.0);
  EXPECT_DOUBLE_EQ(r1.stats.pressure, 0.25);
  scrape_result r2 = scrape_fixture(s, "vllm_metrics_openmetrics_tick2.txt");
  ASSERT_TRUE(r2.ok);
  EXPECT_DOUBLE_EQ(r2.stats.hit_rate, (70.0 - 10) / (120 - 20));
}

TEST(VllmProfile, OpenMetricsTotalSamplesCountAndCreatedDoesNot) {
  // Family `X` typed counter with `X_total` + `X_created` samples (prometheus_client
  // OpenMetrics): the value is the _total sample; a created timestamp (1.7e9) would wreck it.
  scraper_logic s(vllm_cfg(kGiB, 8));
  std::string body = read_metrics_fixture("vllm_metrics_openmetrics_full.txt");
  scrape_result r = s.scrape_body(body);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(r.prefix_cache_queries_total.has_value());
  EXPECT_DOUBLE_EQ(*r.prefix_cache_queries_total, 400);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 4.0 / 8);
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.25 * kGiB, 1.0);
  std::string tick2 = body;
  tick2.replace(tick2.find("400.0"), 5, "500.0");
  tick2.replace(tick2.find("100.0"), 5, "180.0");
  EXPECT_DOUBLE_EQ(s.scrape_body(tick2).stats.hit_rate, 0.8);
}

TEST(VllmProfile, M15FiltersByModelLabel) {
  scraper_config c = vllm_cfg(kGiB, 8);
  c.model_name = "primary";
  scraper_logic s(c);
  scrape_result r1 = scrape_fixture(s, "vllm_metrics_multimodel.txt");
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_NEAR(static_cast<double>(r1.stats.cache_memory_bytes), 0.20 * kGiB, 1.0);
  EXPECT_DOUBLE_EQ(r1.stats.pressure, 0.25);
  EXPECT_EQ(r1.stats.hit_rate, 0.0);
  ASSERT_TRUE(r1.prefix_cache_queries_total.has_value());
  EXPECT_DOUBLE_EQ(*r1.prefix_cache_queries_total, 40);
  scrape_result r2 = scrape_fixture(s, "vllm_metrics_multimodel.txt");
  ASSERT_TRUE(r2.ok);
  EXPECT_EQ(r2.stats.hit_rate, 0.0);
}

TEST(VllmProfile, M16EmptyFilterAggregatesEverySeries) {
  scraper_config c = vllm_cfg(kGiB, 256);
  c.model_name = "";
  scraper_logic s(c);
  scrape_result r = scrape_fixture(s, "vllm_metrics_multimodel.txt");
  ASSERT_TRUE(r.ok);
  // Usage is the max across series, load the sum.
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.95 * kGiB, 1.0);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 16.0 / 256);
  EXPECT_DOUBLE_EQ(*r.prefix_cache_queries_total, 1040);
  // Counters are summed across series too.
  std::string t2 = read_metrics_fixture("vllm_metrics_multimodel.txt");
  auto bump = [&](const std::string& from, const std::string& to) {
    ASSERT_NE(t2.find(from), std::string::npos) << from;
    t2.replace(t2.find(from), from.size(), to);
  };
  bump("hits_total{engine=\"0\",model_name=\"primary\"} 10", "hits_total{model_name=\"primary\"} 30");
  bump("queries_total{engine=\"0\",model_name=\"primary\"} 40",
       "queries_total{model_name=\"primary\"} 80");
  EXPECT_DOUBLE_EQ(s.scrape_body(t2).stats.hit_rate, 20.0 / 40);
}

TEST(VllmProfile, M17UnlabeledSeriesExcludedWhenFilterSet) {
  scraper_config c = vllm_cfg();
  c.model_name = "primary";
  scraper_logic s(c);
  scrape_result r = scrape_fixture(s, "vllm_metrics_unlabeled_usage.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.cache_memory_bytes, 0);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 2.0 / 256);
  c.model_name = "";
  scraper_logic all(c);
  EXPECT_NEAR(static_cast<double>(
                  scrape_fixture(all, "vllm_metrics_unlabeled_usage.txt").stats.cache_memory_bytes),
              0.80 * kGiB, 1.0);
}

TEST(CacheTier, M18Validity) {
  for (const char* ok : {"auto", "kv", "gpu", "cpu"}) EXPECT_TRUE(cache_tier_valid(ok)) << ok;
  for (const char* bad : {"", "xpu", "AUTO", "default", "Kv", "auto "})
    EXPECT_FALSE(cache_tier_valid(bad)) << bad;
  std::vector<std::string> tiers = valid_cache_tiers();
  EXPECT_EQ(tiers, (std::vector<std::string>{"auto", "kv", "gpu", "cpu"}));
  tiers[0] = "mutated";
  EXPECT_EQ(valid_cache_tiers()[0], "auto");  // a fresh copy each call
}

TEST(CacheTier, InvalidTierRejectsEveryScrape) {
  scraper_config c = vllm_cfg();
  c.cache_tier = "AUTO";
  scraper_logic s(c);
  EXPECT_NE(s.config_error().find("--cache-tier"), std::string::npos);
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu.txt");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, s.config_error());
}

TEST(VllmProfile, M19PartialCounterDoesNotPoisonDelta) {
  scraper_logic s(vllm_cfg());
  ASSERT_TRUE(scrape_fixture(s, "vllm_metrics_cpu.txt").ok);
  scrape_result partial = scrape_fixture(s, "vllm_metrics_partial.txt");
  ASSERT_TRUE(partial.ok);
  EXPECT_EQ(partial.stats.hit_rate, 0.0);
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu_tick2.txt");
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, 0.7);  // not 95/200
}

TEST(VllmProfile, M19OneCounterAbsentKeepsBaseline) {
  scraper_logic s(vllm_cfg());
  ASSERT_TRUE(scrape_fixture(s, "vllm_metrics_cpu.txt").ok);
  std::string only_hits = read_metrics_fixture("vllm_metrics_cpu_tick2.txt");
  only_hits.erase(only_hits.find("# HELP vllm:prefix_cache_queries_total"),
                  only_hits.find("# HELP vllm:num_requests_running") -
                      only_hits.find("# HELP vllm:prefix_cache_queries_total"));
  scrape_result mid = s.scrape_body(only_hits);
  ASSERT_TRUE(mid.ok) << mid.error;
  EXPECT_EQ(mid.stats.hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(scrape_fixture(s, "vllm_metrics_cpu_tick2.txt").stats.hit_rate, 0.7);
}

TEST(VllmProfile, M20ZeroCacheSizeEmitsZeroBytes) {
  scraper_logic s(vllm_cfg(0));
  scrape_result r = scrape_fixture(s, "vllm_metrics_cpu.txt");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.stats.cache_memory_bytes, 0);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 8.0 / 256);
}

TEST(VllmProfile, M21HttpErrorIsFailSoft) {
  scraper_logic s(vllm_cfg());
  scrape_result r = s.scrape_response(500, read_metrics_fixture("vllm_metrics_cpu.txt"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("500"), std::string::npos);
  EXPECT_EQ(r.stats.cache_memory_bytes, 0);
  EXPECT_EQ(r.stats.hit_rate, 0.0);
  EXPECT_EQ(r.stats.pressure, 0.0);
  EXPECT_EQ(r.stats.t2_hit_tokens, 0);
  // It did not set the baseline either: the next two good ticks give 0 then the delta.
  EXPECT_EQ(s.scrape_response(200, read_metrics_fixture("vllm_metrics_cpu.txt")).stats.hit_rate,
            0.0);
  EXPECT_DOUBLE_EQ(
      s.scrape_response(200, read_metrics_fixture("vllm_metrics_cpu_tick2.txt")).stats.hit_rate,
      0.7);
}

TEST(VllmProfile, M23PressureClamps) {
  scraper_logic s(vllm_cfg(kGiB, 4));
  EXPECT_DOUBLE_EQ(scrape_fixture(s, "vllm_metrics_cpu.txt").stats.pressure, 1.0);
}

TEST(VllmProfile, M27PressureZeroWhenCeilingOrLoadNotPositive) {
  scraper_logic zero_ceiling(vllm_cfg(kGiB, 0));
  EXPECT_EQ(scrape_fixture(zero_ceiling, "vllm_metrics_cpu.txt").stats.pressure, 0.0);
  scraper_logic neg_ceiling(vllm_cfg(kGiB, -5));
  EXPECT_EQ(scrape_fixture(neg_ceiling, "vllm_metrics_cpu.txt").stats.pressure, 0.0);
  scraper_logic s(vllm_cfg());
  scrape_result r = s.scrape_body(
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running -3\n"
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 1\n");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.stats.pressure, 0.0);
}

TEST(VllmProfile, M27UsageNotClampedBeforeBytes) {
  scraper_logic s(vllm_cfg(1000));
  scrape_result r = s.scrape_body(
      "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 1.5\n"
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.stats.cache_memory_bytes, 1500);
  // Truncated, not rounded.
  r = s.scrape_body(
      "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.4999\n"
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n");
  EXPECT_EQ(r.stats.cache_memory_bytes, 499);
}

std::string counters_body(double hits, double queries) {
  return "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"
         "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
         "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total " +
         std::to_string(hits) +
         "\n# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total " +
         std::to_string(queries) + "\n";
}

TEST(VllmProfile, M27HitRateRules) {
  scraper_logic s(vllm_cfg());
  EXPECT_EQ(s.scrape_body(counters_body(10, 100)).stats.hit_rate, 0.0);  // baseline set
  // No new queries: 0, but the baseline advances (hits moved to 20).
  EXPECT_EQ(s.scrape_body(counters_body(20, 100)).stats.hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(s.scrape_body(counters_body(30, 200)).stats.hit_rate, 0.1);
  // Hits grew faster than queries: clamped to 1.
  EXPECT_DOUBLE_EQ(s.scrape_body(counters_body(330, 300)).stats.hit_rate, 1.0);
  // Hits went down alone: 0 and rebased.
  EXPECT_EQ(s.scrape_body(counters_body(300, 400)).stats.hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(s.scrape_body(counters_body(350, 500)).stats.hit_rate, 0.5);
  s.reset_baseline();
  EXPECT_EQ(s.scrape_body(counters_body(400, 600)).stats.hit_rate, 0.0);
}

TEST(VllmProfile, M25TotalFamilyWinsOverPlain) {
  scraper_logic s(vllm_cfg());
  std::string both = counters_body(10, 100) +
                     "# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits 99999\n";
  ASSERT_TRUE(s.scrape_body(both).ok);
  scrape_result r = s.scrape_body(counters_body(60, 200) +
                                  "# TYPE vllm:prefix_cache_hits counter\n"
                                  "vllm:prefix_cache_hits 0\n");
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, 0.5);
}

TEST(VllmProfile, M25NonFiniteCounterSeriesSkipped) {
  scraper_logic s(vllm_cfg());
  std::string body = counters_body(10, 100) +
                     "# TYPE vllm:external_prefix_cache_hits_total counter\n"
                     "vllm:external_prefix_cache_hits_total{engine=\"0\"} 5\n"
                     "vllm:external_prefix_cache_hits_total{engine=\"1\"} NaN\n"
                     "vllm:external_prefix_cache_hits_total{engine=\"2\"} 7\n";
  scrape_result r = s.scrape_body(body);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.stats.t2_hit_tokens, 12);
}

TEST(VllmProfile, M26UntypedFamiliesReadAsAbsentButAreKnown) {
  scraper_logic s(vllm_cfg());
  // No TYPE lines: the family is "known" (not M07's error) but its gauges read as absent.
  scrape_result r = s.scrape_body("vllm:num_requests_running 1\nvllm:num_requests_waiting 1\n");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("load gauges"), std::string::npos);
  // A counter typed as gauge is not read as a counter.
  std::string wrong_type = counters_body(1, 2);
  wrong_type.replace(wrong_type.find("prefix_cache_hits_total counter"),
                     std::string("prefix_cache_hits_total counter").size(),
                     "prefix_cache_hits_total gauge");
  scrape_result w = s.scrape_body(wrong_type);
  ASSERT_TRUE(w.ok);
  EXPECT_FALSE(w.prefix_cache_queries_total.has_value() && w.stats.hit_rate != 0.0);
  // An untyped usage gauge reads as 0 bytes.
  scrape_result u = s.scrape_body(counters_body(1, 2) + "vllm:kv_cache_usage_perc 0.5\n");
  ASSERT_TRUE(u.ok);
  EXPECT_EQ(u.stats.cache_memory_bytes, 0);
}

TEST(VllmProfile, M28HistogramFamiliesParse) {
  scraper_logic s(vllm_cfg());
  // vllm_metrics_cpu.txt carries a histogram; it must not be an error.
  EXPECT_TRUE(scrape_fixture(s, "vllm_metrics_cpu.txt").ok);
  EXPECT_TRUE(scrape_fixture(s, "vllm_metrics_openmetrics_full.txt").ok);
}

TEST(VllmProfile, DeprecatedGpuPrefixCacheCountersAreAFallback) {
  auto body = [](int hits, int queries, bool with_new) {
    std::string b =
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
        "# TYPE vllm:gpu_prefix_cache_hits_total counter\nvllm:gpu_prefix_cache_hits_total " +
        std::to_string(hits) +
        "\n# TYPE vllm:gpu_prefix_cache_queries_total counter\n"
        "vllm:gpu_prefix_cache_queries_total " +
        std::to_string(queries) + "\n";
    if (with_new)
      b += "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total 0\n"
           "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total " +
           std::to_string(queries) + "\n";
    return b;
  };
  scraper_logic old_only(vllm_cfg());
  ASSERT_TRUE(old_only.scrape_body(body(10, 100, false)).ok);
  EXPECT_DOUBLE_EQ(old_only.scrape_body(body(40, 200, false)).stats.hit_rate, 0.3);
  // With the current names present, the deprecated ones are ignored.
  scraper_logic both(vllm_cfg());
  ASSERT_TRUE(both.scrape_body(body(10, 100, true)).ok);
  EXPECT_EQ(both.scrape_body(body(40, 200, true)).stats.hit_rate, 0.0);
}

// --- SGLang profile (docs/spec/reference-behaviour.md §1.9) -------------------------------------------------

TEST(SglangProfile, G01ExtractsNativeMetrics) {
  scraper_logic s(sglang_cfg());
  EXPECT_EQ(s.profile(), engine_profile::sglang);
  scrape_result r = scrape_fixture(s, "sglang_metrics.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.stats.pressure, 8.0 / 256);
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, 0.75);  // first scrape, no delta
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.63 * kGiB, 2.0);
  EXPECT_EQ(r.stats.t2_hit_tokens, 0);
  EXPECT_EQ(r.stats.t2_query_tokens, 0);
  EXPECT_FALSE(r.prefix_cache_queries_total.has_value());
}

TEST(SglangProfile, G02DataParallelAggregatesLoadExcludingPriorityBreakdown) {
  scraper_logic s(sglang_cfg());
  scrape_result r = scrape_fixture(s, "sglang_metrics_dp.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.stats.pressure, 11.0 / 256);
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, 0.90);
  EXPECT_NEAR(static_cast<double>(r.stats.cache_memory_bytes), 0.70 * kGiB, 2.0);
}

TEST(SglangProfile, G03AbsentHitRateReportsZero) {
  scraper_logic s(sglang_cfg());
  scrape_result r = scrape_fixture(s, "sglang_metrics_load_only.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 2.0 / 256);
  EXPECT_EQ(r.stats.cache_memory_bytes, 0);
}

TEST(SglangProfile, G04NonFiniteRankSkippedInAggregate) {
  scraper_logic s(sglang_cfg());
  scrape_result r = scrape_fixture(s, "sglang_metrics_nan_rank.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.stats.pressure, 4.0 / 256);
}

TEST(SglangProfile, G05PartialLoadGaugeFailsLoud) {
  scraper_logic s(sglang_cfg());
  scrape_result r = scrape_fixture(s, "sglang_metrics_hit_rate_only.txt");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("load gauges"), std::string::npos);
  EXPECT_EQ(r.stats.hit_rate, 0.0);
}

TEST(SglangProfile, G06ModelLabelExcludingLoadGaugesFailsLoud) {
  scraper_config c = sglang_cfg();
  c.model_name = "not-m";
  scraper_logic s(c);
  EXPECT_FALSE(scrape_fixture(s, "sglang_metrics.txt").ok);
  c.model_name = "m";
  scraper_logic m(c);
  EXPECT_TRUE(scrape_fixture(m, "sglang_metrics.txt").ok);
}

TEST(SglangProfile, G07SchemeMismatchFailsLoud) {
  scraper_logic s(sglang_cfg());
  for (const char* f : {"vllm_metrics_cpu.txt", "vllm_metrics_gpu.txt",
                        "vllm_metrics_openmetrics.txt"}) {
    scrape_result r = scrape_fixture(s, f);
    EXPECT_FALSE(r.ok) << f;
    EXPECT_NE(r.error.find("sglang"), std::string::npos);
  }
}

TEST(SglangProfile, G08TiersAndClamping) {
  scraper_config c = sglang_cfg();
  for (const char* tier : {"gpu", "cpu"}) {
    c.cache_tier = tier;
    scraper_logic s(c);
    scrape_result r = scrape_fixture(s, "sglang_metrics.txt");
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.stats.cache_memory_bytes, 0) << tier;
  }
  c.cache_tier = "kv";
  scraper_logic kv(c);
  EXPECT_GT(scrape_fixture(kv, "sglang_metrics.txt").stats.cache_memory_bytes, 0);

  scraper_logic s(sglang_cfg());
  scrape_result r = s.scrape_body(
      "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\n"
      "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 0\n"
      "# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate 1.7\n");
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, 1.0);
  // A series with no priority label counts as a total; a breakdown series feeds the max only.
  r = s.scrape_body(
      "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 2\n"
      "sglang:num_running_reqs{priority=\"1\"} 2\n"
      "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{priority=\"\"} 1\n"
      "# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate{priority=\"\"} 0.2\n"
      "sglang:cache_hit_rate{priority=\"3\"} 0.4\n");
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.stats.pressure, 3.0 / 256);
  EXPECT_DOUBLE_EQ(r.stats.hit_rate, 0.4);
}

// --- the engine's own cache state (sleep, block counts) ----------------------------------------

TEST(EngineCacheState, VllmSumsTheEnginesCapacityAndUsageTimesUsableBlocks) {
  scraper_logic s(vllm_cfg());
  const auto r = scrape_fixture(s, "vllm_metrics_engine_state.txt");
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_TRUE(r.engine.asleep.has_value());
  EXPECT_FALSE(*r.engine.asleep);
  ASSERT_TRUE(r.engine.capacity_blocks.has_value());
  EXPECT_DOUBLE_EQ(*r.engine.capacity_blocks, 2001 + 1001);
  ASSERT_TRUE(r.engine.in_use_blocks.has_value());
  EXPECT_DOUBLE_EQ(*r.engine.in_use_blocks, 0.25 * 2000 + 0.5 * 1000)
      << "the null block is never used";
}

TEST(EngineCacheState, VllmReadsOnlyItsOwnEngineLabelForADataParallelRank) {
  scraper_config c = vllm_cfg();
  c.engine_label = "1";
  scraper_logic s(c);
  const auto r = scrape_fixture(s, "vllm_metrics_engine_state.txt");
  EXPECT_DOUBLE_EQ(r.engine.capacity_blocks.value_or(-1), 1001);
  EXPECT_DOUBLE_EQ(r.engine.in_use_blocks.value_or(-1), 500);
}

TEST(EngineCacheState, VllmSleepStateSetSaysAsleepEvenWhenTheScrapeIsRejected) {
  scraper_logic s(vllm_cfg());
  auto r = scrape_fixture(s, "vllm_metrics_asleep.txt");
  ASSERT_TRUE(r.engine.asleep.has_value());
  EXPECT_TRUE(*r.engine.asleep);
  EXPECT_FALSE(r.engine.capacity_blocks) << "no cache_config_info in this body";
  // Without the load gauges the stats are rejected, but the sleep state still counts.
  r = s.scrape_body(
      "# TYPE vllm:engine_sleep_state gauge\n"
      "vllm:engine_sleep_state{engine=\"0\",model_name=\"m\",sleep_state=\"awake\"} 0\n"
      "vllm:engine_sleep_state{engine=\"0\",model_name=\"m\",sleep_state=\"discard_all\"} 1\n");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.engine.asleep, std::optional<bool>(true));
}

TEST(EngineCacheState, VllmFirstRevisionSleepGaugesAreAcceptedToo) {
  // vLLM #24176's first revision: an unlabelled state (1 = sleeping) and a level gauge.
  scraper_logic s(vllm_cfg());
  const std::string load =
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n";
  const std::string state = "# TYPE vllm:engine_sleep_state gauge\nvllm:engine_sleep_state ";
  auto r = s.scrape_body(load + state + "1\n");
  EXPECT_EQ(r.engine.asleep, std::optional<bool>(true));
  r = s.scrape_body(load + state + "0\n");
  EXPECT_EQ(r.engine.asleep, std::optional<bool>(false));
  r = s.scrape_body(load + "# TYPE vllm:engine_sleep_level gauge\nvllm:engine_sleep_level 2\n");
  EXPECT_EQ(r.engine.asleep, std::optional<bool>(true));
  r = s.scrape_body(load);
  EXPECT_FALSE(r.engine.asleep) << "an engine that says nothing is not asleep: unknown";
}

TEST(EngineCacheState, VllmCapacityLabelNoneOrJunkIsUnknown) {
  scraper_logic s(vllm_cfg());
  const std::string load =
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
      "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.5\n";
  for (const char* v : {"None", "", "12x", "-5", "0"}) {
    auto r = s.scrape_body(load + "# TYPE vllm:cache_config_info gauge\n"
                                  "vllm:cache_config_info{num_gpu_blocks=\"" +
                           std::string(v) + "\"} 1\n");
    EXPECT_FALSE(r.engine.capacity_blocks) << v;
    EXPECT_FALSE(r.engine.in_use_blocks) << v;
  }
  // Legacy usage name, unlabelled, paired with the only engine's capacity.
  auto r = s.scrape_body(
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
      "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
      "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.5\n"
      "# TYPE vllm:cache_config_info info\nvllm:cache_config_info{num_gpu_blocks=\"101\"} 1\n");
  EXPECT_DOUBLE_EQ(r.engine.capacity_blocks.value_or(-1), 101);
  EXPECT_DOUBLE_EQ(r.engine.in_use_blocks.value_or(-1), 50);
}

TEST(EngineCacheState, SglangPagesAndUsedTokensBecomeBlocks) {
  scraper_logic s(sglang_cfg());
  auto r = scrape_fixture(s, "sglang_metrics_pages.txt");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.engine.asleep) << "SGLang exposes no sleep state";
  EXPECT_DOUBLE_EQ(r.engine.capacity_blocks.value_or(-1), 1000);
  EXPECT_DOUBLE_EQ(r.engine.in_use_blocks.value_or(-1), 200);
  // Before 0.5.11: the same numbers as labels of sglang:cache_config_info.
  r = s.scrape_body(
      "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0\n"
      "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 0\n"
      "# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens 64\n"
      "# TYPE sglang:cache_config_info gauge\n"
      "sglang:cache_config_info{page_size=\"16\",num_pages=\"40\"} 1\n");
  EXPECT_DOUBLE_EQ(r.engine.capacity_blocks.value_or(-1), 40);
  EXPECT_DOUBLE_EQ(r.engine.in_use_blocks.value_or(-1), 4);
  // Without a page size, tokens cannot be blocks: in use stays unknown.
  r = scrape_fixture(s, "sglang_metrics.txt");
  EXPECT_FALSE(r.engine.in_use_blocks);
}

// The durable index's proof: the engine's process start time, as prometheus_client's
// process collector prints it.
TEST(ProcessStartTime, IsReadFromTheProcessCollectorsGauge) {
  const char* body =
      "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
      "# TYPE process_start_time_seconds gauge\n"
      "process_start_time_seconds 1.76722560025e+09\n"
      "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n";
  const auto t = process_start_time(std::string_view(body));
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(*t, 1767225600.25);
}

TEST(ProcessStartTime, AbsentMalformedOrAmbiguousIsNoProof) {
  EXPECT_FALSE(process_start_time(std::string_view(read_metrics_fixture("vllm_metrics_cpu.txt"))))
      << "a multiprocess-mode exposition has no process metrics";
  EXPECT_FALSE(process_start_time(std::string_view("process_start_time_seconds 0\n")));
  EXPECT_FALSE(process_start_time(std::string_view("process_start_time_seconds NaN\n")));
  EXPECT_FALSE(process_start_time(std::string_view("not prometheus {{{")));
  EXPECT_FALSE(process_start_time(std::string_view(
      "process_start_time_seconds{pid=\"1\"} 100\nprocess_start_time_seconds{pid=\"2\"} 200\n")))
      << "two processes: which one?";
  EXPECT_TRUE(process_start_time(std::string_view(
      "process_start_time_seconds{a=\"1\"} 100\nprocess_start_time_seconds{a=\"2\"} 100\n")));
}

}  // namespace
}  // namespace kvrelay
