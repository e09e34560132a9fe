#pragma once
// The admin HTTP port (cpp-httplib): a registry of handlers with help texts, Envoy-style.
//   GET  /healthz          process alive
//   GET  /readyz           every pipeline decoded a batch (or caught up) and the server answered
//   GET  /metrics          Prometheus text
//   GET  /debug/tree       every actor: kind, state, mailbox, restarts, last error, uptime
//   GET  /debug/engines    per pipeline: endpoints, last seq, adapters, readiness
//   POST /debug/adapters   ?replica=R&id=N&name=S  adds a LoRA id → name mapping
//   POST /debug/crash      ?pipeline=P&actor=A     fault injection (config switch, off by default)
//   GET  /help             this list
// Loopback by default. Binding anything else requires a bearer token (from a file); requests
// without it get 401.

#include <cstdint>
#include <memory>
#include <string>

#include "config/settings.hpp"

namespace kvrelay {

class daemon;

class admin_server {
 public:
  explicit admin_server(daemon& d);
  ~admin_server();
  /// Binds and starts serving on its own thread. False (with `error`) when it cannot bind or a
  /// non-loopback address has no token.
  bool start(const config::admin_settings& s, std::string& error);
  void stop();
  uint16_t port() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

}  // namespace kvrelay
