// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The admin port's HTTP server on loopback, with small limits so deadlines pass quickly: framing
// checks happen before a body is read, deadlines close slow and idle clients, a full house
// makes room for a newcomer, handlers that never block answer while every worker is busy.
// (The request parser alone: http_request_test.cpp.)

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "admin/http_server.hpp"
#include "tests/admin/raw_http.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;
using testing::raw_conn;
using testing::status_of;

// A server with short deadlines and one blocking route.
struct server_fixture {
  http_limits limits;
  std::unique_ptr<http_server> server;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> blocked{0};

  explicit server_fixture(http_limits l) : limits(l) {
    server = std::make_unique<http_server>(limits);
    server->route("GET", "/healthz", [](const http_request&, http_response& r) { r.body = "ok\n"; },
                  http_server::runs_on::io_thread);
    server->route("GET", "/work", [](const http_request& q, http_response& r) {
      r.body = "worked " + q.param("n") + "\n";
    });
    server->route("POST", "/echo", [](const http_request& q, http_response& r) { r.body = q.body; });
    server->route("GET", "/block", [this](const http_request&, http_response& r) {
      ++blocked;
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return release; });
      r.body = "released\n";
    });
    server->set_gate([](const http_request& q) -> std::optional<http_response> {
      if (q.path == "/echo" && !q.header("x-key")) {
        http_response no;
        no.status = 401;
        no.body = "no key\n";
        return no;
      }
      return std::nullopt;
    });
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string err;
    EXPECT_TRUE(server->listen(reinterpret_cast<sockaddr*>(&a), sizeof a, err)) << err;
  }
  ~server_fixture() {
    {
      std::lock_guard<std::mutex> lk(mu);
      release = true;
    }
    cv.notify_all();
    server->stop();
  }
  uint16_t port() const { return server->port(); }
  int get(const std::string& path) {
    raw_conn c(port());
    if (!c.ok() || !c.send("GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n")) return -1;
    return status_of(c.read_response(5s));
  }
};

http_limits small() {
  http_limits l;
  l.max_connections = 8;
  l.read_timeout = 300ms;
  l.idle_timeout = 600ms;
  l.write_timeout = 300ms;
  l.max_header_bytes = 1024;
  l.max_body_bytes = 256;
  l.worker_threads = 2;
  return l;
}

TEST(HttpServer, AnswersKeepAliveAndPipelinedRequestsInOrder) {
  server_fixture f(small());
  raw_conn c(f.port());
  ASSERT_TRUE(c.send("GET /work?n=1 HTTP/1.1\r\n\r\nGET /work?n=2 HTTP/1.1\r\n\r\n"));
  const auto one = c.read_response(5s);
  EXPECT_EQ(status_of(one), 200);
  EXPECT_NE(one.find("worked 1"), std::string::npos) << one;
  const auto two = c.read_response(5s);
  EXPECT_NE(two.find("worked 2"), std::string::npos) << two;
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nX-Key: k\r\nContent-Length: 5\r\n\r\nhello"));
  const auto echo = c.read_response(5s);
  EXPECT_EQ(status_of(echo), 200);
  EXPECT_NE(echo.find("\r\n\r\nhello"), std::string::npos) << echo;
}

TEST(HttpServer, RefusesBeforeReadingTheBody) {
  server_fixture f(small());
  const auto send = [&](const std::string& req) {
    raw_conn c(f.port());
    c.send(req);
    return status_of(c.read_response(5s));
  };
  EXPECT_EQ(send("GET /nowhere HTTP/1.1\r\n\r\n"), 404);
  EXPECT_EQ(send("POST /healthz HTTP/1.1\r\n\r\n"), 405);
  EXPECT_EQ(send("POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\n"), 401)
      << "the gate answers before the announced body arrives";
  EXPECT_EQ(send("POST /echo HTTP/1.1\r\nX-Key: k\r\nContent-Length: 100000\r\n\r\n"), 413);
  EXPECT_EQ(send("POST /echo HTTP/1.1\r\nX-Key: k\r\nContent-Encoding: gzip\r\n"
                 "Content-Length: 4\r\n\r\n"),
            415);
  EXPECT_EQ(send("POST /echo HTTP/1.1\r\nX-Key: k\r\nTransfer-Encoding: chunked\r\n\r\n"), 501);
  EXPECT_EQ(send("POST /echo HTTP/1.1\r\nX-Key: k\r\nContent-Length: x\r\n\r\n"), 400);
  EXPECT_EQ(send("GET /work HTTP/1.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n"), 431);
  EXPECT_EQ(send("BAD\r\n\r\n"), 400);
  EXPECT_GE(f.server->stats().rejected, 9u);
}

TEST(HttpServer, ASlowHeaderIsCutAtTheReadDeadline) {
  server_fixture f(small());
  raw_conn c(f.port());
  ASSERT_TRUE(c.send("GET /work HTTP/1.1\r\nX-Slow: "));
  // Bytes keep coming, but the header as a whole has 300 ms.
  const auto t0 = std::chrono::steady_clock::now();
  bool cut = false;
  for (int i = 0; i < 100 && !cut; ++i) {
    if (!c.send("a")) break;
    cut = c.closed_by_peer(100ms);
  }
  EXPECT_TRUE(cut || !c.send("a")) << "the slow client is still connected after 10 s";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_GE(f.server->stats().timed_out, 1u);
}

TEST(HttpServer, AnIdleConnectionIsClosedAtTheIdleDeadline) {
  server_fixture f(small());
  raw_conn c(f.port());
  EXPECT_TRUE(c.closed_by_peer(10s));
  EXPECT_GE(f.server->stats().timed_out, 1u);
}

TEST(HttpServer, AFullHouseMakesRoomForANewcomerByEvictingTheIdlest) {
  server_fixture f(small());
  std::vector<raw_conn> idle;
  for (int i = 0; i < 40; ++i) idle.emplace_back(f.port());
  // Every newcomer finds room: the longest-idle connections are closed for it.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(f.get("/healthz"), 200) << i;
  EXPECT_GE(f.server->stats().evicted, 32u);
  EXPECT_LE(f.server->stats().open, 8u);
}

TEST(HttpServer, TheIoThreadAnswersWhileEveryWorkerIsBusy) {
  server_fixture f(small());
  std::vector<std::thread> blockers;
  for (int i = 0; i < 2; ++i) blockers.emplace_back([&] { f.get("/block"); });
  for (int i = 0; i < 500 && f.blocked.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(f.blocked.load(), 2);
  EXPECT_EQ(f.get("/healthz"), 200) << "liveness must not wait for a worker";
  {
    std::lock_guard<std::mutex> lk(f.mu);
    f.release = true;
  }
  f.cv.notify_all();
  for (auto& b : blockers) b.join();
}

TEST(HttpServer, EveryConnectionRunningAHandlerRefusesTheNewcomer) {
  auto l = small();
  l.max_connections = 2;
  server_fixture f(l);
  std::vector<std::thread> blockers;
  for (int i = 0; i < 2; ++i) blockers.emplace_back([&] { f.get("/block"); });
  for (int i = 0; i < 500 && f.blocked.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(f.blocked.load(), 2);
  EXPECT_EQ(f.get("/healthz"), 503);
  EXPECT_EQ(f.server->stats().refused, 1u);
  {
    std::lock_guard<std::mutex> lk(f.mu);
    f.release = true;
  }
  f.cv.notify_all();
  for (auto& b : blockers) b.join();
  EXPECT_EQ(f.get("/healthz"), 200);
}


// The first up, non-loopback IPv4 address of this host ("" when it has none).
std::string host_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::string out;
  for (auto* i = list; i && out.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    if (is_loopback_address(i->ifa_addr)) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    out = buf;
  }
  ::freeifaddrs(list);
  return out;
}

// The IPv6 wildcard takes IPv4 too, and every request knows whether its connection arrived at a
// loopback address: what the admin port's read-only exposure (admin.public) decides on.
TEST(HttpServerAddresses, TheWildcardTellsLoopbackConnectionsFromOthers) {
  http_server server(http_limits{});
  server.route("GET", "/who", [](const http_request& q, http_response& r) {
    r.body = q.local_loopback ? "loopback" : "other";
  });
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  any.sin6_addr = in6addr_any;
  std::string err;
  ASSERT_TRUE(server.listen(reinterpret_cast<sockaddr*>(&any), sizeof any, err)) << err;
  const auto ask = [&](const char* host) {
    raw_conn c(server.port(), host);
    if (!c.ok() || !c.send("GET /who HTTP/1.1\r\nHost: t\r\n\r\n")) return std::string("no connection");
    const auto r = c.read_response(5s);
    return r.substr(r.find("\r\n\r\n") + 4);
  };
  EXPECT_EQ(ask("127.0.0.1"), "loopback");
  EXPECT_EQ(ask("127.3.4.5"), "loopback") << "all of 127/8";
  const auto other = host_address();
  if (other.empty()) {
    std::cout << "SKIP: this host has no non-loopback IPv4 address up" << std::endl;
    GTEST_SKIP() << "no non-loopback IPv4 address";
  }
  EXPECT_EQ(ask(other.c_str()), "other") << other;
  server.stop();
}

}  // namespace
}  // namespace kvrelay
