// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Checks beyond the TOML reader: every configuration error found before anything starts (the
// admin port's loopback rule, the files a configuration names: bounded, regular files only),
// the server and admin keys, and engine discovery's settings.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <sstream>

#include "base/read_file.hpp"
#include "config/loader.hpp"
#include "config/values.hpp"
#include "tests/config/helpers.hpp"
#include "tests/support/unprivileged.hpp"

namespace kvrelay::config {
namespace {

using namespace testing_helpers;
using std::chrono::milliseconds;

// -- the new keys ----------------------------------------------------------------------------

TEST(NewKeys, Defaults) {
  const daemon_config c;
  const engine_settings e;
  EXPECT_EQ(c.server.eviction_mode, eviction_mode::auto_);
  EXPECT_EQ(effective(c.server.eviction_mode), eviction_mode::expire);
  EXPECT_EQ(effective(eviction_mode::rpc), eviction_mode::rpc);
  EXPECT_EQ(c.server.keepalive_time, milliseconds{20000});
  EXPECT_EQ(c.server.keepalive_timeout, milliseconds{10000});
  EXPECT_EQ(c.server.on_shutdown, shutdown_action::clear);
  EXPECT_EQ(c.admin.max_connections, 64);
  EXPECT_EQ(c.admin.read_timeout, milliseconds{5000});
  EXPECT_EQ(c.admin.idle_timeout, milliseconds{30000});
  EXPECT_EQ(c.admin.max_body_bytes, 65536);
  EXPECT_EQ(c.admin.token, "");
  EXPECT_EQ(e.url, "");
  EXPECT_EQ(e.discovery_retry_max, milliseconds{30000});
}

TEST(NewKeys, ReadFromTheFileAndPrinted) {
  daemon_config c = load(std::string("[server]\neviction_mode = \"rpc\"\nkeepalive_time = \"0\"\n"
                                     "keepalive_timeout = \"3s\"\non_shutdown = \"keep\"\n"
                                     "[admin]\nmax_connections = 8\nread_timeout = \"2s\"\n"
                                     "idle_timeout = \"1m\"\nmax_body_bytes = \"1KiB\"\n") +
                         minimal + "discovery_retry_max = \"5s\"\n");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.server.eviction_mode, eviction_mode::rpc);
  EXPECT_EQ(c.server.keepalive_time, milliseconds{0});
  EXPECT_EQ(c.server.keepalive_timeout, milliseconds{3000});
  EXPECT_EQ(c.server.on_shutdown, shutdown_action::keep);
  EXPECT_EQ(c.admin.max_connections, 8);
  EXPECT_EQ(c.admin.read_timeout, milliseconds{2000});
  EXPECT_EQ(c.admin.idle_timeout, milliseconds{60000});
  EXPECT_EQ(c.admin.max_body_bytes, 1024);
  EXPECT_EQ(c.engines[0].discovery_retry_max, milliseconds{5000});
  const std::string text = to_toml(c);
  for (const char* line : {"eviction_mode = \"rpc\"\n", "keepalive_time = \"0s\"\n",
                           "keepalive_timeout = \"3s\"\n", "on_shutdown = \"keep\"\n",
                           "max_connections = 8\n", "read_timeout = \"2s\"\n",
                           "idle_timeout = \"1m\"\n", "max_body_bytes = 1024\n",
                           "discovery_retry_max = \"5s\"\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  EXPECT_EQ(text.find("runs as"), std::string::npos) << "only auto needs explaining";
  EXPECT_NE(to_toml(load(minimal)).find("eviction_mode = \"auto\"\n# eviction_mode \"auto\" runs "
                                        "as \"expire\"\n"),
            std::string::npos);
}

TEST(NewKeys, BadValuesNameTheKey) {
  EXPECT_EQ(load_error("[server]\neviction_mode = \"batch\"\n"),
            "t.toml:2:17: server.eviction_mode: invalid value \"batch\" (allowed: auto, expire, "
            "rpc)");
  EXPECT_EQ(load_error("[server]\non_shutdown = \"drain\"\n"),
            "t.toml:2:15: server.on_shutdown: invalid value \"drain\" (allowed: clear, keep)");
  EXPECT_EQ(check(std::string("[server]\nkeepalive_time = \"-1s\"\n") + minimal),
            "t.toml:2:18: server.keepalive_time: must be between 0 (no keepalive pings) and 24h");
  EXPECT_EQ(check(std::string("[server]\nkeepalive_timeout = \"0\"\n") + minimal),
            "t.toml:2:21: server.keepalive_timeout: must be positive and at most 24h");
  EXPECT_EQ(check(std::string("[server]\nrpc_timeout = \"2h\"\n") + minimal),
            "t.toml:2:15: server.rpc_timeout: must be at most 1h");
  EXPECT_EQ(check(std::string("[admin]\nmax_connections = 0\n") + minimal),
            "t.toml:2:19: admin.max_connections: must be between 1 and 4096");
  EXPECT_EQ(check(std::string("[admin]\nread_timeout = \"0\"\n") + minimal),
            "t.toml:2:16: admin.read_timeout: must be positive");
  EXPECT_EQ(check(std::string("[admin]\nidle_timeout = \"-1s\"\n") + minimal),
            "t.toml:2:16: admin.idle_timeout: must be positive");
  EXPECT_EQ(check(std::string("[admin]\nmax_body_bytes = \"17MiB\"\n") + minimal),
            "t.toml:2:18: admin.max_body_bytes: must be between 0 and 16 MiB");
  EXPECT_EQ(check(std::string(minimal) + "discovery_retry_max = \"0\"\n"),
            "t.toml:4:23: engine[0].discovery_retry_max: must be positive");
  EXPECT_EQ(check(std::string(minimal) + "[engine.metrics]\ntimeout = \"0s\"\n"),
            "t.toml:5:11: engine[0].metrics.timeout: must be positive");
  EXPECT_EQ(check(std::string(minimal) + "[engine.metrics]\ntimeout = \"2h\"\n"),
            "t.toml:5:11: engine[0].metrics.timeout: must be at most 1h");
}

TEST(NewKeys, EvictionModeFlagBeatsTheFile) {
  daemon_config c = load(std::string("[server]\neviction_mode = \"expire\"\n") + minimal);
  ASSERT_EQ(err(apply_flags(c, flags({"--eviction-mode=rpc"}))), "");
  EXPECT_EQ(c.server.eviction_mode, eviction_mode::rpc);
  EXPECT_EQ(origin_of(c, "server.eviction_mode"), "--eviction-mode");
  EXPECT_EQ(origin_of(c, "server.keepalive_time"), "") << "a default has no origin";
}

// -- the admin port's loopback rule --------------------------------------------------------------

TEST(AdminLoopback, NonLoopbackListenNeedsATokenFile) {
  EXPECT_EQ(check(std::string("[admin]\nlisten = \"0.0.0.0:9464\"\n") + minimal),
            "t.toml:2:10: admin.listen: \"0.0.0.0:9464\" is not a loopback address; set "
            "admin.token_file so the port is not open to anyone");
  for (const char* open : {":9464", "127.attacker.example:9464", "[::]:9464", "10.1.2.3:0",
                           "[::ffff:10.0.0.1]:9464", "127.1:9464"})
    EXPECT_NE(check(std::string("[admin]\nlisten = \"") + open + "\"\n" + minimal), "") << open;
  for (const char* closed : {"127.0.0.1:9464", "127.0.0.2:0", "[::1]:9464",
                             "[::ffff:127.0.0.1]:9464", "localhost:9464"})
    EXPECT_EQ(check(std::string("[admin]\nlisten = \"") + closed + "\"\n" + minimal), "")
        << closed;
  // With a token file (read later, by read_files) any address is allowed; "" is no port at all.
  EXPECT_EQ(check(std::string("[admin]\nlisten = \"0.0.0.0:9464\"\ntoken_file = \"/t\"\n") +
                  minimal),
            "");
  EXPECT_EQ(check(std::string("[admin]\nlisten = \"\"\n") + minimal), "");
  // A flag is named as the place.
  daemon_config c = load(minimal);
  ASSERT_EQ(err(apply_flags(c, flags({"--admin-listen=0.0.0.0:9464"}))), "");
  EXPECT_EQ(err(validate(c)), "--admin-listen: admin.listen: \"0.0.0.0:9464\" is not a loopback "
                              "address; set admin.token_file so the port is not open to anyone");
}

// -- files: regular, bounded, and read before anything starts ------------------------------------

std::string with_token(const std::string& path) {
  return "[admin]\nlisten = \"0.0.0.0:9464\"\ntoken_file = \"" + path + "\"\n" + minimal;
}

// The configuration `text` after validate() and read_files(): the error line, "" when fine.
std::string files_error(const std::string& text, daemon_config* out = nullptr) {
  daemon_config c = load(text);
  if (auto s = validate(c); !s) return err(s);
  auto s = read_files(c);
  if (out) *out = c;
  return err(s);
}

TEST(ReadFiles, TokenIsReadTrimmedAndNeverPrinted) {
  scratch_dir d;
  daemon_config c;
  ASSERT_EQ(files_error(with_token(d.write("token", "  s3cret-token \n")), &c), "");
  EXPECT_EQ(c.admin.token, "s3cret-token");
  EXPECT_EQ(to_toml(c).find("s3cret"), std::string::npos) << to_toml(c);
}

TEST(ReadFiles, TokenFileErrorsNameTheFileAndKey) {
  scratch_dir d;
  const auto at = [](const std::string& path, const std::string& why) {
    return "t.toml:3:14: admin.token_file: \"" + path + "\"" + why;
  };
  const std::string empty = d.write("empty", "");
  EXPECT_EQ(files_error(with_token(empty)), at(empty, " is empty (it must hold the bearer token)"));
  const std::string blank = d.write("blank", " \n\t\n");
  EXPECT_EQ(files_error(with_token(blank)), at(blank, " is empty (it must hold the bearer token)"));
  const std::string two = d.write("two", "first\nsecond\n");
  EXPECT_EQ(files_error(with_token(two)),
            at(two, " must hold the token on one line (no control characters)"));
  const std::string big = d.write("big", std::string(5000, 'x'));
  EXPECT_EQ(files_error(with_token(big)), at(big, " larger than 4 KiB"));
  const std::string dir = d.dir("dir");
  EXPECT_EQ(files_error(with_token(dir)), at(dir, " is a directory, not a regular file"));
  // Neither may block or read without bound.
  const std::string fifo = d.fifo("fifo");
  EXPECT_EQ(files_error(with_token(fifo)), at(fifo, " is a FIFO, not a regular file"));
  EXPECT_EQ(files_error(with_token("/dev/zero")),
            at("/dev/zero", " is a character device, not a regular file"));
  EXPECT_EQ(files_error(with_token(d.file("missing"))),
            "t.toml:3:14: admin.token_file: cannot open \"" + d.file("missing") +
                "\": No such file or directory");
}

// The durable index's directory: --check says what is wrong with it, path and reason, and
// creates nothing (the start does).
TEST(ReadFiles, AnUnwritableStateDirIsAnErrorWithPathAndReason) {
  scratch_dir d;
  const auto state = [](const std::string& dir) { return "[state]\ndir = \"" + dir + "\"\n" + minimal; };
  EXPECT_EQ(files_error(state(d.dir("ok"))), "");
  const std::string missing = d.file("later/state");
  EXPECT_EQ(files_error(state(missing)), "") << "creatable: made at start";
  EXPECT_FALSE(std::filesystem::exists(missing)) << "--check creates nothing";
  const std::string file = d.write("a-file", "x");
  EXPECT_EQ(files_error(state(file)), "t.toml:2:7: state.dir: " + file + ": not a directory");
  EXPECT_EQ(files_error(state(file + "/sub")),
            "t.toml:2:7: state.dir: " + file + "/sub: does not exist, and " + file +
                " is not a directory")
      << "under a file: nobody, root included, can make it";
  // A directory its owner may not write: as the image's user (root writes anywhere).
  const std::string ro = d.dir("ro");
  ASSERT_EQ(::chmod(ro.c_str(), 0500), 0);
  ASSERT_TRUE(kvrelay::testing::give_to_unprivileged(d.file("")));
  ASSERT_TRUE(kvrelay::testing::give_to_unprivileged(ro));
  const std::string base = d.file("");
  KVRELAY_EXPECT_UNPRIVILEGED(
      [&]() -> std::string {
        std::string got = files_error(state(ro));
        std::string want =
            "t.toml:2:7: state.dir: " + ro + ": cannot create files in it: Permission denied";
        if (got != want) return "got '" + got + "', want '" + want + "'";
        got = files_error(state(ro + "/sub"));
        want = "t.toml:2:7: state.dir: " + ro + "/sub: does not exist, and " + ro +
               " is not writable: Permission denied";
        if (got != want) return "got '" + got + "', want '" + want + "'";
        return "";
      },
      [base] {
        std::error_code ec;
        std::filesystem::remove_all(base, ec);
      });
  ::chmod(ro.c_str(), 0700);
}

TEST(ReadFiles, TlsFilesMustBeRegularPem) {
  scratch_dir d;
  const auto tls = [](const std::string& ca) {
    return "[server]\ntls = true\nca_file = \"" + ca + "\"\n" + minimal;
  };
  EXPECT_EQ(files_error(tls(d.write("ca.pem", "-----BEGIN CERTIFICATE-----\n"))), "");
  const std::string not_pem = d.write("ca.txt", "hello\n");
  EXPECT_EQ(files_error(tls(not_pem)), "t.toml:3:11: server.ca_file: \"" + not_pem +
                                           "\" is not a PEM file (no -----BEGIN line)");
  const std::string fifo = d.fifo("ca.fifo");
  EXPECT_EQ(files_error(tls(fifo)),
            "t.toml:3:11: server.ca_file: \"" + fifo + "\" is a FIFO, not a regular file");
  EXPECT_EQ(files_error(tls("/dev/zero")),
            "t.toml:3:11: server.ca_file: \"/dev/zero\" is a character device, not a regular file");
}

TEST(LoadTomlFile, RefusesWhatIsNotARegularFile) {
  scratch_dir d;
  const std::string fifo = d.fifo("kvrelay.toml");
  EXPECT_EQ(err(load_toml(fifo)), fifo + ": config file is a FIFO, not a regular file");
  const std::string dir = d.dir("conf.d");
  EXPECT_EQ(err(load_toml(dir)), dir + ": config file is a directory, not a regular file");
  EXPECT_EQ(err(load_toml("/dev/zero")),
            "/dev/zero: config file is a character device, not a regular file");
}

TEST(ReadRegularFile, BoundIsExactAndSubjectNamed) {
  scratch_dir d;
  const std::string f = d.write("f", std::string(100, 'a'));
  auto r = read_regular_file(f, 100, "the file");
  ASSERT_TRUE(r.ok()) << r.error().context;
  EXPECT_EQ(r.value().size(), 100u);
  r = read_regular_file(f, 99, "the file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ec::invalid_config);
  EXPECT_EQ(r.error().context, "the file larger than 99 bytes");
  EXPECT_EQ(describe_bytes(1 << 20), "1 MiB");
  EXPECT_EQ(describe_bytes(4096), "4 KiB");
  EXPECT_EQ(describe_bytes(1000), "1000 bytes");
}

// resolve() is what the daemon and --check run: one sequence, the same refusals, exit 2.
TEST(Resolve, FileErrorsComeBeforeAnythingStarts) {
  scratch_dir d;
  const std::string dir = d.dir("tokens");
  const std::string path = d.write("kvrelay.toml", with_token(dir));
  auto r = resolve(flags({"--config=" + path}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().headline, "invalid config");
  EXPECT_EQ(r.error().context, path + ":3:14: admin.token_file: \"" + dir +
                                   "\" is a directory, not a regular file");
  std::ostringstream out, errs;
  EXPECT_EQ(run_check(flags({"--check", "--config=" + path}), out, errs), 2);
  EXPECT_EQ(errs.str(), r.error().context + "\n");
  EXPECT_EQ(out.str(), "");
  // A good token: resolve carries it in the configuration.
  const std::string good = d.write("good.toml", with_token(d.write("token", "t0k\n")));
  auto ok = resolve(flags({"--config=" + good}));
  ASSERT_TRUE(ok.ok()) << ok.error().context;
  EXPECT_EQ(ok.value().admin.token, "t0k");
}

TEST(ReadTokenFile, ForCodeThatSkippedResolve) {
  scratch_dir d;
  auto t = read_token_file(d.write("t", "abc\r\n"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value(), "abc");
  EXPECT_FALSE(read_token_file("/dev/zero").ok());
}

// -- engine discovery: carried and validated, learnt at start ------------------------

const char* const url_only = "[[engine]]\nreplica_id = \"r0\"\nurl = \"http://127.0.0.1:8000\"\n";

TEST(DiscoveryConfig, UrlAndReplicaIdAreEnough) {
  daemon_config c = load(url_only);
  ASSERT_EQ(err(validate(c)), "");
  const auto& e = c.engines[0];
  EXPECT_EQ(e.url, "http://127.0.0.1:8000");
  for (const char* key :
       {"endpoint", "replay_endpoint", "topic", "dp_size", "model_id", "hash_scheme"})
    EXPECT_TRUE(discovered(e, key)) << key;
  EXPECT_FALSE(discovered(e, "window"));
  // The engine's own server serves its metrics, unless a metrics URL is given.
  EXPECT_EQ(e.metrics.url, "http://127.0.0.1:8000/metrics");
  EXPECT_EQ(origin_of(c, "engine[0].metrics.url"), "t.toml:3:7");
}

TEST(DiscoveryConfig, CheckShowsWhatWillBeLearntAndReadsBackTheSame) {
  daemon_config c = load(url_only);
  ASSERT_EQ(err(validate(c)), "");
  const std::string text = to_toml(c);
  for (const char* line :
       {"# endpoint = (discovered at start)\n", "# model_id = (discovered at start)\n",
        "# dp_size = (discovered at start)\n", "# hash_scheme = (discovered at start)\n",
        "url = \"http://127.0.0.1:8000\"\n", "url = \"http://127.0.0.1:8000/metrics\"\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  EXPECT_EQ(text.find("endpoint = \"tcp://"), std::string::npos) << text;
  daemon_config again = load(text);
  ASSERT_EQ(err(validate(again)), "");
  EXPECT_TRUE(discovered(again.engines[0], "endpoint"));
  EXPECT_EQ(to_toml(again), text);
  EXPECT_TRUE(diff_for_reload(c, again).empty());
}

TEST(DiscoveryConfig, GivenSettingsWinAndAreRecorded) {
  daemon_config c = load(std::string(url_only) + "endpoint = \"tcp://10.0.0.1:5557\"\n"
                                                 "model_id = \"llama\"\n[engine.metrics]\n"
                                                 "url = \"\"\n");
  ASSERT_EQ(err(validate(c)), "");
  const auto& e = c.engines[0];
  EXPECT_TRUE(e.given.endpoint);
  EXPECT_TRUE(e.given.model_id);
  EXPECT_TRUE(e.given.metrics_url);
  EXPECT_FALSE(e.given.topic);
  EXPECT_FALSE(discovered(e, "endpoint"));
  EXPECT_TRUE(discovered(e, "topic"));
  EXPECT_EQ(e.metrics.url, "") << "a given metrics URL, even \"\", wins";
  EXPECT_EQ(origin_of(c, "engine[0].endpoint"), "t.toml:4:12");
  EXPECT_NE(to_toml(c).find("endpoint = \"tcp://10.0.0.1:5557\"\n"), std::string::npos);
  // From endpoint discovered to endpoint given is a change that needs a restart.
  auto d = diff_for_reload(load(url_only), c);
  EXPECT_NE(std::find(d.restart_required.begin(), d.restart_required.end(),
                      "engine.\"r0\".endpoint"),
            d.restart_required.end());
}

TEST(DiscoveryConfig, ZeroConfigSidecarFromFlags) {
  daemon_config c;
  ASSERT_EQ(err(apply_flags(c, flags({"--engine-url=http://127.0.0.1:8000", "--server=policy:9090",
                                      "--replica-id=pod-0"}))),
            "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.engines[0].url, "http://127.0.0.1:8000");
  EXPECT_EQ(origin_of(c, "engine[0].url"), "--engine-url");
  // Explicit flags beat what the engine would say.
  c = daemon_config{};
  ASSERT_EQ(err(apply_flags(c, flags({"--engine-url=http://h:8000", "--replica-id=r",
                                      "--engine-endpoint=tcp://h:6000", "--hash-scheme=sglang"}))),
            "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_FALSE(discovered(c.engines[0], "endpoint"));
  EXPECT_FALSE(discovered(c.engines[0], "hash_scheme"));
  EXPECT_TRUE(discovered(c.engines[0], "model_id"));
  // A given but empty identity is still an error.
  c = daemon_config{};
  ASSERT_EQ(err(apply_flags(c, flags({"--engine-url=http://h:8000", "--replica-id=r",
                                      "--model-id="}))),
            "");
  EXPECT_EQ(err(validate(c)), "--model-id: engine[0].model_id: invalid config: must not be empty "
                              "(set model_id in [[engine]] or --model-id)");
  // Without a URL nothing is discovered, and the identity is required as before.
  c = daemon_config{};
  ASSERT_EQ(err(apply_flags(c, flags({"--replica-id=r"}))), "");
  EXPECT_EQ(err(validate(c)), "engine[0].model_id: invalid config: must not be empty (set "
                              "model_id in [[engine]] or --model-id)");
}

TEST(DiscoveryConfig, NodeModeEnginesGiveJustUrlAndReplicaId) {
  const std::string node = "[[engine]]\nreplica_id = \"a\"\nurl = \"http://127.0.0.1:8000\"\n"
                           "[[engine]]\nreplica_id = \"b\"\nurl = \"http://127.0.0.1:8001/\"\n"
                           "[[engine]]\nreplica_id = \"c\"\nurl = \"http://[::1]:8002\"\n";
  // The placeholder endpoints are the same default: not a duplicate subscription.
  EXPECT_EQ(check(node), "");
  EXPECT_EQ(load(node).engines.size(), 3u);
  EXPECT_EQ(check(node + "[[engine]]\nreplica_id = \"d\"\nurl = \"http://127.0.0.1:8001\"\n"),
            "t.toml:12:7: engine[3].url: engine URL \"http://127.0.0.1:8001\" is already used by "
            "engine[1]");
  EXPECT_EQ(check(node + "[[engine]]\nreplica_id = \"a\"\nurl = \"http://127.0.0.1:9000\"\n"),
            "t.toml:11:14: engine[3].replica_id: duplicate replica id \"a\" (also used by "
            "engine[0])");
}

TEST(DiscoveryConfig, BadUrls) {
  EXPECT_EQ(check("[[engine]]\nreplica_id = \"r\"\nurl = \"127.0.0.1:8000\"\n"),
            "t.toml:3:7: engine[0].url: invalid URL \"127.0.0.1:8000\": scheme must be http or "
            "https (allowed: http://host[:port]/path, https://host[:port]/path)");
  EXPECT_EQ(check("[[engine]]\nreplica_id = \"r\"\nurl = \"http://h:8000/?x=1\"\n"),
            "t.toml:3:7: engine[0].url: invalid URL \"http://h:8000/?x=1\": the engine URL is a "
            "base (no query or fragment)");
  EXPECT_EQ(load_error("[[engine]]\nreplica_id = \"r\"\nurl = 8000\n"),
            "t.toml:3:7: engine[0].url: expected a string, got integer");
}

TEST(DiscoveryConfig, RanksAreNotListedBeforeTheEngineNamesThem) {
  daemon_config c = load(std::string(url_only) + "dp_size = 2\n");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(to_toml(c).find("# rank "), std::string::npos) << to_toml(c);
}

// -- several policy servers --------------------------------------------------------

TEST(TargetsConfig, DefaultsAndFileValues) {
  const server_settings d;
  EXPECT_TRUE(d.targets.empty());
  EXPECT_EQ(d.readiness, readiness_policy::any);
  EXPECT_EQ(d.max_target_lag, int64_t{16} << 20);
  EXPECT_EQ(d.resolve_interval, milliseconds{30000});
  EXPECT_EQ(policy_targets(d), std::vector<std::string>{"127.0.0.1:9090"});
  daemon_config c = load(std::string("[server]\ntargets = [\"a:9090\", \"dns:///p.ns.svc:9090\"]\n"
                                     "readiness = \"quorum\"\nmax_target_lag = \"1MiB\"\n"
                                     "resolve_interval = \"5s\"\n") +
                         minimal);
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(policy_targets(c.server),
            (std::vector<std::string>{"a:9090", "dns:///p.ns.svc:9090"}));
  EXPECT_EQ(c.server.readiness, readiness_policy::quorum);
  EXPECT_EQ(c.server.max_target_lag, int64_t{1} << 20);
  EXPECT_EQ(c.server.resolve_interval, milliseconds{5000});
  const std::string text = to_toml(c);
  for (const char* line : {"# address = (unused: the servers are the targets)\n",
                           "targets = [\"a:9090\", \"dns:///p.ns.svc:9090\"]\n",
                           "readiness = \"quorum\"\n", "max_target_lag = 1048576\n",
                           "resolve_interval = \"5s\"\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  // What --check prints loads back to the same targets.
  daemon_config again = load(text);
  EXPECT_EQ(again.server.targets, c.server.targets);
  EXPECT_EQ(to_toml(load(minimal)).find("unused:"), std::string::npos);
  EXPECT_NE(to_toml(load(minimal)).find("targets = []\n"), std::string::npos);
}

TEST(TargetsConfig, AddressAndTargetsTogetherIsAnError) {
  EXPECT_EQ(load_error("[server]\naddress = \"a:1\"\ntargets = [\"b:1\", \"c:1\"]\n"),
            "t.toml:3:11: server.targets: cannot be used with server.address (t.toml:2:11); "
            "list every server in targets");
  EXPECT_EQ(load_error("[server]\ntargets = [\"b:1\"]\naddress = \"a:1\"\n"),
            "t.toml:2:11: server.targets: cannot be used with server.address (t.toml:3:11); "
            "list every server in targets");
}

TEST(TargetsConfig, BadEntriesNameTheKeyAndTheEntry) {
  const std::string m = minimal;
  EXPECT_EQ(check("[server]\ntargets = [\"a:1\", \"b:1\", \"a:1\"]\n" + m),
            "t.toml:2:11: server.targets: duplicate target \"a:1\" (entries 1 and 3)");
  EXPECT_EQ(check("[server]\ntargets = [\"a:1\", \"dns:///p\"]\n" + m),
            "t.toml:2:11: server.targets: entry 2: invalid server target \"dns:///p\": port "
            "required (name:port) (a dns: target is dns:///name:port, or "
            "dns://NS_IP[:NS_PORT]/name:port to ask that DNS server)");
  EXPECT_EQ(check("[server]\ntargets = [\"a\"]\n" + m),
            "t.toml:2:11: server.targets: entry 1: invalid server address \"a\" (expected "
            "host:port or dns:///host:port)");
  // Empty is none: `address` is the one server (what --check prints for it).
  EXPECT_EQ(check("[server]\naddress = \"a:1\"\ntargets = []\n" + m), "");
  EXPECT_EQ(load_error("[server]\ntargets = \"a:1\"\n"),
            "t.toml:2:11: server.targets: expected an array of strings, got string");
  EXPECT_EQ(load_error("[server]\ntargets = [\"a:1\", 2]\n"),
            "t.toml:2:11: server.targets: entry 2: expected a string, got integer");
  std::string many = "[server]\ntargets = [";
  for (int i = 0; i < 65; ++i) many += (i ? ", \"h" : "\"h") + std::to_string(i) + ":1\"";
  EXPECT_EQ(load_error(many + "]\n"), "t.toml:2:11: server.targets: too many entries (at most 64)");
  EXPECT_EQ(load_error("[server]\nreadiness = \"most\"\n"),
            "t.toml:2:13: server.readiness: invalid value \"most\" (allowed: any, all, quorum)");
  EXPECT_EQ(check("[server]\nmax_target_lag = 0\n" + m),
            "t.toml:2:18: server.max_target_lag: must be positive (the bytes a target may fall "
            "behind)");
  EXPECT_EQ(check("[server]\nresolve_interval = \"100ms\"\n" + m),
            "t.toml:2:20: server.resolve_interval: must be between 1s and 24h");
  EXPECT_EQ(check("[server]\naddress = \"dns:///p\"\n" + m).find("t.toml:2:11: server.address: "
                                                                  "invalid server target"),
            0u);
}

TEST(TargetsConfig, RepeatedServerFlagAddsTargetsThatReplaceTheFiles) {
  // A bug once: --server A --server B kept B only.
  auto f = flags({"--server", "a:1", "--server=b:1", "--server", "dns:///c.ns.svc:9090"});
  EXPECT_EQ(f.servers, (std::vector<std::string>{"a:1", "b:1", "dns:///c.ns.svc:9090"}));
  daemon_config c = load(std::string("[server]\ntargets = [\"x:1\", \"y:1\"]\n") + minimal);
  ASSERT_EQ(err(apply_flags(c, f)), "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(policy_targets(c.server), f.servers);
  EXPECT_EQ(policy_targets_text(c.server), "a:1,b:1,dns:///c.ns.svc:9090");
  EXPECT_EQ(origin_of(c, "server.targets"), "--server");
  // The file's address is replaced as well, not an error against flags.
  c = load(std::string("[server]\naddress = \"x:1\"\n") + minimal);
  ASSERT_EQ(err(apply_flags(c, flags({"--server=a:1", "--server=b:1"}))), "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(policy_targets(c.server), (std::vector<std::string>{"a:1", "b:1"}));
  EXPECT_EQ(origin_of(c, "server.address"), "");
  // One --server is the address, as it always was, and replaces the file's targets.
  c = load(std::string("[server]\ntargets = [\"x:1\", \"y:1\"]\n") + minimal);
  ASSERT_EQ(err(apply_flags(c, flags({"--server=a:1"}))), "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.server.address, "a:1");
  EXPECT_EQ(policy_targets(c.server), std::vector<std::string>{"a:1"});
  // Errors name the flag.
  c = load(minimal);
  ASSERT_EQ(err(apply_flags(c, flags({"--server=a:1", "--server=a:1"}))), "");
  EXPECT_EQ(err(validate(c)),
            "--server: server.targets: duplicate target \"a:1\" (entries 1 and 2)");
}

TEST(TargetsConfig, ReadinessFlag) {
  daemon_config c = load(std::string("[server]\nreadiness = \"all\"\n") + minimal);
  ASSERT_EQ(err(apply_flags(c, flags({"--server-readiness=quorum"}))), "");
  EXPECT_EQ(c.server.readiness, readiness_policy::quorum);
  EXPECT_EQ(origin_of(c, "server.readiness"), "--server-readiness");
  auto r = parse_flags(std::vector<std::string>{"--server-readiness=most"});
  EXPECT_EQ(r.status, flag_parse_result::outcome::error);
  EXPECT_EQ(r.error,
            "invalid value \"most\" for flag --server-readiness: allowed: any, all, quorum");
}

TEST(TargetsConfig, ReloadNamesTheChangedKeys) {
  daemon_config a = load(minimal), b = load(minimal);
  b.server.targets = {"a:1", "b:1"};
  b.server.readiness = readiness_policy::all;
  const auto d = diff_for_reload(a, b);
  EXPECT_EQ(d.restart_required,
            (std::vector<std::string>{"server.readiness", "server.targets"}));
}

// The reference controller's injector passes the Go sidecar's flags only: the engine's own server
// is learnt from --engine-metrics-url (same scheme, host and port), nothing becomes required or
// unknown, and the printed configuration reads back to the same.
const std::vector<std::string> injector_args = {
    "--engine-endpoint=tcp://127.0.0.1:5557", "--server=policy:9090", "--replica-id=pod-0",
    "--tenant-id=team-a", "--model-id=llama", "--hash-scheme=vllm",
    "--engine-metrics-url=http://127.0.0.1:8000/metrics", "--ignore-block-removed=true"};

TEST(DiscoverViaMetrics, TheInjectorsFlagsLearnTheEnginesServerFromTheMetricsUrl) {
  daemon_config c;
  ASSERT_EQ(err(apply_flags(c, flags(injector_args))), "");
  ASSERT_EQ(err(validate(c)), "");
  const auto& e = c.engines[0];
  EXPECT_TRUE(e.discover_via_metrics);
  EXPECT_TRUE(e.url_derived);
  EXPECT_EQ(e.url, "http://127.0.0.1:8000");
  EXPECT_EQ(origin_of(c, "engine[0].url"), "derived from metrics.url (--engine-metrics-url)");
  EXPECT_EQ(e.metrics.url, "http://127.0.0.1:8000/metrics") << "the metrics URL stays as given";
  // Nothing waits on the engine: every setting it does not give runs as configured.
  for (const char* key :
       {"endpoint", "replay_endpoint", "topic", "dp_size", "model_id", "hash_scheme"})
    EXPECT_FALSE(discovered(e, key)) << key;
  const std::string text = to_toml(c);
  EXPECT_NE(text.find("# url = (derived from metrics.url: \"http://127.0.0.1:8000\")\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("discover_via_metrics = true\n"), std::string::npos) << text;
  daemon_config again = load(text);
  ASSERT_EQ(err(validate(again)), "");
  EXPECT_TRUE(again.engines[0].url_derived);
  EXPECT_EQ(again.engines[0].url, "http://127.0.0.1:8000");
  EXPECT_EQ(to_toml(again), text);
  EXPECT_TRUE(diff_for_reload(c, again).empty());
}

TEST(DiscoverViaMetrics, OffWithAConfigFileOrWhenSaidSoAndNoUrlFromAnOddPath) {
  // With --config: only when the file or a flag says so.
  scratch_dir dir;
  const auto file = dir.write("k.toml", std::string(minimal));
  auto r = resolve(flags({"--config", file}));
  ASSERT_TRUE(r.ok()) << err(r);
  EXPECT_FALSE(r.value().engines[0].discover_via_metrics);
  EXPECT_EQ(r.value().engines[0].url, "");
  r = resolve(flags({"--config", file, "--discover-via-metrics"}));
  ASSERT_TRUE(r.ok()) << err(r);
  EXPECT_EQ(r.value().engines[0].url, "http://127.0.0.1:8000") << "from the default metrics URL";
  // Flags alone, told not to.
  auto args = injector_args;
  args.push_back("--discover-via-metrics=false");
  daemon_config c;
  ASSERT_EQ(err(apply_flags(c, flags(args))), "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.engines[0].url, "");
  // A metrics URL that does not end in /metrics names no engine server: a note, no URL.
  c = daemon_config{};
  ASSERT_EQ(err(apply_flags(c, flags({"--replica-id=r", "--model-id=m",
                                      "--engine-metrics-url=http://h:9100/stats"}))),
            "");
  std::vector<std::string> notes;
  ASSERT_EQ(err(validate(c, &notes)), "");
  EXPECT_EQ(c.engines[0].url, "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("does not end in /metrics"), std::string::npos) << notes[0];
  // A prefix before /metrics is kept; scraping off ("") derives nothing.
  c = daemon_config{};
  ASSERT_EQ(err(apply_flags(c, flags({"--replica-id=r", "--model-id=m",
                                      "--engine-metrics-url=https://h:8443/engine/metrics"}))),
            "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.engines[0].url, "https://h:8443/engine");
  c = daemon_config{};
  ASSERT_EQ(err(apply_flags(c, flags({"--replica-id=r", "--model-id=m", "--engine-metrics-url="}))),
            "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.engines[0].url, "");
  // --engine-url is the explicit form: it wins, and nothing is derived.
  c = daemon_config{};
  ASSERT_EQ(err(apply_flags(c, flags({"--replica-id=r", "--engine-url=http://e:9000",
                                      "--engine-metrics-url=http://h:8000/metrics"}))),
            "");
  ASSERT_EQ(err(validate(c)), "");
  EXPECT_EQ(c.engines[0].url, "http://e:9000");
  EXPECT_FALSE(c.engines[0].url_derived);
}

TEST(HashScheme, CheckSaysWhatTheRunWarnsAbout) {
  daemon_config c;
  ASSERT_EQ(err(apply_flags(c, flags({"--replica-id=r", "--model-id=m", "--hash-scheme=vllm-v2",
                                      "--discover-via-metrics=false"}))),
            "");
  std::vector<std::string> notes;
  ASSERT_EQ(err(validate(c, &notes)), "") << "any tag is valid, as for the Go sidecar";
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("engine[0].hash_scheme = \"vllm-v2\" is neither"), std::string::npos)
      << notes[0];
  for (const char* known : {"vllm", "sglang"}) {
    c = daemon_config{};
    ASSERT_EQ(err(apply_flags(c, flags({"--replica-id=r", "--model-id=m",
                                        std::string("--hash-scheme=") + known}))),
              "");
    notes.clear();
    ASSERT_EQ(err(validate(c, &notes)), "");
    EXPECT_TRUE(notes.empty()) << known << ": " << (notes.empty() ? "" : notes[0]);
  }
}


}  // namespace

}  // namespace kvrelay::config
