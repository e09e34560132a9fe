// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// An in-process inferencecache.v1alpha1.InferenceCache server over a policy_index, for tests,
// benchmarks and the demo. All eight RPCs answer (the four the daemon never calls answer minimal
// valid responses). While it runs it sweeps the index every sweep interval, as the reference's
// index does (stale entries stay counted until then). Fault hooks: stop/restart (optionally
// empty) on the same port, a "black hole" mode in which the server accepts connections and
// calls but never answers until released, and an ingest delay per message (a slow server).
// gRPC headers stay in the .cpp.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tools/policy-server/policy_index.hpp"

namespace kvrelay::policy {

struct tls_options {
  std::string cert_pem;        // server certificate chain
  std::string key_pem;         // server private key
  std::string client_ca_pem;   // non-empty: verify client certificates against it (mTLS)
  bool require_client_cert = false;
};

struct server_options {
  std::string listen = "127.0.0.1:0";  // port 0 = ephemeral; see port()
  std::optional<tls_options> tls;      // plaintext when absent
  index_options index;  // ttl_us: the freshness TTL
  /// The TTL sweep period while the server runs; 0 turns the periodic sweep off (tests that call
  /// index().sweep() themselves), a negative value means the default.
  int64_t sweep_interval_us = default_sweep_interval_us;
};

struct call_counters {
  uint64_t report_streams = 0;
  uint64_t report_messages = 0;
  uint64_t publish = 0;
  uint64_t lookup = 0;
  uint64_t get_state = 0;
  uint64_t other = 0;          // RenderTemplate, LookupPDRoute, the two streams
  uint64_t black_holed = 0;    // calls that were held by black-hole mode
};

class policy_server {
 public:
  explicit policy_server(server_options opt = {});
  ~policy_server();  // stops
  policy_server(const policy_server&) = delete;
  policy_server& operator=(const policy_server&) = delete;

  /// Binds and serves; false when the address cannot be bound (or it is already running).
  bool start();
  /// Shuts down (held black-hole calls are released first); the index is kept.
  void stop();
  /// stop() then start() on the same port; empty_index forgets everything it was told.
  bool restart(bool empty_index = true);
  bool running() const;

  /// The bound port (valid after a successful start; kept across stop for restart).
  int port() const;
  /// "127.0.0.1:<port>" style target for a client channel.
  std::string target() const;

  /// While on, every RPC blocks (never answering) until turned off, the client cancels or the
  /// server stops.
  void set_black_hole(bool on);
  /// Calls currently held by black-hole mode.
  size_t held_calls() const;
  /// A slow server: every ReportCacheState message and PublishEvent is applied, then takes
  /// this long before the next message is read or the call answered, as with the reference,
  /// which ingests a message and then walks every key of its index. A client whose deadline is
  /// shorter sees DEADLINE_EXCEEDED for calls whose content the server did apply. 0: off.
  void set_ingest_delay(std::chrono::milliseconds d);

  policy_index& index();
  call_counters calls() const;

  /// Blocks until stop() is called from another thread (the executable's main loop).
  void wait();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay::policy
