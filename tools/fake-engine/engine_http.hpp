// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The fake engine's HTTP server, in either engine's dialect (docs/discovery.md has the shapes
// and their sources): vLLM's GET /kv_event_sources, SGLang's GET /server_info (and its older
// /get_server_info), and for both GET /v1/models and GET /metrics. Whatever the publishers
// actually bound (ZMQ_LAST_ENDPOINT, so port 0 is resolved) is what it reports, one entry per DP
// rank. The bodies are built by pure functions so tests can check them without a socket.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvrelay::fake {

enum class http_dialect : uint8_t { vllm, sglang };
/// The three bodies /kv_event_sources has had: `{"0": {...}}` (as merged), `{"sources": [...]}`,
/// `[...]`.
enum class vllm_shape : uint8_t { keyed, sources, list };

struct rank_endpoints {
  std::string live;    // as bound, e.g. tcp://127.0.0.1:41233
  std::string replay;  // "" without replay
};

struct engine_description {
  http_dialect dialect = http_dialect::vllm;
  vllm_shape shape = vllm_shape::keyed;
  bool events_disabled = false;
  std::string model = "fake-model";
  std::string topic;
  int64_t block_size = 16;
  int64_t buffer_steps = 10000;
  std::string bind;                   // the configured live bind (SGLang reports its host)
  std::vector<rank_endpoints> ranks;  // one per DP rank, rank order
  std::string metrics_text;           // served verbatim when set; otherwise synthetic
  /// process_start_time_seconds of the synthetic /metrics, as prometheus_client's process
  /// collector exports it (kvrelay's durable index proves the engine's incarnation with it);
  /// 0 = the wall time the server was made.
  double process_start_time = 0;
  /// Test hook: when `status` is set, the discovery route (/kv_event_sources, or /server_info)
  /// answers it with `body` instead (a malformed answer, a 503 while the engine starts).
  struct canned_answer {
    int status = 0;  // 0 = answer normally
    std::string body;
  } discovery_answer;
};

/// What the synthetic /metrics derives its numbers from.
struct metrics_sample {
  uint64_t batches = 0;  // published so far, all ranks
};

std::string kv_event_sources_body(const engine_description& d);
/// SGLang's /server_info: a few server args, the raw kv_events_config string, and the kv_events
/// descriptor (with a publishers list when the bound ports do not follow base + rank).
std::string server_info_body(const engine_description& d);
std::string models_body(const engine_description& d);
std::string metrics_body(const engine_description& d, const metrics_sample& s);

class engine_http {
 public:
  /// Binds host:port (0 = ephemeral) and serves in a thread; throws std::runtime_error when the
  /// port cannot be bound.
  engine_http(engine_description d, const std::string& host, int port,
              std::function<metrics_sample()> sample);
  ~engine_http();
  engine_http(const engine_http&) = delete;
  engine_http& operator=(const engine_http&) = delete;

  /// Changes what the server says from now on (an engine restarted on new ports, publishers
  /// that came up after the HTTP server, a canned answer); thread-safe. The dialect stays.
  void update(const std::function<void(engine_description&)>& change);
  engine_description description() const;

  int port() const noexcept;
  /// http://host:port (IPv6 bracketed).
  const std::string& url() const noexcept;
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay::fake
