// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// TOML loading, flag precedence, validation (C01-C03, R09, clamps R04/S10/N02), A02/A03, the
// printed effective configuration, the reload diff and the shipped examples. Long because each
// error text is asserted exactly; checks_test.cpp has the newer checks (files, discovery).
#include "config/loader.hpp"
#include "config/schema.hpp"

#include <gtest/gtest.h>

#include "tests/config/helpers.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvrelay::config {
namespace {

using std::chrono::milliseconds;

using namespace testing_helpers;

// -- defaults ------------------------------------------------------------------------------------

TEST(Settings, ReferenceDefaults) {
  const daemon_config c;
  const engine_settings e;
  EXPECT_EQ(c.server.address, "127.0.0.1:9090");
  EXPECT_EQ(c.server.rpc_timeout, milliseconds{5000});
  EXPECT_EQ(c.server.refresh_interval, milliseconds{600000});
  EXPECT_FALSE(c.server.tls);
  EXPECT_EQ(c.admin.listen, "127.0.0.1:9464");
  EXPECT_FALSE(c.admin.enable_crash_endpoint);
  EXPECT_EQ(c.log.format, log_format::json);
  EXPECT_EQ(c.log.level, log_level::info);
  EXPECT_TRUE(c.engines.empty());
  EXPECT_EQ(e.endpoint, "tcp://127.0.0.1:5557");
  EXPECT_EQ(e.topic, "kv-events");
  EXPECT_EQ(e.hash_scheme, "vllm");
  EXPECT_EQ(e.window, milliseconds{100});
  EXPECT_EQ(e.dp_size, 1);
  EXPECT_EQ(e.dp_mode, dp_mode::separate);
  EXPECT_EQ(e.unknown_parent, unknown_parent::drop);
  EXPECT_FALSE(e.l2_tier);
  EXPECT_FALSE(e.index_salted);
  EXPECT_EQ(e.metrics.url, "http://127.0.0.1:8000/metrics");
  EXPECT_EQ(e.metrics.interval, milliseconds{10000});
  EXPECT_EQ(e.metrics.cache_size_bytes, 0);
  EXPECT_EQ(e.metrics.max_concurrency, 256);
  EXPECT_EQ(e.metrics.tier, cache_tier::auto_);
  EXPECT_EQ(e.metrics.model_label, "");
}

TEST(Settings, CacheTierNamesAreCaseSensitive) {  // M18
  cache_tier t{};
  for (const char* ok : {"auto", "kv", "gpu", "cpu"}) EXPECT_TRUE(parse(ok, t)) << ok;
  for (const char* bad : {"", "xpu", "AUTO", "default"}) EXPECT_FALSE(parse(bad, t)) << bad;
  EXPECT_STREQ(allowed_cache_tiers(), "auto, kv, gpu, cpu");
}

// -- every key -----------------------------------------------------------------------------------

const char* const full = R"([server]
address = "policy.ns.svc:9443"
tls = true
ca_file = "/ca.pem"
cert_file = "/c.pem"
key_file = "/k.pem"
server_name = "policy"
rpc_timeout = "2s"
refresh_interval = "5m"

[admin]
listen = "0.0.0.0:9000"
token_file = "/token"
enable_crash_endpoint = true

[log]
format = "text"
level = "debug"

[[engine]]
replica_id = "vllm-0"
model_id = "llama"
tenant_id = "tenant-a"
hash_scheme = "sglang"
endpoint = "tcp://10.0.0.1:6000"
replay_endpoint = "tcp://10.0.0.1:7000"
topic = ""
dp_size = 2
dp_mode = "merged"
window = "7ms"
reconnect_backoff = "9ms"
l2_tier = true
unknown_parent = "root"
index_salted = true
max_blocks_per_adapter = 0
max_t2_blocks_per_adapter = 5000
max_t3_blocks_per_adapter = 0

[engine.adapters]
1 = "sql-lora"
-2 = "neg"

[engine.metrics]
url = "https://10.0.0.1:8443/metrics"
interval = "3s"
cache_tier = "gpu"
model_label = "primary"
cache_size_bytes = "1GiB"
max_concurrency = -1
)";

TEST(LoadToml, ReadsEveryKey) {
  daemon_config c = load(full);
  EXPECT_EQ(c.server.address, "policy.ns.svc:9443");
  EXPECT_TRUE(c.server.tls);
  EXPECT_EQ(c.server.ca_file, "/ca.pem");
  EXPECT_EQ(c.server.cert_file, "/c.pem");
  EXPECT_EQ(c.server.key_file, "/k.pem");
  EXPECT_EQ(c.server.server_name, "policy");
  EXPECT_EQ(c.server.rpc_timeout, milliseconds{2000});
  EXPECT_EQ(c.server.refresh_interval, milliseconds{300000});
  EXPECT_EQ(c.admin.listen, "0.0.0.0:9000");
  EXPECT_EQ(c.admin.token_file, "/token");
  EXPECT_TRUE(c.admin.enable_crash_endpoint);
  EXPECT_EQ(c.log.format, log_format::text);
  EXPECT_EQ(c.log.level, log_level::debug);
  ASSERT_EQ(c.engines.size(), 1u);
  const auto& e = c.engines[0];
  EXPECT_EQ(e.replica_id, "vllm-0");
  EXPECT_EQ(e.model_id, "llama");
  EXPECT_EQ(e.tenant_id, "tenant-a");
  EXPECT_EQ(e.hash_scheme, "sglang");
  EXPECT_EQ(e.endpoint, "tcp://10.0.0.1:6000");
  EXPECT_EQ(e.replay_endpoint, "tcp://10.0.0.1:7000");
  EXPECT_EQ(e.topic, "");
  EXPECT_EQ(e.dp_size, 2);
  EXPECT_EQ(e.dp_mode, dp_mode::merged);
  EXPECT_EQ(e.window, milliseconds{7});
  EXPECT_EQ(e.reconnect_backoff, milliseconds{9});
  EXPECT_TRUE(e.l2_tier);
  EXPECT_EQ(e.unknown_parent, unknown_parent::root);
  EXPECT_TRUE(e.index_salted);
  EXPECT_EQ(e.max_blocks_per_adapter, 0);
  EXPECT_EQ(e.max_t2_blocks_per_adapter, 5000);
  EXPECT_EQ(e.max_t3_blocks_per_adapter, 0);
  EXPECT_EQ(e.adapters, (std::map<int64_t, std::string>{{1, "sql-lora"}, {-2, "neg"}}));
  EXPECT_EQ(e.metrics.url, "https://10.0.0.1:8443/metrics");
  EXPECT_EQ(e.metrics.interval, milliseconds{3000});
  EXPECT_EQ(e.metrics.tier, cache_tier::gpu);
  EXPECT_EQ(e.metrics.model_label, "primary");
  EXPECT_EQ(e.metrics.cache_size_bytes, int64_t{1} << 30);
  EXPECT_EQ(e.metrics.max_concurrency, -1);
  EXPECT_EQ(err(validate(c)), "");
}

TEST(LoadToml, RecordsWhereEachKeyCameFrom) {
  daemon_config c = load(full);
  EXPECT_EQ(c.origin.at("server.address"), "t.toml:2:11");
  EXPECT_EQ(c.origin.at("engine[0].window"), "t.toml:30:10");
  EXPECT_EQ(c.origin.at("engine[0].metrics.url"), "t.toml:44:7");
}

TEST(LoadToml, MissingKeysTakeDefaults) {
  daemon_config c = load(minimal);
  ASSERT_EQ(c.engines.size(), 1u);
  EXPECT_EQ(c.engines[0].endpoint, engine_settings{}.endpoint);
  EXPECT_EQ(c.server.address, server_settings{}.address);
  EXPECT_EQ(err(validate(c)), "");
}

TEST(LoadToml, InlineTablesWork) {
  daemon_config c = load(
      "engine = [{replica_id = \"a\", model_id = \"m\", adapters = {7 = \"x\"}, "
      "metrics = {interval = \"1s\"}}]\n");
  ASSERT_EQ(c.engines.size(), 1u);
  EXPECT_EQ(c.engines[0].adapters.at(7), "x");
  EXPECT_EQ(c.engines[0].metrics.interval, milliseconds{1000});
}

// -- errors: exact file:line:col text ------------------------------------------------------------

TEST(LoadTomlErrors, UnknownTopLevelKey) {
  EXPECT_EQ(load_error("[sever]\naddress = \"h:1\"\n"),
            "t.toml:1:2: sever: unknown key; did you mean \"server\"? (allowed: server, admin, "
            "state, memory, cpu, log, engine)");
}

// The durable index: [state], --state-dir, and on_shutdown's default with it.
TEST(StateSection, IsReadValidatedAndTurnsOnShutdownToKeep) {
  auto r = parse_toml("[state]\ndir = \"/var/tmp/kvrelay-t\"\ninterval = \"5s\"\nring_batches = 500\n"
                      "[[engine]]\nreplica_id = \"r\"\nmodel_id = \"m\"\n",
                      "t.toml");
  ASSERT_TRUE(r.ok()) << err(r);
  auto c = r.value();
  EXPECT_EQ(c.state.dir, "/var/tmp/kvrelay-t");
  EXPECT_EQ(c.state.interval, std::chrono::milliseconds(5000));
  EXPECT_EQ(c.state.ring_batches, 500);
  EXPECT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.server.on_shutdown, shutdown_action::keep) << "the default with a state dir";
  auto explicit_clear = parse_toml("[server]\non_shutdown = \"clear\"\n[state]\ndir = \"/x\"\n"
                                   "[[engine]]\nreplica_id = \"r\"\nmodel_id = \"m\"\n",
                                   "t.toml");
  ASSERT_TRUE(explicit_clear.ok());
  auto c2 = explicit_clear.value();
  EXPECT_EQ(err(validate(c2)), "");
  EXPECT_EQ(c2.server.on_shutdown, shutdown_action::clear) << "an explicit choice stands";
  auto bad = parse_toml("[state]\ndir = \"/x\"\nring_batches = 0\n[[engine]]\nreplica_id = \"r\"\n"
                        "model_id = \"m\"\n",
                        "t.toml");
  ASSERT_TRUE(bad.ok());
  auto c3 = bad.value();
  EXPECT_NE(err(validate(c3)).find("state.ring_batches"), std::string::npos);
}

TEST(LoadTomlErrors, UnknownKeyNamesItAndSuggests) {
  EXPECT_EQ(load_error(std::string(minimal) + "windw = \"1s\"\n"),
            "t.toml:4:1: engine[0].windw: unknown key; did you mean \"window\"? (allowed: "
            "replica_id, url, discover_via_metrics, model_id, tenant_id, hash_scheme, endpoint, "
            "replay_endpoint, topic, "
            "dp_size, dp_mode, window, reconnect_backoff, discovery_retry_max, l2_tier, "
            "unknown_parent, index_salted, max_blocks_per_adapter, max_t2_blocks_per_adapter, "
            "max_t3_blocks_per_adapter, metrics, adapters)");
  // Not close to anything: no guess.
  EXPECT_EQ(load_error("[log]\ncolour = true\n"),
            "t.toml:2:1: log.colour: unknown key (allowed: format, level)");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.metrics]\nurll = \"http://h/\"\n"),
            "t.toml:5:1: engine[0].metrics.urll: unknown key; did you mean \"url\"? (allowed: url, "
            "interval, timeout, cache_tier, model_label, cache_size_bytes, max_concurrency)");
}

TEST(LoadTomlErrors, WrongTypes) {
  EXPECT_EQ(load_error(std::string(minimal) + "dp_size = \"2\"\n"),
            "t.toml:4:11: engine[0].dp_size: expected an integer, got string");
  EXPECT_EQ(load_error(std::string(minimal) + "l2_tier = \"yes\"\n"),
            "t.toml:4:11: engine[0].l2_tier: expected a boolean (true or false), got string");
  EXPECT_EQ(load_error(std::string(minimal) + "topic = 5\n"),
            "t.toml:4:9: engine[0].topic: expected a string, got integer");
  EXPECT_EQ(load_error(std::string(minimal) + "window = 100\n"),
            "t.toml:4:10: engine[0].window: expected a duration string such as \"100ms\", \"10s\" "
            "or \"1m\", got integer");
  EXPECT_EQ(load_error("[server]\nrpc_timeout = 1.5\n"),
            "t.toml:2:15: server.rpc_timeout: expected a duration string such as \"100ms\", "
            "\"10s\" or \"1m\", got float");
  EXPECT_EQ(load_error("[log]\nlevel = 3\n"),
            "t.toml:2:9: log.level: expected one of the strings debug, info, warn, error, got "
            "integer");
  EXPECT_EQ(load_error("server = \"h:1\"\n"), "t.toml:1:10: server: expected a table, got string");
  EXPECT_EQ(load_error("[engine]\nreplica_id = \"r\"\n"),
            "t.toml:1:1: engine: expected [[engine]] tables (an array of tables), got table");
  EXPECT_EQ(load_error(std::string(minimal) + "metrics = 1\n"),
            "t.toml:4:11: engine[0].metrics: expected a table, got integer");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.metrics]\ncache_size_bytes = true\n"),
            "t.toml:5:20: engine[0].metrics.cache_size_bytes: expected a size (an integer byte "
            "count or a string such as \"16GiB\"), got boolean");
}

TEST(LoadTomlErrors, BadValues) {
  EXPECT_EQ(load_error(std::string(minimal) + "window = \"10\"\n"),
            "t.toml:4:10: engine[0].window: invalid duration \"10\" (e.g. 100ms, 10s, 1m, 1h30m)");
  EXPECT_EQ(load_error(std::string(minimal) + "dp_mode = \"split\"\n"),
            "t.toml:4:11: engine[0].dp_mode: invalid value \"split\" (allowed: separate, merged)");
  EXPECT_EQ(load_error(std::string(minimal) + "unknown_parent = \"Drop\"\n"),
            "t.toml:4:18: engine[0].unknown_parent: invalid value \"Drop\" (allowed: drop, root)");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.metrics]\ncache_tier = \"xpu\"\n"),
            "t.toml:5:14: engine[0].metrics.cache_tier: invalid value \"xpu\" (allowed: auto, kv, "
            "gpu, cpu)");
  EXPECT_EQ(load_error("[log]\nformat = \"xml\"\n"),
            "t.toml:2:10: log.format: invalid value \"xml\" (allowed: json, text)");
  EXPECT_EQ(load_error("[cpu]\nscheduling = \"fifo\"\n"),
            "t.toml:2:14: cpu.scheduling: invalid value \"fifo\" (allowed: batch, inherit)");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.metrics]\ncache_size_bytes = -1\n"),
            "t.toml:5:20: engine[0].metrics.cache_size_bytes: must be >= 0");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.metrics]\ncache_size_bytes = \"1 GB x\"\n"),
            "t.toml:5:20: engine[0].metrics.cache_size_bytes: invalid size \"1 GB x\" (a byte "
            "count, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

TEST(LoadTomlErrors, Adapters) {
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.adapters]\n1 = \"a\"\n01 = \"b\"\n"),
            "t.toml:6:1: engine[0].adapters.01: duplicate adapter id 1");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.adapters]\nsql = \"a\"\n"),
            "t.toml:5:1: engine[0].adapters.sql: adapter id must be a base-10 integer (LoRA id)");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.adapters]\n1 = \"\"\n"),
            "t.toml:5:5: engine[0].adapters.1: adapter name must not be empty");
  EXPECT_EQ(load_error(std::string(minimal) + "[engine.adapters]\n1 = 2\n"),
            "t.toml:5:5: engine[0].adapters.1: expected the adapter name as a string, got integer");
}

TEST(LoadTomlErrors, SyntaxError) {
  const std::string err = load_error("[server]\naddress = \"unterminated\n");
  EXPECT_EQ(err.rfind("t.toml:2:", 0), 0u) << err;
  EXPECT_NE(err.find("TOML syntax error: "), std::string::npos) << err;
  // TOML itself rejects a key given twice.
  EXPECT_EQ(load_error("[log]\nlevel = \"info\"\nlevel = \"warn\"\n").rfind("t.toml:3:", 0), 0u);
}

TEST(LoadTomlErrors, HostileInputIsAPositionedErrorNeverAnException) {
  // Not TOML at all: each is refused with a file:line:column, not an exception or a crash.
  for (const std::string& text :
       {std::string("\0\0\0", 3), std::string(100000, '['),
        std::string("a = ") + std::string(5000, '['), std::string("\xff\xfe = 1")}) {
    SCOPED_TRACE(text.substr(0, 16));
    std::string e;
    EXPECT_NO_THROW(e = load_error(text));
    EXPECT_EQ(e.rfind("t.toml:", 0), 0u) << e;
    EXPECT_NE(e.find("TOML syntax error: "), std::string::npos) << e;
  }
  // Well-formed but huge: loads, the value kept whole (a later check may refuse it; never a
  // crash).
  const std::string long_id(100000, 'x');
  daemon_config c;
  EXPECT_NO_THROW(c = load("[[engine]]\nreplica_id = \"" + long_id + "\"\n"));
  ASSERT_EQ(c.engines.size(), 1u);
  EXPECT_EQ(c.engines[0].replica_id, long_id);
}

TEST(LoadTomlFile, MissingFileAndTooLargeFile) {
  auto r = load_toml("/nonexistent/kvrelay.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(err(r), "/nonexistent/kvrelay.toml: cannot open config file: No such file or "
                       "directory");
  const std::string big = testing::TempDir() + "/kvrelay_big.toml";
  {
    std::ofstream out(big);
    out << "# " << std::string(2 << 20, 'x') << "\n";
  }
  r = load_toml(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(err(r), big + ": config file larger than 1 MiB");
  std::remove(big.c_str());
}

TEST(LoadTomlFile, ErrorsNameThePath) {
  const std::string path = testing::TempDir() + "/kvrelay_bad.toml";
  {
    std::ofstream out(path);
    out << minimal << "dp_size = 0\n";
  }
  auto r = load_toml(path);
  ASSERT_TRUE(r.ok()) << err(r);
  EXPECT_EQ(err(validate(r.value())),
            path + ":4:11: engine[0].dp_size: must be between 1 and 1024");
  std::remove(path.c_str());
}

// -- validation ----------------------------------------------------------------------------------

TEST(Validate, BadEndpointsUrlsAddresses) {
  EXPECT_EQ(check(std::string(minimal) + "endpoint = \"tcp://127.0.0.1\"\n"),
            "t.toml:4:12: engine[0].endpoint: invalid endpoint \"tcp://127.0.0.1\": expected "
            "host:port (allowed: tcp://host:port, ipc://path, inproc://name)");
  EXPECT_EQ(check(std::string(minimal) + "replay_endpoint = \"zmq://x:1\"\n"),
            "t.toml:4:19: engine[0].replay_endpoint: invalid endpoint \"zmq://x:1\": unsupported "
            "transport (allowed: tcp://host:port, ipc://path, inproc://name)");
  EXPECT_EQ(check(std::string(minimal) + "replay_endpoint = \"tcp://127.0.0.1:5557\"\n"),
            "t.toml:4:19: engine[0].replay_endpoint: must differ from endpoint");
  EXPECT_EQ(check(std::string(minimal) + "[engine.metrics]\nurl = \"localhost:8000/metrics\"\n"),
            "t.toml:5:7: engine[0].metrics.url: invalid URL \"localhost:8000/metrics\": scheme "
            "must be http or https (allowed: http://host[:port]/path, https://host[:port]/path)");
  EXPECT_EQ(check(std::string("[server]\naddress = \"policy\"\n") + minimal),
            "t.toml:2:11: server.address: invalid server address \"policy\" (expected host:port "
            "or dns:///host:port)");
  EXPECT_EQ(check(std::string("[admin]\nlisten = \"9464\"\n") + minimal),
            "t.toml:2:10: admin.listen: invalid listen address \"9464\" (expected host:port, e.g. "
            "127.0.0.1:9464)");
  // Empty values that mean "off".
  EXPECT_EQ(check(std::string("[admin]\nlisten = \"\"\n") + minimal +
                  "replay_endpoint = \"\"\n[engine.metrics]\nurl = \"\"\n"),
            "");
}

TEST(Validate, RequiredIdentityR09) {
  EXPECT_EQ(check("[[engine]]\nmodel_id = \"m\"\n"),
            "t.toml:1:1: engine[0].replica_id: invalid config: must not be empty (set replica_id "
            "in [[engine]] or --replica-id)");
  EXPECT_EQ(check("[[engine]]\nreplica_id = \"r\"\nmodel_id = \"\"\n"),
            "t.toml:3:12: engine[0].model_id: invalid config: must not be empty (set model_id in "
            "[[engine]] or --model-id)");
  EXPECT_EQ(check(std::string(minimal) + "hash_scheme = \"\"\n"),
            "t.toml:4:15: engine[0].hash_scheme: invalid config: must not be empty (set "
            "hash_scheme in [[engine]] or --hash-scheme)");
  EXPECT_EQ(check("[[engine]]\nreplica_id = \"r\"\nmodel_id = \"m\"\ntenant_id = \"\"\n"), "");
  EXPECT_EQ(check("[server]\naddress = \"h:1\"\n"),
            "t.toml: engine: no engine configured: add an [[engine]] table, or pass --engine-url "
            "and --replica-id (an engine that says where its events are), or --engine-endpoint, "
            "--replica-id and --model-id (the Go sidecar's flags)");
}

TEST(Validate, DuplicateReplicaIds) {
  const std::string two = std::string(minimal) +
                          "[[engine]]\nreplica_id = \"r0\"\nmodel_id = \"m\"\n"
                          "endpoint = \"tcp://127.0.0.1:6000\"\n";
  EXPECT_EQ(check(two), "t.toml:5:14: engine[1].replica_id: duplicate replica id \"r0\" (also "
                        "used by engine[0])");
  // A separate-mode rank id collides with another engine's id.
  const std::string ranks =
      "[[engine]]\nreplica_id = \"a\"\nmodel_id = \"m\"\ndp_size = 2\n"
      "[[engine]]\nreplica_id = \"a-dp1\"\nmodel_id = \"m\"\nendpoint = \"tcp://h:7000\"\n";
  EXPECT_EQ(check(ranks), "t.toml:6:14: engine[1].replica_id: duplicate replica id \"a-dp1\" "
                          "(also used by engine[0])");
  // The same endpoint and topic subscribed twice.
  const std::string same_endpoint =
      std::string(minimal) + "[[engine]]\nreplica_id = \"r1\"\nmodel_id = \"m\"\n";
  EXPECT_EQ(check(same_endpoint),
            "t.toml:4:1: engine[1].endpoint: endpoint \"tcp://127.0.0.1:5557\" with the same topic "
            "is already subscribed by engine[0]");
}

TEST(Validate, DataParallelEndpoints) {
  EXPECT_EQ(check(std::string(minimal) + "dp_size = 2\nendpoint = \"ipc:///tmp/kv\"\n"),
            "t.toml:5:12: engine[0].endpoint: endpoint \"ipc:///tmp/kv\" cannot be used with "
            "dp_size > 1 (engines derive rank endpoints only for tcp:// and inproc://)");
  EXPECT_EQ(check(std::string(minimal) + "dp_size = 3\nendpoint = \"tcp://h:65534\"\n"),
            "t.toml:5:12: engine[0].endpoint: endpoint \"tcp://h:65534\" + rank 2 exceeds port "
            "65535");
  EXPECT_EQ(check(std::string(minimal) + "dp_size = 0\n"),
            "t.toml:4:11: engine[0].dp_size: must be between 1 and 1024");
  EXPECT_EQ(check(std::string(minimal) + "dp_size = 4\nendpoint = \"inproc://kv\"\n"), "");
}

TEST(Validate, TlsCombinations) {
  EXPECT_EQ(check(std::string("[server]\nca_file = \"/ca\"\n") + minimal),
            "t.toml:2:11: server.ca_file: requires tls = true");
  EXPECT_EQ(check(std::string("[server]\ntls = true\ncert_file = \"/c\"\n") + minimal),
            "t.toml:3:13: server.cert_file: cert_file and key_file go together (mTLS needs both)");
  EXPECT_EQ(check(std::string("[server]\ntls = true\n") + minimal), "");
  EXPECT_EQ(check(std::string("[server]\nrefresh_interval = \"-1s\"\n") + minimal),
            "t.toml:2:20: server.refresh_interval: must be >= 0 (0 disables the refresh)");
}

TEST(Validate, ReplayWaitWindowsIsBoundedAndZeroTurnsItOff) {  // DB19
  EXPECT_EQ(daemon_config{}.server.replay_wait_windows, 10);
  EXPECT_EQ(load(std::string("[server]\nreplay_wait_windows = 0\n") + minimal)
                .server.replay_wait_windows,
            0);
  EXPECT_EQ(check(std::string("[server]\nreplay_wait_windows = 601\n") + minimal),
            "t.toml:2:23: server.replay_wait_windows: must be between 0 (off) and 600 (windows)");
  EXPECT_EQ(check(std::string("[server]\nreplay_wait_windows = -1\n") + minimal),
            "t.toml:2:23: server.replay_wait_windows: must be between 0 (off) and 600 (windows)");
}

TEST(Validate, ClampsNonPositiveDurations) {  // R04, S10, N02
  daemon_config c = load(std::string("[server]\nrpc_timeout = \"0\"\n") + minimal +
                         "window = \"-1s\"\nreconnect_backoff = \"0s\"\n"
                         "[engine.metrics]\ninterval = \"0\"\n");
  std::vector<std::string> notes;
  ASSERT_EQ(err(validate(c, &notes)), "");
  EXPECT_EQ(c.server.rpc_timeout, milliseconds{5000});
  EXPECT_EQ(c.engines[0].window, milliseconds{100});
  EXPECT_EQ(c.engines[0].reconnect_backoff, milliseconds{1000});
  EXPECT_EQ(c.engines[0].metrics.interval, milliseconds{10000});
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "server.rpc_timeout = 0s is not positive; using 5s",
                       "engine[0].window = -1s is not positive; using 100ms",
                       "engine[0].reconnect_backoff = 0s is not positive; using 1s",
                       "engine[0].metrics.interval = 0s is not positive; using 10s"}));
  // Explicit positive values are kept (R04: 7 ms and 2 s).
  c = load(std::string("[server]\nrpc_timeout = \"2s\"\n") + minimal + "window = \"7ms\"\n");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.engines[0].window, milliseconds{7});
  EXPECT_EQ(c.server.rpc_timeout, milliseconds{2000});
}

// -- flags over the file -------------------------------------------------------------------------

TEST(ApplyFlags, FlagsAloneDescribeOneEngine) {
  daemon_config c;
  auto f = flags({"--replica-id=vllm-0", "--model-id=llama", "--window=7ms",
                  "--ignore-block-removed", "--lora-adapter-names=1=sql-lora",
                  "--engine-metrics-url=http://h:1/m", "--stats-interval=3s", "--cache-tier=kv",
                  "--engine-cache-size-bytes=4096", "--max-concurrency-ceiling=8",
                  "--engine-model-name=primary", "--tenant-id=t", "--hash-scheme=sglang",
                  "--topic=", "--engine-endpoint=tcp://h:1", "--replay-endpoint=tcp://h:2",
                  "--server=s:2", "--dp-size=2", "--dp-mode=merged", "--unknown-parent=root",
                  "--admin-listen=", "--log-format=text", "--log-level=warn"});
  ASSERT_EQ(err(apply_flags(c, f)), "");
  ASSERT_EQ(err(validate(c)), "");
  ASSERT_EQ(c.engines.size(), 1u);
  const auto& e = c.engines[0];
  EXPECT_EQ(e.replica_id, "vllm-0");
  EXPECT_EQ(e.model_id, "llama");
  EXPECT_EQ(e.tenant_id, "t");
  EXPECT_EQ(e.hash_scheme, "sglang");
  EXPECT_EQ(e.window, milliseconds{7});
  EXPECT_TRUE(e.l2_tier);
  EXPECT_EQ(e.adapters.at(1), "sql-lora");
  EXPECT_EQ(e.metrics.url, "http://h:1/m");
  EXPECT_EQ(e.metrics.interval, milliseconds{3000});
  EXPECT_EQ(e.metrics.tier, cache_tier::kv);
  EXPECT_EQ(e.metrics.cache_size_bytes, 4096);
  EXPECT_EQ(e.metrics.max_concurrency, 8);
  EXPECT_EQ(e.metrics.model_label, "primary");
  EXPECT_EQ(e.topic, "");
  EXPECT_EQ(e.endpoint, "tcp://h:1");
  EXPECT_EQ(e.replay_endpoint, "tcp://h:2");
  EXPECT_EQ(e.dp_size, 2);
  EXPECT_EQ(e.dp_mode, dp_mode::merged);
  EXPECT_EQ(e.unknown_parent, unknown_parent::root);
  EXPECT_EQ(c.server.address, "s:2");
  EXPECT_EQ(c.admin.listen, "");
  EXPECT_EQ(c.log.format, log_format::text);
  EXPECT_EQ(c.log.level, log_level::warn);
}

TEST(ApplyFlags, FlagBeatsFileBeatsDefault) {
  daemon_config c = load(std::string(minimal) + "window = \"50ms\"\ntopic = \"file-topic\"\n");
  ASSERT_EQ(err(apply_flags(c, flags({"--window=7ms"}))), "");
  EXPECT_EQ(c.engines[0].window, milliseconds{7});              // flag
  EXPECT_EQ(c.engines[0].topic, "file-topic");                  // file
  EXPECT_EQ(c.engines[0].endpoint, engine_settings{}.endpoint);  // default
  EXPECT_EQ(c.origin.at("engine[0].window"), "--window");
  EXPECT_EQ(c.origin.at("engine[0].topic"), "t.toml:5:9");
}

TEST(ApplyFlags, FlagFixesABadFileValueAndErrorsNameTheFlag) {
  daemon_config c = load(std::string(minimal) + "endpoint = \"bad\"\n");
  ASSERT_EQ(err(apply_flags(c, flags({"--engine-endpoint=tcp://h:9"}))), "");
  EXPECT_EQ(err(validate(c)), "");
  c = load(minimal);
  ASSERT_EQ(err(apply_flags(c, flags({"--engine-endpoint=tcp://h"}))), "");
  EXPECT_EQ(err(validate(c)),
            "--engine-endpoint: engine[0].endpoint: invalid endpoint \"tcp://h\": expected "
            "host:port (allowed: tcp://host:port, ipc://path, inproc://name)");
}

TEST(ApplyFlags, EngineFlagsNeedAtMostOneEngine) {
  daemon_config c = load(std::string(minimal) +
                         "[[engine]]\nreplica_id = \"r1\"\nmodel_id = \"m\"\n"
                         "endpoint = \"tcp://h:1\"\n");
  EXPECT_EQ(err(apply_flags(c, flags({"--server=s:1", "--window=1s"}))),
            "--window: engine flags describe a single engine, but the configuration has 2 "
            "[[engine]] tables; set the value in the file instead");
  // Non-engine flags are fine with many engines.
  EXPECT_EQ(err(apply_flags(c, flags({"--server=s:1", "--log-level=debug"}))), "");
  EXPECT_EQ(c.server.address, "s:1");
}

TEST(ApplyFlags, FileWithoutEnginesGetsOneFromFlags) {
  daemon_config c = load("[server]\naddress = \"s:1\"\n");
  auto f = flags({"--config=x.toml", "--replica-id=r", "--model-id=m"});
  ASSERT_EQ(err(apply_flags(c, f)), "");
  ASSERT_EQ(c.engines.size(), 1u);
  EXPECT_EQ(err(validate(c)), "");
  // ...but a file alone without engines is an error, not a silent default engine.
  c = load("[server]\naddress = \"s:1\"\n");
  ASSERT_EQ(err(apply_flags(c, flags({"--config=x.toml"}))), "");
  EXPECT_EQ(err(validate(c)),
            "t.toml: engine: no engine configured: add an [[engine]] table, or pass --engine-url "
            "and --replica-id (an engine that says where its events are), or --engine-endpoint, "
            "--replica-id and --model-id (the Go sidecar's flags)");
}

TEST(ApplyFlags, LoraFlagReplacesTheFileMap) {
  daemon_config c = load(std::string(minimal) + "[engine.adapters]\n1 = \"a\"\n2 = \"b\"\n");
  ASSERT_EQ(err(apply_flags(c, flags({"--lora-adapter-names=3=c"}))), "");
  EXPECT_EQ(c.engines[0].adapters, (std::map<int64_t, std::string>{{3, "c"}}));
}

// C01-C03 in the reference's order.
TEST(ApplyFlags, ReferenceErrorOrder) {
  auto run = [](std::vector<std::string> args) {
    daemon_config c;
    auto s = apply_flags(c, flags(std::move(args)));
    if (!s) return err(s);
    return err(validate(c));
  };
  // C01 first, even with everything else wrong too.
  EXPECT_EQ(run({"--lora-adapter-names=sql-lora", "--cache-tier=AUTO"}),
            "invalid --lora-adapter-names: entry \"sql-lora\" is not id=name");
  // C02 before C03.
  EXPECT_EQ(run({"--cache-tier=xpu", "--model-id=m"}),
            "engine[0].replica_id: invalid config: must not be empty (set replica_id in "
            "[[engine]] or --replica-id)");
  EXPECT_EQ(run({"--replica-id=r", "--model-id=m", "--hash-scheme="}),
            "--hash-scheme: engine[0].hash_scheme: invalid config: must not be empty (set "
            "hash_scheme in [[engine]] or --hash-scheme)");
  // C03 with the valid list.
  EXPECT_EQ(run({"--replica-id=r", "--model-id=m", "--cache-tier=AUTO"}),
            "invalid --cache-tier \"AUTO\" (allowed: auto, kv, gpu, cpu)");
  EXPECT_EQ(run({"--replica-id=r", "--model-id=m", "--cache-tier=cpu"}), "");
  // No flags at all: the reference's "invalid config" (replica id required).
  EXPECT_EQ(run({}), "engine[0].replica_id: invalid config: must not be empty (set replica_id in "
                     "[[engine]] or --replica-id)");
}

// -- A02 / A03 -----------------------------------------------------------------------------------

TEST(ParseAdapterNames, ReferenceCases) {
  std::map<int64_t, std::string> m;
  ASSERT_EQ(err(parse_adapter_names(" 1=sql-lora, 2 = chat-lora ,", m)), "");
  EXPECT_EQ(m, (std::map<int64_t, std::string>{{1, "sql-lora"}, {2, "chat-lora"}}));
  ASSERT_EQ(err(parse_adapter_names("", m)), "");
  EXPECT_TRUE(m.empty());
  std::map<int64_t, std::string> keep{{9, "x"}};
  EXPECT_EQ(err(parse_adapter_names("sql-lora", keep)), "entry \"sql-lora\" is not id=name");
  EXPECT_EQ(err(parse_adapter_names("x=sql-lora", keep)),
            "entry \"x=sql-lora\": id \"x\" is not an integer");
  EXPECT_EQ(err(parse_adapter_names("1=", keep)), "entry \"1=\": empty adapter name");
  EXPECT_EQ(err(parse_adapter_names("1=a,1=b", keep)), "duplicate adapter id 1");
  EXPECT_EQ(keep, (std::map<int64_t, std::string>{{9, "x"}})) << "output untouched on error";
}

TEST(ParseAdapterNames, SplitAtFirstEqualsSignedIdsSharedNames) {  // A03
  std::map<int64_t, std::string> m;
  ASSERT_EQ(err(parse_adapter_names("1=a=b,-3=neg,+4=a, ,5=a", m)), "");
  EXPECT_EQ(m, (std::map<int64_t, std::string>{{1, "a=b"}, {-3, "neg"}, {4, "a"}, {5, "a"}}));
  EXPECT_FALSE(parse_adapter_names("0x1=a", m));
  EXPECT_FALSE(parse_adapter_names("1_0=a", m));
  EXPECT_FALSE(parse_adapter_names("9223372036854775808=a", m));
  EXPECT_TRUE(parse_adapter_names("-9223372036854775808=a", m));
  EXPECT_EQ(m.begin()->first, INT64_MIN);
}

// -- effective configuration, --check ------------------------------------------------------------

TEST(ToToml, RoundTripsEveryKey) {
  daemon_config c = load(full);
  const std::string text = to_toml(c);
  daemon_config again = load(text);
  EXPECT_EQ(to_toml(again), text);
  EXPECT_TRUE(diff_for_reload(c, again).empty());
  EXPECT_NE(text.find("window = \"7ms\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("-2 = \"neg\"\n"), std::string::npos) << text;
}

TEST(ToToml, PrintsDefaultsAndEscapes) {
  daemon_config c = load(std::string(minimal) + "tenant_id = \"a\\\"b\\\\c\\u0001\"\n");
  const std::string text = to_toml(c);
  EXPECT_NE(text.find("address = \"127.0.0.1:9090\"\n"), std::string::npos);
  EXPECT_NE(text.find("refresh_interval = \"10m\"\n"), std::string::npos);
  EXPECT_NE(text.find("interval = \"10s\"\n"), std::string::npos);
  EXPECT_NE(text.find("tenant_id = \"a\\\"b\\\\c\\u0001\"\n"), std::string::npos) << text;
  EXPECT_EQ(load(text).engines[0].tenant_id, "a\"b\\c\x01");
}

TEST(RunCheck, ValidPrintsEffectiveConfigAndReturns0) {
  std::ostringstream out, err;
  EXPECT_EQ(run_check(flags({"--check", "--replica-id=r", "--model-id=m", "--window=0"}), out,
                      err),
            0);
  EXPECT_NE(out.str().find("replica_id = \"r\""), std::string::npos);
  EXPECT_NE(out.str().find("window = \"100ms\""), std::string::npos);
  EXPECT_EQ(err.str(), "note: engine[0].window = 0s is not positive; using 100ms\n");
}

TEST(RunCheck, InvalidPrintsOneLineAndReturns2) {
  std::ostringstream out, err;
  EXPECT_EQ(run_check(flags({"--check", "--config=/nonexistent.toml"}), out, err), 2);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(), "/nonexistent.toml: cannot open config file: No such file or directory\n");
}

TEST(CheckFiles, NamesTheUnreadableFile) {
  daemon_config c = load(std::string("[server]\ntls = true\nca_file = \"/nonexistent/ca.pem\"\n") +
                         minimal);
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(err(read_files(c)), "t.toml:3:11: server.ca_file: cannot open "
                                    "\"/nonexistent/ca.pem\": No such file or directory");
  c = load(minimal);
  EXPECT_EQ(err(read_files(c)), "");
}

// -- reload --------------------------------------------------------------------------------------

TEST(DiffForReload, AdaptersAndLogLevelAreHot) {
  daemon_config a = load(std::string(minimal) + "[engine.adapters]\n1 = \"a\"\n");
  daemon_config b = load(std::string("[log]\nlevel = \"debug\"\n") + minimal +
                         "[engine.adapters]\n1 = \"a\"\n2 = \"b\"\n");
  auto d = diff_for_reload(a, b);
  EXPECT_TRUE(d.log_level_changed);
  EXPECT_EQ(d.adapters_changed, (std::vector<std::string>{"r0"}));
  EXPECT_FALSE(d.needs_restart()) << d.restart_required.front();
  EXPECT_TRUE(diff_for_reload(a, a).empty());
}

TEST(DiffForReload, OtherChangesNeedARestart) {
  daemon_config a = load(full);
  daemon_config b = load(full);
  b.server.address = "other:1";
  b.log.format = log_format::json;
  b.engines[0].window = milliseconds{8};
  b.engines[0].metrics.url = "http://x/";
  auto d = diff_for_reload(a, b);
  EXPECT_FALSE(d.log_level_changed);
  EXPECT_TRUE(d.adapters_changed.empty());
  EXPECT_EQ(d.restart_required,
            (std::vector<std::string>{"log.format", "server.address",
                                      "engine.\"vllm-0\".metrics.url", "engine.\"vllm-0\".window"}));
}

TEST(DiffForReload, EnginesMatchedByReplicaIdNotPosition) {
  const std::string e1 = "[[engine]]\nreplica_id = \"a\"\nmodel_id = \"m\"\n"
                         "endpoint = \"tcp://h:1\"\n";
  const std::string e2 = "[[engine]]\nreplica_id = \"b\"\nmodel_id = \"m\"\n"
                         "endpoint = \"tcp://h:2\"\n";
  const std::string e3 = "[[engine]]\nreplica_id = \"c\"\nmodel_id = \"m\"\n"
                         "endpoint = \"tcp://h:3\"\n";
  EXPECT_TRUE(diff_for_reload(load(e1 + e2), load(e2 + e1)).empty());
  auto d = diff_for_reload(load(e1 + e2), load(e2 + e3));
  EXPECT_EQ(d.restart_required, (std::vector<std::string>{"engine.\"a\"", "engine.\"c\""}));
}

// -- pipelines -----------------------------------------------------------------------------------

TEST(Pipelines, DataParallelExpansion) {
  daemon_config c = load(std::string(minimal) +
                         "dp_size = 2\nreplay_endpoint = \"tcp://127.0.0.1:5567\"\n");
  ASSERT_EQ(err(validate(c)), "");
  auto p = pipelines(c);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].replica_id, "r0-dp0");
  EXPECT_EQ(p[1].replica_id, "r0-dp1");
  EXPECT_EQ(p[0].endpoint, "tcp://127.0.0.1:5557");
  EXPECT_EQ(p[1].endpoint, "tcp://127.0.0.1:5558");
  EXPECT_EQ(p[1].replay_endpoint, "tcp://127.0.0.1:5568");
  EXPECT_EQ(p[1].dp_rank, 1);
  EXPECT_NE(to_toml(c).find("# rank 1: replica \"r0-dp1\", endpoint tcp://127.0.0.1:5558, replay "
                            "tcp://127.0.0.1:5568\n"),
            std::string::npos)
      << to_toml(c);
  c.engines[0].dp_mode = dp_mode::merged;
  p = pipelines(c);
  EXPECT_EQ(p[0].replica_id, "r0");
  EXPECT_EQ(p[1].replica_id, "r0");
  c.engines[0].dp_size = 1;
  p = pipelines(c);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].replica_id, "r0");
}

// -- the shipped examples ------------------------------------------------------------------------

TEST(Examples, EveryExampleValidates) {
  namespace fs = std::filesystem;
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(KVRELAY_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".toml") continue;
    ++n;
    auto r = load_toml(entry.path().string());
    ASSERT_TRUE(r.ok()) << err(r);
    EXPECT_EQ(err(validate(r.value())), "") << entry.path();
    // What --check prints reads back to the same configuration.
    auto again = parse_toml(to_toml(r.value()), "printed");
    ASSERT_TRUE(again.ok()) << err(again);
    EXPECT_TRUE(diff_for_reload(r.value(), again.value()).empty()) << entry.path();
  }
  EXPECT_GE(n, 9u);
}

TEST(Examples, DescribeWhatTheirNamesSay) {
  auto get = [](const char* name) {
    auto r = load_toml(std::string(KVRELAY_EXAMPLES_DIR) + "/" + name);
    EXPECT_TRUE(r.ok()) << name << ": " << (r ? "" : err(r));
    return r ? r.value() : daemon_config{};
  };
  EXPECT_EQ(get("node-4-engines.toml").engines.size(), 4u);
  EXPECT_EQ(get("dp2-separate.toml").engines.at(0).dp_mode, dp_mode::separate);
  EXPECT_EQ(get("dp2-merged.toml").engines.at(0).dp_mode, dp_mode::merged);
  EXPECT_EQ(get("sglang-sidecar.toml").engines.at(0).hash_scheme, "sglang");
  EXPECT_EQ(get("lora-fleet.toml").engines.at(0).adapters.size(), 3u);
  EXPECT_TRUE(get("lmcache-l2.toml").engines.at(0).l2_tier);
  EXPECT_TRUE(get("tls.toml").server.tls);
  EXPECT_EQ(get("ha-policy-plane.toml").server.targets.size(), 3u);
  EXPECT_EQ(get("durable-sidecar.toml").state.dir, "/var/tmp/kvrelay");
  EXPECT_EQ(get("vllm-sidecar.toml").engines.at(0).metrics.cache_size_bytes, int64_t{40} << 30);
  const auto zero = get("zero-config-sidecar.toml").engines.at(0);
  EXPECT_EQ(zero.url, "http://127.0.0.1:8000");
  EXPECT_TRUE(discovered(zero, "endpoint"));
  EXPECT_TRUE(discovered(zero, "model_id"));
}

}  // namespace
}  // namespace kvrelay::config

namespace kvrelay::config {
namespace {

// docs/configuration.md documents every key and every flag: derived from the same tables.
TEST(Docs, EveryKeyAndFlagIsDocumented) {
  std::ifstream in(KVRELAY_DOCS_FILE);
  ASSERT_TRUE(in) << KVRELAY_DOCS_FILE;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  daemon_config c;
  c.engines.emplace_back();
  std::istringstream printed(to_toml(c));
  std::string line;
  size_t keys = 0;
  while (std::getline(printed, line)) {
    auto eq = line.find(" = ");
    if (line.empty() || line[0] == '#' || line[0] == '[' || eq == std::string::npos) continue;
    ++keys;
    EXPECT_NE(doc.find("`" + line.substr(0, eq) + "`"), std::string::npos) << line;
  }
  EXPECT_EQ(keys, schema().size()) << "to_toml prints one line per schema row";
  for (const auto& name : flag_names())
    EXPECT_NE(doc.find("`--" + name), std::string::npos) << name;
}

}  // namespace
}  // namespace kvrelay::config

namespace kvrelay::config {
namespace {

// main logs ERROR with the reference's msg text (C01-C03) and the detail in a field.
TEST(Resolve, ErrorSummariesMatchTheReferenceLogMessages) {
  auto summary = [](std::vector<std::string> args) {
    auto r = resolve(flags(std::move(args)));
    return r ? std::string("ok") : r.error().headline;
  };
  EXPECT_EQ(summary({"--lora-adapter-names=1=", "--replica-id=r", "--model-id=m"}),
            "invalid --lora-adapter-names");
  EXPECT_EQ(summary({"--model-id=m"}), "invalid config");
  EXPECT_EQ(summary({"--replica-id=r", "--model-id=m", "--cache-tier=xpu"}),
            "invalid --cache-tier");
  EXPECT_EQ(summary({"--replica-id=r", "--model-id=m", "--engine-endpoint=x"}), "invalid config");
  EXPECT_EQ(summary({"--config=/nonexistent.toml"}), "invalid config");
  EXPECT_EQ(summary({"--replica-id=r", "--model-id=m"}), "ok");
}

}  // namespace
}  // namespace kvrelay::config
