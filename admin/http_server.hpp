// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A small HTTP/1.1 server for the admin port, built for what that port must survive
// instead of cpp-httplib 0.11.4, whose server gives each connection one of its 8
// workers for the connection's whole life, has no deadline for a request's header (one byte per
// read timeout keeps a worker forever), no bound on connections, and reads and gunzips a body
// before any handler can refuse it. Here:
//   * one I/O thread polls every connection; a request's header and body must arrive within
//     `read_timeout` of its first byte, a connection without a request in progress is closed
//     after `idle_timeout`, a response must be taken within `write_timeout`;
//   * at most `max_connections` are open: a new one evicts the longest-idle connection (then
//     the oldest unfinished request), so probes get in under slow or idle clients; only when
//     every slot is running a handler is the newcomer refused;
//   * once the header is in, the route, the gate (authorization) and the framing are checked
//     before one byte of body is read: unknown routes 404/405, a refusal from the gate as it
//     says, `Content-Encoding` 415 (bodies are never decompressed), `Transfer-Encoding` 501,
//     a `Content-Length` over `max_body_bytes` 413, a header over `max_header_bytes` 431;
//   * handlers run on a few worker threads (they may block on actor requests) or, when they
//     never block, on the I/O thread itself (liveness answers even with every worker busy).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "admin/http_request.hpp"

struct sockaddr;

namespace kvrelay {

struct http_limits {
  size_t max_connections = 64;
  std::chrono::milliseconds read_timeout{5'000};   // header + body, from the request's first byte
  std::chrono::milliseconds idle_timeout{30'000};  // no request in progress
  std::chrono::milliseconds write_timeout{5'000};  // the client takes its response
  size_t max_header_bytes = 8 * 1024;
  size_t max_body_bytes = 64 * 1024;
  size_t worker_threads = 2;
};

class http_server {
 public:
  using handler = std::function<void(const http_request&, http_response&)>;
  /// Runs when a request's header is complete, before its body is read; a response refuses the
  /// request (the connection is closed after it, the body never read).
  using gate = std::function<std::optional<http_response>(const http_request&)>;
  enum class runs_on { worker, io_thread };

  struct counters {
    uint64_t accepted = 0;
    uint64_t evicted = 0;    // closed to make room for a new connection
    uint64_t refused = 0;    // every slot was running a handler
    uint64_t timed_out = 0;  // read, idle or write deadline
    uint64_t rejected = 0;   // 4xx/5xx before the handler (framing, size, gate)
    uint64_t open = 0;       // now
  };

  explicit http_server(http_limits limits);
  ~http_server();  // stop()
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// Adds a route (exact path). Call before listen().
  void route(std::string method, std::string path, handler h, runs_on where = runs_on::worker);
  void set_gate(gate g);

  /// Binds `addr`, listens and starts the threads. False with `error` when it cannot bind. The
  /// IPv6 wildcard (`[::]`) takes IPv4 connections too. Each request says whether its
  /// connection arrived at a loopback address (http_request::local_loopback).
  bool listen(const sockaddr* addr, unsigned addr_len, std::string& error);
  /// The bound port (0 before listen()).
  uint16_t port() const;
  /// Closes every connection and joins the threads (waits for handlers that are running).
  void stop();
  counters stats() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// 127.0.0.0/8, ::1 and IPv4-mapped 127.0.0.0/8 (::ffff:127.x.y.z).
bool is_loopback_address(const sockaddr* a);

}  // namespace kvrelay
