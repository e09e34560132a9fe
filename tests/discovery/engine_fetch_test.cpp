// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// What the discovery fetch asks, in which order, and how it reports a server that is not there,
// against a real httplib server on 127.0.0.1 (actors/discovery/engine_fetch.hpp).
#include "actors/discovery/engine_fetch.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvrelay::discovery {
namespace {

using namespace std::chrono_literals;

// Serves fixed bodies by path; anything else is a 404. Records the paths asked, in order.
using routes = std::map<std::string, std::string>;

class engine_server {
 public:
  explicit engine_server(routes r) : routes_(std::move(r)) {
    srv_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        asked_.push_back(req.path);
      }
      auto it = routes_.find(req.path);
      if (it == routes_.end()) {
        res.status = 404;
        res.set_content(R"({"detail":"Not Found"})", "application/json");
      } else {
        res.set_content(it->second, "application/json");
      }
    });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    for (int i = 0; i < 2000 && !srv_.is_running(); ++i) std::this_thread::sleep_for(1ms);
  }
  ~engine_server() {
    srv_.stop();
    thread_.join();
  }
  std::string url(const std::string& prefix = "") const {
    return "http://127.0.0.1:" + std::to_string(port_) + prefix;
  }
  int port() const { return port_; }
  std::vector<std::string> asked() {
    std::lock_guard<std::mutex> lk(mu_);
    return asked_;
  }

 private:
  routes routes_;
  httplib::Server srv_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> asked_;
};

const char* kModels = R"({"object":"list","data":[{"id":"m"}]})";
const char* kSglang = R"({"kv_events": {"endpoint_host": "*", "endpoint_port_base": 5557}})";

TEST(EngineFetch, VllmAsksSourcesThenModels) {
  engine_server srv(routes{{"/kv_event_sources", R"({"0": {"endpoint": "tcp://*:5557"}})"},
                           {"/v1/models", kModels}});
  auto r = fetch_and_discover(srv.url());
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ(r.value().publishers[0].endpoint, "tcp://127.0.0.1:5557");
  EXPECT_EQ(r.value().model_id, "m");
  EXPECT_EQ(srv.asked(), (std::vector<std::string>{"/kv_event_sources", "/v1/models"}));
}

TEST(EngineFetch, SglangFallsBackToTheOlderRouteName) {
  engine_server srv(routes{{"/get_server_info", kSglang}, {"/v1/models", kModels}});
  auto r = fetch_and_discover(srv.url());
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ(r.value().hash_scheme, "sglang");
  EXPECT_EQ(srv.asked(), (std::vector<std::string>{"/kv_event_sources", "/server_info",
                                                   "/get_server_info", "/v1/models"}));
}

TEST(EngineFetch, PrefixAndNoModelWanted) {
  engine_server srv(routes{{"/e0/server_info", kSglang}});
  fetch_options o;
  o.want_model = false;
  auto r = fetch_and_discover(srv.url("/e0/"), o);
  ASSERT_TRUE(r.ok()) << r.error().render();
  EXPECT_EQ(r.value().model_id, "");
  EXPECT_EQ(r.value().metrics_url, srv.url("/e0/metrics"));
  EXPECT_EQ(srv.asked(), (std::vector<std::string>{"/e0/kv_event_sources", "/e0/server_info"}));
}

TEST(EngineFetch, NeitherRoute) {
  engine_server srv(routes{{"/v1/models", kModels}});
  auto r = fetch_and_discover(srv.url());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().context.find("has neither /kv_event_sources"), std::string::npos)
      << r.error().context;
}

TEST(EngineFetch, NobodyListening) {
  int port;
  {
    engine_server gone(routes{});
    port = gone.port();
  }
  fetch_options o;
  o.timeout = 500ms;
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const auto a = fetch_answers(url, o);
  ASSERT_TRUE(a.kv_event_sources);
  EXPECT_EQ(a.kv_event_sources->status, 0);
  EXPECT_FALSE(a.server_info);  // a transport failure stops the fetch
  EXPECT_FALSE(a.models);
  auto r = discover(url, a);
  ASSERT_FALSE(r.ok());
  const std::string& why = r.error().context;
  EXPECT_NE(why.find("GET /kv_event_sources: no answer from " + url + "/kv_event_sources: "),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("GET", why.find("no answer")), std::string::npos) << "the request named once";
}

TEST(EngineFetch, BodiesAreBounded) {
  engine_server srv(routes{{"/kv_event_sources", std::string(5000, ' ') + "{}"}});
  fetch_options o;
  o.max_body = 1000;
  auto r = fetch_and_discover(srv.url(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().context.find("exceeds 1000 bytes"), std::string::npos) << r.error().context;
}

TEST(EngineFetch, BadUrlAsksNothing) {
  EXPECT_FALSE(fetch_answers("https://engine:8000").kv_event_sources);
  auto r = fetch_and_discover("https://engine:8000");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ec::invalid_config);
}

}  // namespace
}  // namespace kvrelay::discovery
