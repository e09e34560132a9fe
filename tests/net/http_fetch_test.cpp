// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "net/http_fetch.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "actors/scraper/metric_profile.hpp"
#include "tests/scraper/scraper_test_util.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;
using testing::read_metrics_fixture;

// A real httplib server on 127.0.0.1, port 0 (deps.md pitfall 9: bind, then listen in a thread).
class MetricsServer {
 public:
  MetricsServer() {
    srv_.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      note(req);
      res.set_content(body_for(current_), "text/plain; version=0.0.4");
    });
    srv_.Get("/tick2", [this](const httplib::Request& req, httplib::Response& res) {
      note(req);
      res.set_content(read_metrics_fixture("vllm_metrics_cpu_tick2.txt"), "text/plain");
    });
    srv_.Get("/error", [this](const httplib::Request& req, httplib::Response& res) {
      note(req);
      res.status = 500;
      res.set_content("engine exploded", "text/plain");
    });
    srv_.Get("/big", [this](const httplib::Request& req, httplib::Response& res) {
      note(req);
      res.set_content(std::string(5000, '#'), "text/plain");
    });
    srv_.Get("/big-chunked", [this](const httplib::Request& req, httplib::Response& res) {
      note(req);
      res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
        std::string chunk(1000, '#');
        for (int i = 0; i < 5; ++i) sink.write(chunk.data(), chunk.size());
        sink.done();
        return true;
      });
    });
    // Never answers until the test releases it: the client must give up on its own (M22).
    srv_.Get("/hang", [this](const httplib::Request& req, httplib::Response& res) {
      note(req);
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, 10s, [this] { return released_; });
      res.set_content("late", "text/plain");
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    // 0.11.4 has no wait_until_ready(), and stop() before the listen loop runs is a no-op that
    // leaves join() hanging: wait until it runs.
    for (int i = 0; i < 2000 && !srv_.is_running(); ++i) std::this_thread::sleep_for(1ms);
  }
  ~MetricsServer() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      released_ = true;
    }
    cv_.notify_all();
    srv_.stop();
    thread_.join();
  }

  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int port() const { return port_; }
  std::size_t connections() {
    std::lock_guard<std::mutex> lk(mu_);
    return ports_.size();
  }
  int requests() const { return requests_.load(); }
  void serve(std::string fixture) {
    std::lock_guard<std::mutex> lk(mu_);
    current_ = std::move(fixture);
  }

 private:
  void note(const httplib::Request& req) {
    ++requests_;
    std::lock_guard<std::mutex> lk(mu_);
    ports_.insert(req.remote_port);
  }
  std::string body_for(const std::string&) {
    std::lock_guard<std::mutex> lk(mu_);
    return read_metrics_fixture(current_);
  }

  httplib::Server srv_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::set<int> ports_;  // client source ports seen: one per TCP connection
  std::atomic<int> requests_{0};
  std::string current_ = "vllm_metrics_cpu.txt";
};

TEST(HttpUrl, ParsesHostPortPath) {
  std::string err;
  auto u = parse_http_url("http://127.0.0.1:8000/metrics", &err);
  ASSERT_TRUE(u) << err;
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->path, "/metrics");
  u = parse_http_url("http://engine.local", &err);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path, "/");
  u = parse_http_url("http://[::1]:9/m?x=1#frag", &err);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9);
  EXPECT_EQ(u->path, "/m?x=1");
  u = parse_http_url("http://h:1?q", &err);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->path, "/?q");
}

TEST(HttpUrl, RejectsWhatItCannotFetch) {
  for (const char* bad : {"", "https://h/metrics", "ftp://h", "127.0.0.1:8000/metrics",
                          "http://", "http://:80/", "http://h:/", "http://h:0/", "http://h:65536/",
                          "http://h:8x/", "http://[::1/", "http://[::1]x/", "http://u:p@h/"}) {
    std::string err;
    EXPECT_FALSE(parse_http_url(bad, &err)) << bad;
    EXPECT_NE(err.find("invalid metrics URL"), std::string::npos) << bad;
  }
}

TEST(HttpUrl, ErrorNamesWhatWasBeingParsed) {
  std::string err;
  EXPECT_FALSE(parse_http_url("https://engine:8000", &err, "engine URL"));
  EXPECT_NE(err.find("invalid engine URL \"https://engine:8000\""), std::string::npos) << err;
}

TEST(HttpFetch, FetchesFixtureAndScrapes) {
  MetricsServer srv;
  http_fetcher f(srv.url("/metrics"));
  EXPECT_TRUE(f.url_error().empty());
  fetch_result r = f.get();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, read_metrics_fixture("vllm_metrics_cpu.txt"));

  scraper_config cfg;
  cfg.cache_size_bytes = 1LL << 30;
  scraper_logic s(cfg);
  scrape_result sr = s.scrape_response(r.status, r.body);
  ASSERT_TRUE(sr.ok) << sr.error;
  EXPECT_DOUBLE_EQ(sr.stats.pressure, 8.0 / 256);
  srv.serve("vllm_metrics_cpu_tick2.txt");
  fetch_result r2 = f.get();
  ASSERT_TRUE(r2.ok);
  EXPECT_DOUBLE_EQ(s.scrape_response(r2.status, r2.body).stats.hit_rate, 0.7);
}

TEST(HttpFetch, ReusesOneConnection) {
  MetricsServer srv;
  http_fetcher f(srv.url("/metrics"));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.get().ok) << i;
  EXPECT_EQ(srv.requests(), 5);
  EXPECT_EQ(srv.connections(), 1u);
}

// Discovery asks several paths of one engine: same origin, same kept-alive connection.
TEST(HttpFetch, GetsOtherPathsOnTheSameConnection) {
  MetricsServer srv;
  http_fetcher f(srv.url("/metrics"));
  fetch_result r = f.get("/tick2");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, read_metrics_fixture("vllm_metrics_cpu_tick2.txt"));
  r = f.get("error");  // the leading '/' is added
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 500);
  ASSERT_TRUE(f.get().ok);  // the constructed URL is unchanged
  EXPECT_EQ(srv.requests(), 3);
  EXPECT_EQ(srv.connections(), 1u);

  http_fetch_options o;
  o.timeout = 200ms;
  http_fetcher g(srv.url("/metrics"), o);
  r = g.get("/hang");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("GET " + srv.url("/hang") + ": no answer within 200 ms"),
            std::string::npos)
      << r.error;
  // The parts of the error, for a caller that names the request itself.
  EXPECT_EQ(r.url, srv.url("/hang"));
  EXPECT_EQ(r.why.rfind("no answer within 200 ms", 0), 0u) << r.why;
  EXPECT_EQ(r.error, "GET " + r.url + ": " + r.why);
}

TEST(HttpFetch, M21Http500IsAnErrorWithZeroStats) {
  MetricsServer srv;
  http_fetcher f(srv.url("/error"));
  fetch_result r = f.get();
  ASSERT_TRUE(r.ok) << r.error;  // transport fine
  EXPECT_EQ(r.status, 500);
  scraper_logic s(scraper_config{});
  scrape_result sr = s.scrape_response(r.status, r.body);
  EXPECT_FALSE(sr.ok);
  EXPECT_NE(sr.error.find("HTTP 500"), std::string::npos);
  EXPECT_EQ(sr.stats.pressure, 0.0);
  EXPECT_EQ(sr.stats.cache_memory_bytes, 0);
}

TEST(HttpFetch, M22ServerThatNeverAnswersTimesOut) {
  MetricsServer srv;
  http_fetch_options o;
  o.timeout = 200ms;
  http_fetcher f(srv.url("/hang"), o);
  auto t0 = std::chrono::steady_clock::now();
  fetch_result r = f.get();
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
  EXPECT_LT(took, 5s);  // bounded by the timeout, not by the server (which holds for 10 s)
  EXPECT_FALSE(r.why.empty());
  EXPECT_NE(r.why.rfind("GET ", 0), 0u) << r.why;
  EXPECT_EQ(r.error, "GET " + srv.url("/hang") + ": " + r.why);
}

TEST(HttpFetch, RecoversAfterAFailedRequest) {
  MetricsServer srv;
  http_fetch_options o;
  o.timeout = 200ms;
  http_fetcher hang(srv.url("/hang"), o);
  EXPECT_FALSE(hang.get().ok);
  http_fetcher ok(srv.url("/metrics"), o);
  EXPECT_TRUE(ok.get().ok);
}

TEST(HttpFetch, BodyOverCapIsAnError) {
  MetricsServer srv;
  http_fetch_options o;
  o.max_body = 4096;
  for (const char* path : {"/big", "/big-chunked"}) {
    http_fetcher f(srv.url(path), o);
    fetch_result r = f.get();
    EXPECT_FALSE(r.ok) << path;
    EXPECT_NE(r.error.find("exceeds"), std::string::npos) << path << ": " << r.error;
  }
  o.max_body = 5000;  // exactly at the cap is fine
  http_fetcher f(srv.url("/big-chunked"), o);
  fetch_result r = f.get();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body.size(), 5000u);
}

TEST(HttpFetch, ConnectionRefusedIsAnError) {
  int port;
  {
    MetricsServer srv;
    port = srv.port();
  }  // closed: nothing listens there now
  http_fetch_options o;
  o.timeout = 500ms;
  http_fetcher f("http://127.0.0.1:" + std::to_string(port) + "/metrics", o);
  fetch_result r = f.get();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("GET http://127.0.0.1"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find(": connection refused by 127.0.0.1:" + std::to_string(port) +
                         " (nothing listens there)"),
            std::string::npos)
      << r.error;
  EXPECT_EQ(r.why, "connection refused by 127.0.0.1:" + std::to_string(port) +
                       " (nothing listens there)");
  EXPECT_EQ(r.url, "http://127.0.0.1:" + std::to_string(port) + "/metrics");
}

TEST(HttpFetch, AHostThatDoesNotResolveSaysSo) {
  http_fetch_options o;
  o.timeout = 500ms;
  http_fetcher f("http://kvrelay-test.invalid:8000/metrics", o);  // .invalid never resolves
  fetch_result r = f.get();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("GET http://kvrelay-test.invalid:8000/metrics: could not resolve host "
                         "kvrelay-test.invalid ("),
            std::string::npos)
      << r.error;
}

TEST(HttpFetch, BadUrlFailsEveryGet) {
  http_fetcher f("https://engine/metrics");
  EXPECT_FALSE(f.url_error().empty());
  fetch_result r = f.get();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, f.url_error());
  EXPECT_EQ(r.why, f.url_error());
  EXPECT_TRUE(r.url.empty());  // no request was made
}

}  // namespace
}  // namespace kvrelay
