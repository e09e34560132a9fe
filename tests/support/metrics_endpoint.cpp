// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tests/support/metrics_endpoint.hpp"

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace kvrelay::stats_e2e {

struct metrics_endpoint::impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;

  mutable std::mutex mu;
  std::condition_variable cv;
  http_answer sticky{500, "no answer configured\n"};
  std::deque<http_answer> once;
  std::function<http_answer(uint64_t)> gen;
  bool hanging = false;
  bool stopping = false;
  uint64_t requests = 0;
  uint64_t held = 0;
  std::chrono::steady_clock::time_point first{};

  http_answer next() {
    std::unique_lock<std::mutex> lk(mu);
    const uint64_t n = ++requests;
    if (n == 1) first = std::chrono::steady_clock::now();
    if (hanging) {
      ++held;
      // Never answered while hanging: the scraper's HTTP timeout (or a release) ends it.
      cv.wait(lk, [this] { return !hanging || stopping; });
      --held;
    }
    if (!once.empty()) {
      http_answer a = std::move(once.front());
      once.pop_front();
      return a;
    }
    if (gen) {
      auto g = gen;  // called outside the lock: a generator may be slow
      lk.unlock();
      return g(n);
    }
    return sticky;
  }
};

metrics_endpoint::metrics_endpoint() : impl_(std::make_unique<impl>()) {
  auto& d = *impl_;
  d.server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    http_answer a = impl_->next();
    res.status = a.status;
    res.set_content(a.body, "text/plain; version=0.0.4; charset=utf-8");
  });
  d.port = d.server.bind_to_any_port("127.0.0.1");
  if (d.port <= 0) throw std::runtime_error("metrics endpoint: cannot bind 127.0.0.1:0");
  d.thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

metrics_endpoint::~metrics_endpoint() { stop(); }

std::string metrics_endpoint::url() const {
  return "http://127.0.0.1:" + std::to_string(impl_->port) + "/metrics";
}

void metrics_endpoint::serve(int status, std::string body) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->gen = nullptr;
  impl_->sticky = http_answer{status, std::move(body)};
}

void metrics_endpoint::serve_once(int status, std::string body) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->once.push_back(http_answer{status, std::move(body)});
}

void metrics_endpoint::serve_generated(std::function<http_answer(uint64_t)> gen) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->gen = std::move(gen);
}

void metrics_endpoint::hang() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->hanging = true;
}

void metrics_endpoint::release() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->hanging = false;
  }
  impl_->cv.notify_all();
}

uint64_t metrics_endpoint::requests() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->requests;
}

uint64_t metrics_endpoint::held() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->held;
}

std::chrono::steady_clock::time_point metrics_endpoint::first_request() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->first;
}

void metrics_endpoint::stop() {
  auto& d = *impl_;
  {
    std::lock_guard<std::mutex> lk(d.mu);
    d.stopping = true;
  }
  d.cv.notify_all();  // a held handler would keep the server's thread pool from joining
  if (d.thread.joinable()) {
    // stop() before the listen loop runs would be lost and join() would never return.
    for (int i = 0; i < 500 && !d.server.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    d.server.stop();
    d.thread.join();
  }
}

std::string metrics_fixture(const std::string& name) {
  const std::string path = std::string(KVRELAY_FIXTURES_DIR) + "/metrics/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read fixture " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace kvrelay::stats_e2e
