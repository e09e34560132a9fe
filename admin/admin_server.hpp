// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The admin HTTP port: a registry of handlers with help texts, Envoy-style, on kvrelay's own
// small server (admin/http_server.hpp: bounded header time, idle time, connections and bodies).
//   GET  /healthz          process alive (answered on the I/O thread: never waits for actors)
//   GET  /readyz           every pipeline decoded a batch (or caught up) and the server answered
//   GET  /readyz/self      kvrelay itself works (its actors answer); never depends on the engine
//                          or the server: the fail-open probe for a pod's readiness
//   GET  /metrics          Prometheus text
//   GET  /debug/tree       every actor: kind, state, mailbox, restarts, last error, uptime;
//                          engine discovery (what it asked, found, last error, retries)
//   GET  /debug/engines    per pipeline: endpoints, last seq, adapters, readiness
//   POST /debug/adapters   ?replica=R&id=N&name=S  adds a LoRA id → name mapping
//   POST /debug/crash      ?pipeline=P&actor=A     fault injection (config switch, off by default)
//   GET  /help             this list
// Every handler asks the daemon's root actor (daemon_client); none reads the daemon object.
// Loopback by default. Binding anything else requires a bearer token (from a file): POSTs and
// /debug/* without it get 401 before their body is read. With admin.public (auto: inside a
// Kubernetes pod) a loopback port is bound on every address instead, and a connection that did
// not arrive at a loopback address gets only /healthz, /readyz, /readyz/self and /metrics (403
// for the rest) unless a token is set, which then guards the rest as above.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "config/settings.hpp"
#include "supervision/daemon_actor.hpp"
#include "admin/http_server.hpp"

struct sockaddr;

namespace kvrelay {

class metrics_registry;
class memory_budget;

/// The admin port's limits from the configuration.
/// TODO(lead): the `config` engineer adds `[admin] max_connections`, `read_timeout`,
/// `idle_timeout` and `max_body_bytes`; map them here. Until then these are http_limits'
/// defaults (64, 5 s, 30 s, 64 KiB), the same as the keys' documented defaults.
http_limits admin_limits_from(const config::admin_settings& s);

class admin_server {
 public:
  /// What the handlers use: the root actor, the metrics registry (thread-safe), the start time.
  struct backend {
    daemon_client client;
    std::shared_ptr<metrics_registry> metrics;
    std::chrono::steady_clock::time_point started;
    std::shared_ptr<const memory_budget> budget;  // shown on /debug/tree (may be null)
  };

  explicit admin_server(backend b);
  ~admin_server();
  /// Resolves and binds `s.listen`, then serves on its own threads. False (with `error`) when
  /// it cannot resolve or bind, the token file is unusable, or a non-loopback address has no
  /// token.
  bool start(const config::admin_settings& s, const http_limits& limits, std::string& error);
  void stop();
  uint16_t port() const;
  /// What it listens on, e.g. "127.0.0.1:9464", or "[::]:9464 (every address: ...)" with
  /// admin.public; "off" when not started.
  std::string listening() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Whether the process runs in a Kubernetes pod: KUBERNETES_SERVICE_HOST is set (the kubelet
/// sets it in every container, service links or not).
bool in_kubernetes_pod();

/// admin.public: on, or auto inside a pod.
bool serves_public(config::admin_public p);

/// Resolves `host` (an address literal or a name) and says whether every address it resolves to
/// is loopback; a name that does not resolve is not. "127.attacker.example" is a name like any
/// other: only what it resolves to counts.
/// TODO(lead): the `config` engineer adds a pure loopback-resolution function in config/; use it
/// here (and in the loader's check) once it lands.
bool is_loopback_host(const std::string& host);

}  // namespace kvrelay
