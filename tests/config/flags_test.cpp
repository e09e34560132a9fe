// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The Go-flag-compatible command line (reference C05, C07, §4 table).
#include "config/flags.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvrelay::config {
namespace {

using outcome = flag_parse_result::outcome;

flag_parse_result parse(std::vector<std::string> args) { return parse_flags(args); }

flag_values ok(std::vector<std::string> args) {
  auto r = parse_flags(args);
  EXPECT_EQ(r.status, outcome::ok) << r.error;
  return r.values;
}

TEST(ParseFlags, EveryReferenceFlagIsDefined) {
  const auto names = flag_names();
  for (const char* ref :
       {"engine-endpoint", "topic", "server", "replica-id", "model-id", "tenant-id", "hash-scheme",
        "window", "engine-metrics-url", "stats-interval", "engine-cache-size-bytes",
        "max-concurrency-ceiling", "cache-tier", "engine-model-name", "ignore-block-removed",
        "lora-adapter-names",
        // ours
        "config", "check", "version", "replay-endpoint", "dp-size", "dp-mode", "unknown-parent",
        "admin-listen", "log-format", "log-level", "eviction-mode", "engine-url", "state-dir",
        "memory-budget", "scoped-evictions", "server-readiness", "admin-public",
        "discover-via-metrics", "cpu-scheduling"}) {
    EXPECT_TRUE(std::count(names.begin(), names.end(), ref)) << ref;
  }
  EXPECT_EQ(names.size(), 35u);
}

TEST(ParseFlags, SingleAndDoubleDashAreEquivalent) {
  auto a = ok({"-replica-id", "r", "-window=7ms"});
  auto b = ok({"--replica-id", "r", "--window=7ms"});
  ASSERT_TRUE(a.has("replica-id") && b.has("replica-id"));
  EXPECT_EQ(a.engine().replica_id, "r");
  EXPECT_EQ(b.engine().replica_id, "r");
  EXPECT_EQ(a.engine().window.count(), 7);
  EXPECT_EQ(b.engine().window.count(), 7);
}

TEST(ParseFlags, SpaceAndEqualsFormsAreEquivalent) {
  auto a = ok({"--server", "h:1", "--topic="});
  auto b = ok({"--server=h:1", "--topic", ""});
  EXPECT_EQ(a.servers, std::vector<std::string>{"h:1"});
  EXPECT_EQ(b.servers, std::vector<std::string>{"h:1"});
  EXPECT_EQ(a.engine().topic, "");
  EXPECT_EQ(b.engine().topic, "");
}

TEST(ParseFlags, ValueMayStartWithDashLikeGo) {
  auto v = ok({"--tenant-id", "--window=1s"});
  EXPECT_EQ(v.engine().tenant_id, "--window=1s");
  EXPECT_FALSE(v.has("window"));
}

TEST(ParseFlags, BooleanForms) {
  EXPECT_TRUE(ok({"--ignore-block-removed"}).engine().l2_tier);
  EXPECT_TRUE(ok({"-ignore-block-removed=true"}).engine().l2_tier);
  EXPECT_FALSE(ok({"--ignore-block-removed=false"}).engine().l2_tier);
  EXPECT_FALSE(ok({"--ignore-block-removed=0"}).engine().l2_tier);
  EXPECT_TRUE(ok({"--check"}).check);
  EXPECT_TRUE(ok({"-version"}).version);
  // A boolean never takes the next argument: "false" would be a stray positional.
  auto r = parse({"--ignore-block-removed", "false"});
  EXPECT_EQ(r.status, outcome::error);
  EXPECT_EQ(r.error, "unexpected argument \"false\"");
  r = parse({"--ignore-block-removed=maybe"});
  EXPECT_EQ(r.status, outcome::error);
  EXPECT_EQ(r.error, "invalid boolean value \"maybe\" for --ignore-block-removed: invalid boolean "
                     "\"maybe\" (allowed: true, false)");
}

TEST(ParseFlags, UnknownFlagIsAUsageError) {
  auto r = parse({"--replica-id=r", "--no-such-flag=1"});
  EXPECT_EQ(r.status, outcome::error);
  EXPECT_EQ(r.error, "flag provided but not defined: --no-such-flag");
  // Kubernetes-injected sidecars pass --flag=value (C07): a typo must not start silently.
  // The likely flag is named on the same line (two edits at most; a different word gets none).
  r = parse({"--replicaid=r"});
  EXPECT_EQ(r.error, "flag provided but not defined: --replicaid; did you mean --replica-id?");
  r = parse({"-engine-endpont", "tcp://h:1"});
  EXPECT_EQ(r.error,
            "flag provided but not defined: --engine-endpont; did you mean --engine-endpoint?");
  r = parse({"--hepl"});
  EXPECT_EQ(r.error, "flag provided but not defined: --hepl; did you mean --help?");
  r = parse({"--colour=red"});
  EXPECT_EQ(r.error, "flag provided but not defined: --colour");
}

TEST(ParseFlags, HelpOutcome) {
  EXPECT_EQ(parse({"-h"}).status, outcome::help);
  EXPECT_EQ(parse({"--help"}).status, outcome::help);
  EXPECT_EQ(parse({"-help"}).status, outcome::help);
  EXPECT_EQ(parse({"--replica-id", "x", "--h"}).status, outcome::help);
}

TEST(ParseFlags, MalformedValuesAndSyntax) {
  auto r = parse({"--window=10"});
  EXPECT_EQ(r.status, outcome::error);
  EXPECT_EQ(r.error, "invalid value \"10\" for flag --window: invalid duration \"10\" (e.g. 100ms, "
                     "10s, 1m, 1h30m)");
  r = parse({"--max-concurrency-ceiling", "lots"});
  EXPECT_EQ(r.error, "invalid value \"lots\" for flag --max-concurrency-ceiling: invalid integer "
                     "\"lots\"");
  r = parse({"--dp-mode=split"});
  EXPECT_EQ(r.error, "invalid value \"split\" for flag --dp-mode: allowed: separate, merged");
  r = parse({"--log-level=verbose"});
  EXPECT_EQ(r.status, outcome::error);
  r = parse({"--eviction-mode=batch"});
  EXPECT_EQ(r.error, "invalid value \"batch\" for flag --eviction-mode: allowed: auto, expire, "
                     "rpc");
  r = parse({"--topic"});
  EXPECT_EQ(r.error, "flag needs an argument: --topic");
  r = parse({"---topic=x"});
  EXPECT_EQ(r.error, "bad flag syntax: ---topic=x");
  r = parse({"-=x"});
  EXPECT_EQ(r.error, "bad flag syntax: -=x");
  r = parse({"stray"});
  EXPECT_EQ(r.error, "unexpected argument \"stray\"");
  r = parse({"-"});
  EXPECT_EQ(r.error, "unexpected argument \"-\"");
}

TEST(ParseFlags, DoubleDashEndsFlags) {
  EXPECT_EQ(parse({"--replica-id=r", "--"}).status, outcome::ok);
  auto r = parse({"--", "--replica-id=r"});
  EXPECT_EQ(r.status, outcome::error);
  EXPECT_EQ(r.error, "unexpected argument \"--replica-id=r\"");
}

TEST(ParseFlags, CacheTierAndAdapterNamesStayRawForOrderedChecks) {
  // C01/C03 are reported by apply_flags in the reference's order, not by the parser.
  auto v = ok({"--cache-tier=AUTO", "--lora-adapter-names=garbage"});
  EXPECT_EQ(*v.raw_text("cache-tier"), "AUTO");
  EXPECT_EQ(*v.raw_text("lora-adapter-names"), "garbage");
}

TEST(ParseFlags, TypedValues) {
  auto v = ok({"--engine-cache-size-bytes=0x100", "--max-concurrency-ceiling=-1",
               "--stats-interval=0", "--dp-size=4", "--dp-mode=merged", "--unknown-parent=root",
               "--log-format=text", "--log-level=debug", "--admin-listen=:0"});
  EXPECT_EQ(v.engine().metrics.cache_size_bytes, 256);
  EXPECT_EQ(v.engine().metrics.max_concurrency, -1);
  EXPECT_TRUE(v.has("stats-interval"));
  EXPECT_EQ(v.engine().metrics.interval.count(), 0);
  EXPECT_EQ(v.engine().dp_size, 4);
  EXPECT_EQ(v.engine().dp_mode, dp_mode::merged);
  EXPECT_EQ(v.engine().unknown_parent, unknown_parent::root);
  EXPECT_EQ(v.overlay.log.format, log_format::text);
  EXPECT_EQ(v.overlay.log.level, log_level::debug);
  EXPECT_EQ(v.overlay.admin.listen, ":0");
  EXPECT_EQ(ok({"--engine-cache-size-bytes=16GiB"}).engine().metrics.cache_size_bytes,
            int64_t{16} << 30);
  v = ok({"--eviction-mode=rpc", "--engine-url", "http://127.0.0.1:8000"});
  EXPECT_EQ(v.overlay.server.eviction_mode, eviction_mode::rpc);
  EXPECT_EQ(v.engine().url, "http://127.0.0.1:8000");
}

TEST(ParseFlags, RepeatedFlagLastWins) {
  auto v = ok({"--topic=a", "--topic=b"});
  EXPECT_EQ(v.engine().topic, "b");
  EXPECT_EQ(v.given, (std::vector<std::string>{"topic", "topic"}));
}

TEST(ParseFlags, EngineFlagClassification) {
  EXPECT_FALSE(ok({"--server=h:1", "--config=x", "--check", "--log-level=warn"}).any_engine_flag());
  EXPECT_TRUE(ok({"--server=h:1", "--window=1s"}).any_engine_flag());
  // The eviction mode is the server's; an engine URL describes the one engine.
  EXPECT_FALSE(ok({"--eviction-mode=rpc"}).any_engine_flag());
  EXPECT_TRUE(ok({"--engine-url=http://h:1"}).any_engine_flag());
}

TEST(ParseFlags, ArgvOverload) {
  const char* argv[] = {"kvrelay", "--replica-id", "r", "-model-id=m"};
  auto r = parse_flags(4, argv);
  ASSERT_EQ(r.status, outcome::ok);
  EXPECT_EQ(r.values.engine().model_id, "m");
}

TEST(Usage, ListsEveryFlagWithItsDefault) {
  const std::string text = usage();
  for (const auto& name : flag_names())
    EXPECT_NE(text.find("  --" + name), std::string::npos) << name;
  // The reference defaults (§4), generated from settings.hpp.
  for (const char* line :
       {"--engine-endpoint string\n        engine ZMQ PUB endpoint to subscribe to (default "
        "\"tcp://127.0.0.1:5557\")",
        "(default \"kv-events\")", "(default \"127.0.0.1:9090\")", "(default \"vllm\")",
        "(default 100ms)", "(default \"http://127.0.0.1:8000/metrics\")", "(default 10s)",
        "(default 256)", "(default \"auto\")", "(default \"127.0.0.1:9464\")",
        "(default \"separate\")", "(default \"drop\")", "(default \"json\")", "(default \"info\")",
        "--eviction-mode string\n", "--engine-url url\n", "-h, --help"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
  EXPECT_EQ(text.rfind("Usage: kvrelay [flags]\n", 0), 0u);
}

}  // namespace
}  // namespace kvrelay::config
