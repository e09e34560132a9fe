// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/fake-engine/engine_http.hpp"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <utility>

namespace kvrelay::fake {
namespace {

using json = nlohmann::json;

// "tcp://host:port" → host as written ("*", "127.0.0.1", "[::1]") and port.
std::pair<std::string, int> split(const std::string& endpoint) {
  std::string rest = endpoint.rfind("tcp://", 0) == 0 ? endpoint.substr(6) : endpoint;
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return {rest, 0};
  int port = 0;
  try {
    port = std::stoi(rest.substr(colon + 1));
  } catch (const std::exception&) {
    port = 0;  // '*' as configured: the bound port is in the rank's own endpoint
  }
  return {rest.substr(0, colon), port};
}

bool contiguous(const std::vector<int>& ports) {
  for (size_t r = 0; r < ports.size(); ++r) {
    if (ports[r] != ports[0] + static_cast<int>(r)) return false;
  }
  return !ports.empty();
}

json or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string kv_event_sources_body(const engine_description& d) {
  json keyed = json::object();
  json list = json::array();
  if (!d.events_disabled) {
    for (size_t r = 0; r < d.ranks.size(); ++r) {
      const auto& e = d.ranks[r];
      // Merged shape: the rank's KVEventsConfig with its bound endpoints.
      keyed[std::to_string(r)] = {{"enable_kv_cache_events", true},
                                  {"publisher", "zmq"},
                                  {"endpoint", e.live},
                                  {"replay_endpoint", or_null(e.replay)},
                                  {"buffer_steps", d.buffer_steps},
                                  {"hwm", 100000},
                                  {"max_queue_size", 100000},
                                  {"topic", d.topic}};
      list.push_back({{"data_parallel_rank", r},
                      {"endpoint", e.live},
                      {"replay_endpoint", or_null(e.replay)},
                      {"topic", d.topic}});
    }
  }
  switch (d.shape) {
    case vllm_shape::sources:
      return json{{"sources", list}}.dump();
    case vllm_shape::list:
      return list.dump();
    case vllm_shape::keyed:
      break;
  }
  return keyed.dump();
}

std::string server_info_body(const engine_description& d) {
  json body = {{"model_path", d.model},
               {"served_model_name", d.model},
               {"page_size", d.block_size},
               {"dp_size", static_cast<int64_t>(std::max<size_t>(1, d.ranks.size()))},
               {"tp_size", 1},
               {"version", "fake"},
               {"kv_events_config", nullptr},
               {"kv_events", nullptr}};
  if (d.events_disabled || d.ranks.empty()) return body.dump();

  // SGLang reports the host it was configured with and one base port; ranks sit at base + rank.
  const std::string host = split(d.bind).first;
  std::vector<int> live, replay;
  for (const auto& e : d.ranks) {
    live.push_back(split(e.live).second);
    if (!e.replay.empty()) replay.push_back(split(e.replay).second);
  }
  json kv = {{"publisher", "zmq"},
             {"endpoint_host", host},
             {"endpoint_port_base", live[0]},
             {"topic", d.topic},
             {"block_size", d.block_size},
             {"dp_size", static_cast<int64_t>(d.ranks.size())}};
  // Ports the OS chose per rank (port 0) rarely follow base + rank: then list them per rank,
  // as sglang #38032 does for ranks on other hosts.
  if (!contiguous(live)) {
    json pubs = json::array();
    for (size_t r = 0; r < d.ranks.size(); ++r) {
      pubs.push_back({{"dp_rank", r}, {"endpoint", d.ranks[r].live}});
    }
    kv["publishers"] = pubs;
  }
  json raw = {{"publisher", "zmq"}, {"endpoint", "tcp://" + host + ":" + std::to_string(live[0])},
              {"topic", d.topic},   {"buffer_steps", d.buffer_steps},
              {"hwm", 100000},      {"max_queue_size", 100000}};
  // The raw config has one replay base; per-rank replay ports that do not follow it cannot be
  // said in SGLang's shape, so they are not said at all.
  if (replay.size() == d.ranks.size() && contiguous(replay)) {
    raw["replay_endpoint"] =
        "tcp://" + split(d.ranks[0].replay).first + ":" + std::to_string(replay[0]);
  }
  body["kv_events_config"] = raw.dump();
  body["kv_events"] = kv;
  return body.dump();
}

std::string models_body(const engine_description& d) {
  const char* owner = d.dialect == http_dialect::sglang ? "sglang" : "vllm";
  return json{{"object", "list"},
              {"data", json::array({{{"id", d.model},
                                     {"object", "model"},
                                     {"created", 0},
                                     {"owned_by", owner},
                                     {"root", d.model},
                                     {"parent", nullptr},
                                     {"max_model_len", 4096}}})}}
      .dump();
}

std::string metrics_body(const engine_description& d, const metrics_sample& s) {
  if (!d.metrics_text.empty()) return d.metrics_text;
  const std::string l = "{model_name=\"" + label_value(d.model) + "\"} ";
  std::string out;
  auto gauge = [&](const std::string& name, const std::string& value) {
    out += "# TYPE " + name + " gauge\n" + name + l + value + "\n";
  };
  if (d.process_start_time > 0) {
    char t[64];
    std::snprintf(t, sizeof t, "%.2f", d.process_start_time);
    out += std::string("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds ") + t +
           "\n";
  }
  if (d.dialect == http_dialect::sglang) {
    gauge("sglang:num_running_reqs", "1");
    gauge("sglang:num_queue_reqs", "0");
    gauge("sglang:token_usage", "0.25");
    gauge("sglang:cache_hit_rate", "0.5");
    return out;
  }
  gauge("vllm:num_requests_running", "1");
  gauge("vllm:num_requests_waiting", "0");
  gauge("vllm:kv_cache_usage_perc", "0.25");
  // Counters grow with what was published, so deltas between scrapes are non-zero.
  out += "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total" + l +
         std::to_string(s.batches * 64) + "\n";
  out += "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total" + l +
         std::to_string(s.batches * 32) + "\n";
  return out;
}

struct engine_http::impl {
  mutable std::mutex mu;  // guards d: handlers run on httplib's threads
  engine_description d;
  std::function<metrics_sample()> sample;
  httplib::Server srv;
  std::thread thread;
  int port = 0;
  std::string url;
  bool stopped = false;

  engine_description description() const {
    std::lock_guard<std::mutex> lk(mu);
    return d;
  }
};

engine_http::engine_http(engine_description d, const std::string& host, int port,
                         std::function<metrics_sample()> sample)
    : impl_(std::make_unique<impl>()) {
  auto& m = *impl_;
  m.d = std::move(d);
  if (m.d.process_start_time <= 0)
    m.d.process_start_time = std::chrono::duration<double>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  m.sample = std::move(sample);
  const auto json_reply = [](httplib::Response& res, const std::string& body) {
    res.set_content(body, "application/json");
  };
  // Every handler answers from a copy taken under the lock: update() may run meanwhile.
  const auto discovery_route = [&m, json_reply](std::string (*body)(const engine_description&)) {
    return [&m, json_reply, body](const httplib::Request&, httplib::Response& res) {
      const auto d = m.description();
      if (d.discovery_answer.status != 0) {
        res.status = d.discovery_answer.status;
        json_reply(res, d.discovery_answer.body);
        return;
      }
      json_reply(res, body(d));
    };
  };
  if (m.d.dialect == http_dialect::vllm) {
    m.srv.Get("/kv_event_sources", discovery_route(&kv_event_sources_body));
  } else {
    m.srv.Get("/server_info", discovery_route(&server_info_body));
    m.srv.Get("/get_server_info", discovery_route(&server_info_body));
  }
  m.srv.Get("/v1/models", [&m, json_reply](const httplib::Request&, httplib::Response& res) {
    json_reply(res, models_body(m.description()));
  });
  m.srv.Get("/metrics", [&m](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_body(m.description(), m.sample ? m.sample() : metrics_sample{}),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  m.srv.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("", "text/plain");
  });
  // Routes an engine does not have answer like FastAPI does.
  m.srv.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      res.set_content(R"({"detail":"Not Found"})", "application/json");
    }
  });

  m.port = port == 0 ? m.srv.bind_to_any_port(host) : (m.srv.bind_to_port(host, port) ? port : -1);
  if (m.port <= 0) {
    throw std::runtime_error("cannot bind HTTP on " + host + ":" + std::to_string(port));
  }
  m.url = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
          std::to_string(m.port);
  m.thread = std::thread([&m] { m.srv.listen_after_bind(); });
  // httplib 0.11 has no wait_until_ready(), and stop() before the loop runs does not end it.
  for (int i = 0; i < 5000 && !m.srv.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

engine_http::~engine_http() { stop(); }

void engine_http::update(const std::function<void(engine_description&)>& change) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  const auto dialect = impl_->d.dialect;
  change(impl_->d);
  impl_->d.dialect = dialect;  // the routes were chosen at start
}

engine_description engine_http::description() const { return impl_->description(); }

int engine_http::port() const noexcept { return impl_->port; }
const std::string& engine_http::url() const noexcept { return impl_->url; }

void engine_http::stop() {
  auto& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  m.srv.stop();
  if (m.thread.joinable()) m.thread.join();
}

}  // namespace kvrelay::fake
