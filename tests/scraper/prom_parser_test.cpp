// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/scraper/prom_parser.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/scraper/scraper_test_util.hpp"

namespace kvrelay {
namespace {

using testing::read_metrics_fixture;

prom_exposition parse_ok(std::string_view body) {
  prom_parse_result r = parse_prometheus(body);
  EXPECT_TRUE(r.ok) << r.error;
  return std::move(r.exposition);
}

std::string parse_error(std::string_view body) {
  prom_parse_result r = parse_prometheus(body);
  EXPECT_FALSE(r.ok) << "expected a parse error for:\n" << body;
  return r.error;
}

TEST(PromParser, ParsesTextFormatFixture) {
  prom_exposition e = parse_ok(read_metrics_fixture("vllm_metrics_cpu.txt"));
  const metric_family* usage = e.find("vllm:kv_cache_usage_perc");
  ASSERT_NE(usage, nullptr);
  EXPECT_EQ(usage->type, metric_type::gauge);
  EXPECT_TRUE(usage->declared);
  ASSERT_EQ(usage->samples.size(), 1u);
  EXPECT_DOUBLE_EQ(usage->samples[0].value, 0.42);
  ASSERT_NE(usage->samples[0].label("model_name"), nullptr);
  EXPECT_EQ(*usage->samples[0].label("model_name"), "Qwen/Qwen2.5-0.5B-Instruct");

  const metric_family* hits = e.find("vllm:prefix_cache_hits_total");
  ASSERT_NE(hits, nullptr);
  EXPECT_EQ(hits->type, metric_type::counter);
  EXPECT_EQ(hits->samples[0].suffix, "");
  EXPECT_DOUBLE_EQ(hits->samples[0].value, 25);

  // Histogram parts are attributed to their family with their suffix, not new families.
  const metric_family* h = e.find("vllm:e2e_request_latency_seconds");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, metric_type::histogram);
  ASSERT_EQ(h->samples.size(), 5u);
  EXPECT_EQ(h->samples[0].suffix, "_bucket");
  EXPECT_EQ(*h->samples[2].label("le"), "+Inf");
  EXPECT_EQ(h->samples[3].suffix, "_sum");
  EXPECT_EQ(h->samples[4].suffix, "_count");
  EXPECT_EQ(e.find("vllm:e2e_request_latency_seconds_bucket"), nullptr);
}

TEST(PromParser, ParsesEveryFixture) {
  for (const char* f :
       {"sglang_metrics.txt", "vllm_metrics_cpu.txt", "vllm_metrics_cpu_tick2.txt",
        "vllm_metrics_gpu.txt", "vllm_metrics_legacy_cpu.txt", "vllm_metrics_openmetrics.txt",
        "vllm_metrics_openmetrics_tick2.txt", "vllm_metrics_t2.txt", "vllm_metrics_partial.txt",
        "vllm_metrics_multimodel.txt", "vllm_metrics_openmetrics_full.txt",
        "sglang_metrics_dp.txt", "vllm_metrics_nan_running.txt"}) {
    prom_parse_result r = parse_prometheus(read_metrics_fixture(f));
    EXPECT_TRUE(r.ok) << f << ": " << r.error;
    EXPECT_FALSE(r.exposition.families().empty()) << f;
  }
}

TEST(PromParser, OpenMetricsCounterCarriesTotalAndCreatedSuffixes) {
  prom_exposition e = parse_ok(read_metrics_fixture("vllm_metrics_openmetrics_full.txt"));
  EXPECT_TRUE(e.eof_seen());
  const metric_family* q = e.find("vllm:prefix_cache_queries");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, metric_type::counter);
  ASSERT_EQ(q->samples.size(), 2u);
  EXPECT_EQ(q->samples[0].suffix, "_total");
  EXPECT_DOUBLE_EQ(q->samples[0].value, 400);
  EXPECT_EQ(q->samples[1].suffix, "_created");
  EXPECT_EQ(e.find("vllm:prefix_cache_queries_total"), nullptr);

  const metric_family* h = e.find("vllm:time_to_first_token_seconds");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->samples.size(), 6u);  // the exemplar is validated and dropped
  const metric_family* s = e.find("vllm:request_latency_seconds");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->type, metric_type::summary);
  EXPECT_TRUE(std::isnan(s->samples[0].value));
}

TEST(PromParser, TextFormatCreatedSeriesIsItsOwnFamily) {
  // prometheus_client's text 0.0.4 writes the _created series as a separate gauge family.
  prom_exposition e = parse_ok(
      "# TYPE x_total counter\nx_total{a=\"1\"} 5\n# TYPE x_created gauge\n"
      "x_created{a=\"1\"} 1.7e9\n");
  ASSERT_NE(e.find("x_total"), nullptr);
  ASSERT_NE(e.find("x_created"), nullptr);
  EXPECT_EQ(e.find("x_created")->type, metric_type::gauge);
  EXPECT_EQ(e.find("x_total")->samples.size(), 1u);
}

TEST(PromParser, UntypedFamilies) {
  prom_exposition e = parse_ok("foo 1\nbar{x=\"y\"} 2\n# TYPE baz untyped\nbaz 3\n");
  ASSERT_NE(e.find("foo"), nullptr);
  EXPECT_EQ(e.find("foo")->type, metric_type::untyped);
  EXPECT_FALSE(e.find("foo")->declared);
  EXPECT_EQ(e.find("baz")->type, metric_type::untyped);
  EXPECT_TRUE(e.find("baz")->declared);
  EXPECT_EQ(e.families().size(), 3u);
}

TEST(PromParser, LabelEscapesAndEdgeSyntax) {
  prom_exposition e = parse_ok(
      "m{a=\"back\\\\slash\",b=\"q\\\"uote\",c=\"new\\nline\",d=\"\",} 1 1700000000000\n"
      "m { e = \"sp aced\" } 2\n"
      "m{} 3\r\n"
      "\n"
      "   # indented comment\n"
      "#comment without space\n"
      "m\t4\t\n");
  const metric_family* m = e.find("m");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->samples.size(), 4u);
  const prom_sample& s = m->samples[0];
  EXPECT_EQ(*s.label("a"), "back\\slash");
  EXPECT_EQ(*s.label("b"), "q\"uote");
  EXPECT_EQ(*s.label("c"), "new\nline");
  ASSERT_NE(s.label("d"), nullptr);
  EXPECT_EQ(*s.label("d"), "");
  EXPECT_EQ(s.label("zz"), nullptr);
  EXPECT_TRUE(s.has_timestamp);
  EXPECT_DOUBLE_EQ(s.timestamp, 1700000000000.0);
  EXPECT_EQ(*m->samples[1].label("e"), "sp aced");
  EXPECT_DOUBLE_EQ(m->samples[2].value, 3);
  EXPECT_DOUBLE_EQ(m->samples[3].value, 4);
}

TEST(PromParser, NonFiniteAndNumberForms) {
  prom_exposition e =
      parse_ok("a NaN\nb +Inf\nc -Inf\nd 1e3\ne -0.5\nf +7\ng Inf\ni 1.5 1.7e9\n");
  EXPECT_FALSE(parse_prometheus("h 0x10\n").ok);
  EXPECT_FALSE(parse_prometheus("h ++1\n").ok);
  EXPECT_FALSE(parse_prometheus("h +-1\n").ok);
  EXPECT_FALSE(parse_prometheus("h 1.0.0\n").ok);
  EXPECT_TRUE(std::isnan(e.find("a")->samples[0].value));
  EXPECT_TRUE(std::isinf(e.find("b")->samples[0].value));
  EXPECT_GT(e.find("b")->samples[0].value, 0);
  EXPECT_LT(e.find("c")->samples[0].value, 0);
  EXPECT_DOUBLE_EQ(e.find("d")->samples[0].value, 1000);
  EXPECT_DOUBLE_EQ(e.find("e")->samples[0].value, -0.5);
  EXPECT_DOUBLE_EQ(e.find("f")->samples[0].value, 7);
  EXPECT_TRUE(std::isinf(e.find("g")->samples[0].value));
  EXPECT_TRUE(e.find("i")->samples[0].has_timestamp);
}

TEST(PromParser, MalformedLinesNameTheLine) {
  EXPECT_EQ(parse_error("ok 1\nbad{a=\"x} 1\n"), "line 2: unterminated label value");
  EXPECT_NE(parse_error("ok 1\n\nbad 1 2 3\n").find("line 3:"), std::string::npos);
  EXPECT_NE(parse_error("m{a=\"\\t\"} 1\n").find("escape"), std::string::npos);
  EXPECT_NE(parse_error("m abc\n").find("invalid value"), std::string::npos);
  EXPECT_NE(parse_error("m\n").find("missing value"), std::string::npos);
  EXPECT_NE(parse_error("m{a=\"1\",a=\"2\"} 1\n").find("duplicate label"), std::string::npos);
  EXPECT_NE(parse_error("m{1a=\"x\"} 1\n").find("label name"), std::string::npos);
  EXPECT_NE(parse_error("m{a=x} 1\n").find("label value"), std::string::npos);
  EXPECT_NE(parse_error("m{a=\"x\" b=\"y\"} 1\n").find("','"), std::string::npos);
  EXPECT_NE(parse_error("9m 1\n").find("metric name"), std::string::npos);
  EXPECT_NE(parse_error("m 1 notatime\n").find("timestamp"), std::string::npos);
  EXPECT_NE(parse_error("m 1 NaN\n").find("timestamp"), std::string::npos);
  EXPECT_NE(parse_error("# TYPE m bogus\n").find("unknown metric type"), std::string::npos);
  EXPECT_NE(parse_error("# TYPE m gauge extra\n").find("trailing"), std::string::npos);
  EXPECT_NE(parse_error("# TYPE m gauge\n# TYPE m counter\n").find("second TYPE"),
            std::string::npos);
  EXPECT_NE(parse_error("# HELP m a\n# HELP m b\n").find("second HELP"), std::string::npos);
  EXPECT_NE(parse_error("m 1\n# TYPE m gauge\n").find("after its samples"), std::string::npos);
  EXPECT_NE(parse_error("# TYPE 9x gauge\n").find("metric name"), std::string::npos);
  EXPECT_NE(parse_error("m 1 # notanexemplar\n").find("exemplar"), std::string::npos);
  EXPECT_NE(parse_error("m 1\n# EOF\nm 2\n").find("after # EOF"), std::string::npos);
  EXPECT_NE(parse_error("m{a=\"x\"").find("label set"), std::string::npos);
  EXPECT_NE(parse_error("m{a=\"x\\").find("unterminated escape"), std::string::npos);
  EXPECT_NE(parse_error("m{").find("unterminated label set"), std::string::npos);
}

TEST(PromParser, EofTerminatesBody) {
  prom_exposition e = parse_ok("m 1\n# EOF\n");
  EXPECT_TRUE(e.eof_seen());
  EXPECT_TRUE(parse_prometheus("m 1\n# EOF").ok);
  EXPECT_FALSE(parse_ok("m 1\n").eof_seen());
}

TEST(PromParser, EmptyBodyIsEmptyExposition) {
  prom_exposition e = parse_ok("");
  EXPECT_TRUE(e.families().empty());
}

TEST(PromParser, RejectsOversizedBody) {
  std::string big(kMaxPrometheusBody + 1, '#');
  std::string err = parse_error(big);
  EXPECT_NE(err.find("exceeds"), std::string::npos);
  // At the limit it is still parsed (a long comment line is fine).
  big.resize(kMaxPrometheusBody);
  EXPECT_TRUE(parse_prometheus(big).ok);
}

TEST(PromParser, FailedParseReturnsEmptyExposition) {
  prom_parse_result r = parse_prometheus("good 1\nbad{\n");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.exposition.families().empty());
}

}  // namespace
}  // namespace kvrelay
