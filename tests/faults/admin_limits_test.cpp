// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The real admin port surviving its own clients, against the in-process
// daemon with its default limits (64 connections, 5 s per request, 30 s idle, 64 KiB bodies):
// slow-loris and idle connections do not stop the probes, a refused body is never read (RSS
// stays put), compressed and oversized bodies are refused, names from outside stay valid JSON,
// out-of-range adapter ids are refused, and "loopback" is a resolved address.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "admin/admin_server.hpp"
#include "tests/support/fault_fixture.hpp"
#include "tests/admin/raw_http.hpp"

namespace kvrelay::faults {
namespace {

using namespace std::chrono_literals;
using kvrelay::testing::raw_conn;
using kvrelay::testing::status_of;

// Resident set of this process (the daemon runs in it), in KiB.
long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// ~`raw` bytes of zeros, deflated with a gzip header: a small body that inflates hugely.
std::string gzip_bomb(size_t raw) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 16 + 15, 9, Z_DEFAULT_STRATEGY);
  std::string zeros(1 << 20, '\0'), out;
  char buf[1 << 16];
  for (size_t done = 0; done < raw; done += zeros.size()) {
    z.next_in = reinterpret_cast<Bytef*>(zeros.data());
    z.avail_in = static_cast<uInt>(zeros.size());
    const int flush = done + zeros.size() >= raw ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}

std::string post(const std::string& path, const std::string& headers, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(AdminLimits, ProbesAnswerUnderEightSlowLorisConnections) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto port = env.d->admin_port();
  std::vector<raw_conn> loris;
  for (int i = 0; i < 8; ++i) {
    loris.emplace_back(port);
    ASSERT_TRUE(loris.back().send("GET /healthz HTTP/1.1\r\nX-Slow: ")) << i;
  }
  std::atomic<bool> stop{false};
  std::atomic<int> cut{0};
  // One header byte every 4 s each (the probe that found the bug); the 5 s header deadline
  // ends them no matter how steadily they trickle.
  std::thread trickle([&] {
    for (int round = 0; round < 4 && !stop.load(); ++round) {
      for (int i = 0; i < 40 && !stop.load(); ++i) std::this_thread::sleep_for(100ms);
      int gone = 0;
      for (auto& c : loris) gone += c.send("a") ? 0 : 1;
      cut = gone;
    }
  });
  // Probes all along: each answers (the fixture's client gives up after 5 s).
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(http_get(port, "/healthz").status, 200) << "probe " << i;
    EXPECT_NE(http_get(port, "/readyz").status, -1) << "probe " << i;
    std::this_thread::sleep_for(300ms);
  }
  bool all_closed = true;
  for (auto& c : loris) all_closed = c.closed_by_peer(15s) && all_closed;
  stop = true;
  trickle.join();
  EXPECT_TRUE(all_closed) << "the header deadline must close slow-loris connections";
  const auto m = http_get(port, "/metrics").body;
  EXPECT_NE(m.find("kvrelay_admin_connections_total{outcome=\"timed_out\"} "), std::string::npos);
  EXPECT_EQ(m.find("kvrelay_admin_connections_total{outcome=\"timed_out\"} 0\n"), std::string::npos)
      << "the cut connections are counted";
}

TEST(AdminLimits, ProbesAnswerWithFiveHundredIdleConnections) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto port = env.d->admin_port();
  std::vector<raw_conn> idle;
  for (int i = 0; i < 500; ++i) {
    idle.emplace_back(port);
    ASSERT_TRUE(idle.back().ok()) << i;
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(http_get(port, "/healthz").status, 200) << "probe " << i;
    EXPECT_NE(http_get(port, "/readyz").status, -1) << "probe " << i;
  }
  const auto m = http_get(port, "/metrics").body;
  const auto at = m.find("\nkvrelay_admin_open_connections ");
  ASSERT_NE(at, std::string::npos) << m;
  EXPECT_LE(std::stol(m.substr(at + 32)), 64) << "never more than max_connections open";
  // A new idle connection after that is still let in (the oldest idle one made room).
  raw_conn late(port);
  ASSERT_TRUE(late.send("GET /healthz HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(status_of(late.read_response(5s)), 200);
}

TEST(AdminLimits, ABodyWithoutTheTokenIsNeverRead) {
  temp_dir dir;
  dir.write("token", "s3cret\n");
  fault_env env;
  env.cfg.admin.token_file = dir.file("token");
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto port = env.d->admin_port();
  // The bodies a probe of the old port sent: each inflates to 256 MiB.
  const auto bomb = gzip_bomb(size_t{256} << 20);
  ASSERT_LT(bomb.size(), 300u * 1024);
  const long before = rss_kib();
  std::vector<std::thread> clients;
  std::atomic<int> refused{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      raw_conn c(port);
      c.send(post("/debug/adapters?id=9&name=x", "Content-Encoding: gzip\r\n", bomb));
      const int status = status_of(c.read_response(10s));
      refused += status == 401 ? 1 : 0;
    });
  }
  for (auto& t : clients) t.join();
  const long after = rss_kib();
  EXPECT_EQ(refused.load(), 8) << "every client is told 401";
  EXPECT_LT(after - before, 32 * 1024) << "RSS grew from " << before << " to " << after << " KiB";
  // With the token, a compressed body is refused as such (415), an oversized one with 413.
  raw_conn gz(port);
  gz.send(post("/debug/adapters?id=9&name=x",
               "Authorization: Bearer s3cret\r\nContent-Encoding: gzip\r\n", gzip_bomb(1 << 20)));
  EXPECT_EQ(status_of(gz.read_response(10s)), 415);
  raw_conn big(port);
  big.send(post("/debug/adapters?id=9&name=x", "Authorization: Bearer s3cret\r\n",
                std::string(65 * 1024, 'x')));
  EXPECT_EQ(status_of(big.read_response(10s)), 413);
  raw_conn fine(port);
  fine.send(post("/debug/adapters?id=9&name=x", "Authorization: Bearer s3cret\r\n", "{}"));
  EXPECT_EQ(status_of(fine.read_response(10s)), 200);
}

TEST(AdminLimits, AdapterIdsOutOfRangeAreRefusedNotClamped) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto port = env.d->admin_port();
  EXPECT_EQ(http_post(port, "/debug/adapters?id=9223372036854775808&name=x").status, 400);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=-9223372036854775809&name=x").status, 400);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=99999999999999999999&name=x").status, 400);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=0x10&name=x").status, 400);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=1%3D2&name=x").status, 400);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=9223372036854775807&name=max").status, 200);
  EXPECT_EQ(http_post(port, "/debug/adapters?id=-3&name=neg").status, 200);
  const auto doc = nlohmann::json::parse(http_get(port, "/debug/engines").body);
  EXPECT_EQ(doc[0]["adapter_ids"]["9223372036854775807"], "max");
  EXPECT_EQ(doc[0]["adapter_ids"]["-3"], "neg");
  EXPECT_EQ(doc[0]["adapter_ids"].count("9223372036854775806"), 0u) << "nothing clamped";
  EXPECT_EQ(doc[0]["adapters"]["max"]["lora_id"], 9223372036854775807) << doc;
  EXPECT_EQ(doc[0]["adapters"]["neg"]["lora_id"], -3);
}

// An adapter named by the events themselves (lora_name, no id map) is listed with what it holds,
// as kvrelay_resident_blocks{adapter} counts it.
TEST(AdminLimits, AdaptersListThePartitionsTheIndexHolds) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  env.publish_steps(60);
  ASSERT_EQ(env.wait_consistent(), "");
  nlohmann::json a;
  ASSERT_TRUE(wait_until(
      [&] {
        const auto doc = nlohmann::json::parse(http_get(env.d->admin_port(), "/debug/engines").body);
        a = doc[0]["adapters"];
        return a.contains(lora) && a[lora]["resident_blocks"].get<int64_t>() ==
                                       env.metric("kvrelay_resident_blocks", {{"adapter", lora}});
      },
      10s))
      << a.dump();
  EXPECT_GT(a[lora]["resident_blocks"].get<int64_t>(), 0) << a.dump();
  EXPECT_TRUE(a[lora]["lora_id"].is_null()) << "named by the events, not by the id map";
  EXPECT_TRUE(a.contains("")) << "the base model";
}

TEST(AdminLimits, CraftedAdapterNamesStayValidJson) {
  fault_env env;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  const auto port = env.d->admin_port();
  // A quote, a backslash, a newline, a brace, a control byte and invalid UTF-8.
  ASSERT_EQ(http_post(port, "/debug/adapters?id=5&name=a%22b%5Cc%0A%7D%01%FFz").status, 200);
  for (const char* page : {"/debug/engines", "/debug/tree"}) {
    const auto body = http_get(port, page).body;
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = nlohmann::json::parse(body)) << page << ": " << body;
  }
  const auto doc = nlohmann::json::parse(http_get(port, "/debug/engines").body);
  const std::string name = doc[0]["adapter_ids"]["5"];
  EXPECT_EQ(name.substr(0, 7), "a\"b\\c\n}");
}

TEST(AdminLimits, LoopbackIsAResolvedAddressNotAPrefix) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.9.8.7"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("::ffff:127.0.0.1")) << "IPv4-mapped loopback";
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("127.attacker.example")) << "a name, and it does not resolve";
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host(""));
  EXPECT_FALSE(is_loopback_host("10.1.2.3"));
  EXPECT_FALSE(is_loopback_host("::ffff:10.0.0.1"));
  EXPECT_FALSE(is_loopback_host("::"));
  // And the daemon refuses to open such a listen address without a token.
  fault_env env;
  env.cfg.admin.listen = "127.attacker.example:0";
  std::string err;
  EXPECT_FALSE(env.start_daemon(&err));
  EXPECT_NE(err.find("admin.listen"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvrelay::faults
