// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Value grammars shared by the TOML loader and the flags: Go durations and ints, sizes,
// endpoints, URLs, addresses and data-parallel rank endpoints.
#include "config/values.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

namespace kvrelay::config {
namespace {

using std::chrono::milliseconds;

milliseconds dur(const char* s) {
  milliseconds d{-12345};
  EXPECT_EQ(parse_duration(s, d), "") << s;
  return d;
}

TEST(ParseDuration, AcceptsGoSyntax) {
  EXPECT_EQ(dur("100ms"), milliseconds{100});
  EXPECT_EQ(dur("10s"), milliseconds{10000});
  EXPECT_EQ(dur("1m"), milliseconds{60000});
  EXPECT_EQ(dur("1h30m"), milliseconds{5400000});
  EXPECT_EQ(dur("1.5s"), milliseconds{1500});
  EXPECT_EQ(dur(".5s"), milliseconds{500});
  EXPECT_EQ(dur("1m30s500ms"), milliseconds{90500});
  EXPECT_EQ(dur("0"), milliseconds{0});
  EXPECT_EQ(dur("-0"), milliseconds{0});
  EXPECT_EQ(dur("-1s"), milliseconds{-1000});
  EXPECT_EQ(dur("+2s"), milliseconds{2000});
  EXPECT_EQ(dur("7ms"), milliseconds{7});
  EXPECT_EQ(dur("2000000ns"), milliseconds{2});
  EXPECT_EQ(dur("1500us"), milliseconds{1});
  EXPECT_EQ(dur("1500\xC2\xB5s"), milliseconds{1});
}

TEST(ParseDuration, PositiveSubMillisecondNeverBecomesZero) {
  EXPECT_EQ(dur("500us"), milliseconds{1});
  EXPECT_EQ(dur("1ns"), milliseconds{1});
  EXPECT_EQ(dur("-500us"), milliseconds{0});
}

TEST(ParseDuration, RejectsMalformed) {
  for (const char* bad : {"", "10", "1x", "ms", "1.2.3s", "s1", "1 s", "--1s", "1s ", "-",
                          "9999999999h", "1e3s", "\xff"}) {
    milliseconds d{42};
    std::string err = parse_duration(bad, d);
    EXPECT_NE(err, "") << "'" << bad << "'";
    EXPECT_EQ(d, milliseconds{42}) << "output untouched on error: '" << bad << "'";
  }
  milliseconds d{};
  EXPECT_EQ(parse_duration("10", d), "invalid duration \"10\" (e.g. 100ms, 10s, 1m, 1h30m)");
}

// The nanosecond form the test tools' flags use: Go's own resolution, nothing rounded up.
TEST(ParseDuration, NanosecondsKeepGosResolution) {
  const auto ns = [](const char* s) {
    std::chrono::nanoseconds d{-7};
    EXPECT_EQ(parse_duration(s, d), "") << s;
    return d.count();
  };
  EXPECT_EQ(ns("1ns"), 1);
  EXPECT_EQ(ns("1.5us"), 1500);
  EXPECT_EQ(ns("250\xC2\xB5s"), 250000);
  EXPECT_EQ(ns("1h2m3s4ms5us6ns"), 3723004005006);
  EXPECT_EQ(ns("-20ms"), -20000000);
  EXPECT_EQ(ns("0"), 0);
  std::chrono::nanoseconds d{42};
  EXPECT_NE(parse_duration("1x", d), "");
  EXPECT_EQ(d.count(), 42) << "output untouched on error";
}

TEST(FormatDuration, RoundTripsThroughParse) {
  for (int64_t ms : {0LL, 1LL, 7LL, 100LL, 1000LL, 10000LL, 60000LL, 90500LL, 600000LL,
                     5400000LL, 86400001LL, -1000LL, -1LL}) {
    std::string text = format_duration(milliseconds{ms});
    EXPECT_EQ(dur(text.c_str()), milliseconds{ms}) << text;
  }
  EXPECT_EQ(format_duration(milliseconds{100}), "100ms");
  EXPECT_EQ(format_duration(milliseconds{10000}), "10s");
  EXPECT_EQ(format_duration(milliseconds{600000}), "10m");
  EXPECT_EQ(format_duration(milliseconds{0}), "0s");
}

TEST(ParseGoInt, Base0LikeStrconv) {
  auto val = [](const char* s) {
    int64_t v = -777;
    EXPECT_EQ(parse_go_int(s, v), "") << s;
    return v;
  };
  EXPECT_EQ(val("256"), 256);
  EXPECT_EQ(val("-5"), -5);
  EXPECT_EQ(val("+5"), 5);
  EXPECT_EQ(val("0x10"), 16);
  EXPECT_EQ(val("0o17"), 15);
  EXPECT_EQ(val("010"), 8);
  EXPECT_EQ(val("0b101"), 5);
  EXPECT_EQ(val("1_000"), 1000);
  EXPECT_EQ(val("0x_1F"), 31);
  EXPECT_EQ(val("0"), 0);
  EXPECT_EQ(val("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(val("-9223372036854775808"), std::numeric_limits<int64_t>::min());
  for (const char* bad : {"", "-", "abc", "1.5", "08", "1__0", "_1", "1_", "0x", "9223372036854775808",
                          "12 ", "1e3"}) {
    int64_t v = 3;
    EXPECT_NE(parse_go_int(bad, v), "") << bad;
    EXPECT_EQ(v, 3);
  }
}

TEST(ParseGoBool, StrconvSpellings) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    bool b = false;
    EXPECT_EQ(parse_go_bool(t, b), "");
    EXPECT_TRUE(b) << t;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    bool b = true;
    EXPECT_EQ(parse_go_bool(f, b), "");
    EXPECT_FALSE(b) << f;
  }
  bool b = false;
  EXPECT_EQ(parse_go_bool("yes", b), "invalid boolean \"yes\" (allowed: true, false)");
}

TEST(ParseSize, UnitsAndLimits) {
  auto val = [](const char* s) {
    int64_t v = -1;
    EXPECT_EQ(parse_size(s, v), "") << s;
    return v;
  };
  EXPECT_EQ(val("0"), 0);
  EXPECT_EQ(val("4096"), 4096);
  EXPECT_EQ(val("16GiB"), int64_t{16} << 30);
  EXPECT_EQ(val("16gib"), int64_t{16} << 30);
  EXPECT_EQ(val("1.5 GB"), 1500000000);
  EXPECT_EQ(val("2KiB"), 2048);
  EXPECT_EQ(val("3MB"), 3000000);
  EXPECT_EQ(val("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(val("10B"), 10);
  for (const char* bad : {"", "-1", "GiB", "1XB", "1 G", "99999999999TiB", "0x10"}) {
    int64_t v = 5;
    EXPECT_NE(parse_size(bad, v), "") << bad;
    EXPECT_EQ(v, 5);
  }
}

TEST(CheckEndpoint, AcceptsZmqForms) {
  for (const char* ok : {"tcp://127.0.0.1:5557", "tcp://localhost:1", "tcp://*:5557",
                         "tcp://[::1]:5557", "tcp://engine-0.ns.svc:65535", "ipc:///tmp/kv.sock",
                         "inproc://kv"}) {
    EXPECT_EQ(check_endpoint(ok), "") << ok;
  }
}

TEST(CheckEndpoint, RejectsWithReason) {
  EXPECT_EQ(check_endpoint("udp://1.2.3.4:5"),
            "invalid endpoint \"udp://1.2.3.4:5\": unsupported transport (allowed: "
            "tcp://host:port, ipc://path, inproc://name)");
  EXPECT_EQ(check_endpoint("tcp://127.0.0.1"),
            "invalid endpoint \"tcp://127.0.0.1\": expected host:port (allowed: tcp://host:port, "
            "ipc://path, inproc://name)");
  for (const char* bad : {"", "127.0.0.1:5557", "tcp://:5557", "tcp://h:0", "tcp://h:65536",
                          "tcp://h:port", "tcp://h:-1", "tcp://::1:5557", "tcp://[zz]:1",
                          "ipc://", "inproc://", "tcp://h st:1", "tcp://h:5557\n"}) {
    EXPECT_NE(check_endpoint(bad), "") << bad;
  }
}

TEST(CheckUrl, HttpAndHttpsOnly) {
  for (const char* ok : {"http://127.0.0.1:8000/metrics", "https://engine/metrics",
                         "http://[::1]:8000/metrics", "http://h", "http://h:1?x=y"}) {
    EXPECT_EQ(check_url(ok), "") << ok;
  }
  EXPECT_EQ(check_url("ftp://h/x"),
            "invalid URL \"ftp://h/x\": scheme must be http or https (allowed: "
            "http://host[:port]/path, https://host[:port]/path)");
  for (const char* bad : {"", "http://", "http:///metrics", "http://h:0/", "http://h:99999/",
                          "http://h:/x", "http://u:p@h/x", "127.0.0.1:8000/metrics",
                          "http://h /x", "http://[::1/x"}) {
    EXPECT_NE(check_url(bad), "") << bad;
  }
}

TEST(CheckAddresses, ListenAndGrpcTargets) {
  EXPECT_EQ(check_listen_address("127.0.0.1:9464"), "");
  EXPECT_EQ(check_listen_address(":9464"), "");
  EXPECT_EQ(check_listen_address("[::1]:0"), "");
  EXPECT_NE(check_listen_address("9464"), "");
  EXPECT_NE(check_listen_address("h:70000"), "");
  EXPECT_EQ(check_grpc_target("127.0.0.1:9090"), "");
  EXPECT_EQ(check_grpc_target("policy.ns.svc:9090"), "");
  EXPECT_EQ(check_grpc_target("[::1]:9090"), "");
  EXPECT_EQ(check_grpc_target("dns:///policy:9090"), "");
  EXPECT_EQ(check_grpc_target("unix:///run/policy.sock"), "");
  EXPECT_EQ(check_grpc_target("policy"), "invalid server address \"policy\" (expected host:port "
                                         "or dns:///host:port)");
  EXPECT_NE(check_grpc_target(""), "");
  EXPECT_NE(check_grpc_target("h:0"), "");
  EXPECT_NE(check_grpc_target("dns:"), "");
}

// The resolver's parser decides (base/dns_target.hpp): what the config accepts is what gets
// resolved, a nameserver without a port included (53, as gRPC).
TEST(CheckPolicyTarget, DnsNeedsANameAndAPort) {
  for (const char* ok : {"policy:9090", "[::1]:9090", "unix:///run/p.sock", "dns:///policy:9090",
                         "dns:policy.ns.svc:9090", "dns://127.0.0.1:5353/policy-headless:9090",
                         "dns://[::1]:53/p:1", "dns://10.96.0.10/policy:9090",
                         "dns:///[::1]:9090", "dns:///10.0.0.7:9090"})
    EXPECT_EQ(check_policy_target(ok), "") << ok;
  const std::string hint =
      " (a dns: target is dns:///name:port, or dns://NS_IP[:NS_PORT]/name:port to ask that DNS "
      "server)";
  const std::pair<const char*, const char*> bad[] = {
      {"dns:///policy", "port required (name:port)"},
      {"dns:///:9090", "empty name"},
      {"dns:///policy:0", "bad port \"0\""},
      {"dns://policy:9090", "no '/' after the nameserver"},
      {"dns://127.0.0.1:53/", "no name to resolve"},
      {"dns:policy", "port required (name:port)"},
      {"dns://ns.example:53/p:1", "nameserver \"ns.example\" is not an IP address"},
  };
  for (const auto& [target, why] : bad)
    EXPECT_EQ(check_policy_target(target),
              "invalid server target \"" + std::string(target) + "\": " + why + hint)
        << target;
  EXPECT_EQ(check_policy_target("policy"), check_grpc_target("policy"));
}

TEST(RankEndpoint, PortPlusRankAndInprocSuffix) {
  std::string out;
  EXPECT_EQ(rank_endpoint("tcp://127.0.0.1:5557", 0, out), "");
  EXPECT_EQ(out, "tcp://127.0.0.1:5557");
  EXPECT_EQ(rank_endpoint("tcp://127.0.0.1:5557", 3, out), "");
  EXPECT_EQ(out, "tcp://127.0.0.1:5560");
  EXPECT_EQ(rank_endpoint("tcp://[::1]:5557", 1, out), "");
  EXPECT_EQ(out, "tcp://[::1]:5558");
  EXPECT_EQ(rank_endpoint("inproc://kv", 2, out), "");
  EXPECT_EQ(out, "inproc://kv_dp2");
  EXPECT_EQ(rank_endpoint("ipc:///tmp/kv", 0, out), "");
  EXPECT_NE(rank_endpoint("ipc:///tmp/kv", 1, out), "");
  EXPECT_NE(rank_endpoint("tcp://h:65535", 1, out), "");
}

}  // namespace
}  // namespace kvrelay::config

namespace kvrelay::config {
namespace {

// The admin port's rule: decided on the address, never on a prefix of the text.
TEST(IsLoopbackHost, DecidesOnTheAddress) {
  for (const char* yes : {"127.0.0.1", "127.255.3.4", "::1", "[::1]", "0:0:0:0:0:0:0:1",
                          "::ffff:127.0.0.1", "[::ffff:127.0.0.1]", "::FFFF:127.9.9.9",
                          "localhost", "LocalHost", "localhost."})
    EXPECT_TRUE(is_loopback_host(yes)) << yes;
  for (const char* no :
       {"127.attacker.example", "127.0.0.1.nip.io", "localhost.attacker.example", "", "0.0.0.0",
        "::", "[::]", "10.0.0.1", "128.0.0.1", "1.127.0.0", "::ffff:10.0.0.1", "::127.0.0.1",
        "127.1", "0x7f.0.0.1", "::1%lo", "[::1", "[]", "127.0.0.1:80"})
    EXPECT_FALSE(is_loopback_host(no)) << no;
}

TEST(ListenHost, StripsPortAndBrackets) {
  EXPECT_EQ(listen_host("127.0.0.1:9464"), "127.0.0.1");
  EXPECT_EQ(listen_host("[::ffff:127.0.0.1]:0"), "::ffff:127.0.0.1");
  EXPECT_EQ(listen_host(":9464"), "");
  EXPECT_EQ(listen_host("no-port"), "");
}

}  // namespace
}  // namespace kvrelay::config
