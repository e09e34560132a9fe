// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter's gRPC client to the cache-policy server (docs/spec/policy-contract.md §2).
//
// A plain class (no CAF) so the emitter actor can own it and the tests can drive it directly.
// Every call is asynchronous: `report`, `report_encoded` and `publish` return at once and
// complete on the process's completion thread, which must only hand the result back (anon_send),
// never touch actor state.
// The client never retries (the reference does not either, R14): a failed call is reported once
// and the owner decides what to do.
//
// gRPC headers stay out of this header on purpose: actor code includes it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/emitter/unit_sequencer.hpp"

namespace inferencecache::v1alpha1 {
class CacheStateUpdate;
class CacheEvent;
}  // namespace inferencecache::v1alpha1

namespace kvrelay {

/// How to reach the policy server.
/// Transport: plaintext when `ca_file` is empty; TLS (server authentication against `ca_file`)
/// when it is set; mutual TLS when `cert_file` and `key_file` are set as well.
struct client_options {
  /// host:port (or any gRPC target URI).
  std::string target = "127.0.0.1:9090";
  /// Deadline of every call, measured from the moment it is issued.
  std::chrono::milliseconds rpc_timeout{5000};
  /// TLS with the system's root certificates even without `ca_file` (`[server] tls = true`).
  bool tls = false;
  /// PEM file of the CA(s) that signed the server's certificate; enables TLS.
  std::string ca_file;
  /// PEM client certificate chain and its private key; both or neither; they need `ca_file`.
  std::string cert_file, key_file;
  /// Overrides the name checked against the server certificate (default: the target's host).
  std::string server_name;
  /// Cap on gRPC's reconnect backoff. gRPC's own default grows to 120 s, which would leave the
  /// emitter failing fast for up to two minutes after the server comes back; with 5 s a 60 s
  /// outage took 2.6 s from the server's return to an exact index (BENCHMARKS.md, outage), most
  /// of it waiting for the next attempt. One connection attempt a second costs a dead server
  /// nothing.
  std::chrono::milliseconds max_reconnect_backoff{1000};
  /// HTTP/2 keepalive pings, also while no call is in flight, so a peer that vanished without
  /// closing the connection is noticed (the channel then leaves READY); 0 turns them off. gRPC
  /// sends at most two pings in a row without other traffic, and servers refuse pings more often
  /// than every 5 min when no call is open: see docs/operations.md.
  std::chrono::milliseconds keepalive_time{20000};
  /// How long a keepalive ping may go unanswered before the transport is declared dead.
  std::chrono::milliseconds keepalive_timeout{10000};
};

/// The messages of one ReportCacheState stream, produced one at a time: policy_client::encode
/// serializes each before it asks for the next, so the producer can reuse one message.
class update_source {
 public:
  virtual ~update_source() = default;
  /// The next message, or nullptr when the stream is complete. The pointer stays valid until
  /// the next call or the source's destruction.
  virtual const inferencecache::v1alpha1::CacheStateUpdate* next() = 0;
};

/// The messages of one ReportCacheState stream already in wire form, one at a time
/// (unit_wire.hpp writes a unit's).
class wire_source {
 public:
  virtual ~wire_source() = default;
  /// The size of the next message, 0 when the stream is complete.
  virtual std::size_t next_size() = 0;
  /// Writes that message, exactly next_size() bytes, to `out`.
  virtual void write(std::uint8_t* out) = 0;
};

/// The serialized messages of one ReportCacheState stream (gRPC byte buffers; opaque here).
/// Immutable once encoded: any number of clients may send it at the same time, which is how a
/// unit offered to several policy servers is serialized once.
struct encoded_stream;

/// The outcome of one call. `done` callbacks receive exactly one of these.
struct rpc_result {
  /// grpc::StatusCode: 0 OK, 1 CANCELLED, 4 DEADLINE_EXCEEDED, 14 UNAVAILABLE, ...
  int code = 0;
  /// The status message ("" on success).
  std::string message;
  /// Ack.accepted; false whenever code != 0.
  bool accepted = false;
  /// From issuing the call to its completion.
  std::chrono::microseconds latency{0};
};

class policy_client {
 public:
  using callback = std::function<void(rpc_result)>;

  /// Checks `opts` without touching the network: target non-empty, timeout positive, TLS files
  /// present, readable, PEM, and consistent. Returns "" when valid, else a one-line reason.
  static std::string validate(const client_options& opts);

  /// Builds a client (the channel connects lazily, or on try_connect()). Returns nullptr and
  /// sets `error` when `validate` fails or a TLS file cannot be read; never throws.
  static std::unique_ptr<policy_client> make(const client_options& opts, std::string& error);

  /// Cancels every call in flight (each completes with code 1 CANCELLED) and returns only once
  /// each callback has returned, so none can run after destruction. Those callbacks may run on
  /// the destroying thread itself. Must not be called from inside any client's callback (the
  /// shared completion thread would wait for itself): that aborts with a message. Takes about
  /// as long as gRPC needs to cancel: well under a millisecond per call here, with no network
  /// round trip.
  ~policy_client();

  policy_client(const policy_client&) = delete;
  policy_client& operator=(const policy_client&) = delete;

  /// ReportCacheState: opens a new client stream, writes `msg` as its only message, half-closes
  /// and waits for the Ack. `done` runs exactly once, on the completion thread every client of
  /// the process shares (started by the first call or watch_connectivity of any, blocked while
  /// nothing completes, joined when the last client that used it is destroyed), so callbacks
  /// must be short; when `msg` is null, at once on the caller's thread with code 3
  /// INVALID_ARGUMENT.
  void report(std::shared_ptr<const inferencecache::v1alpha1::CacheStateUpdate> msg,
              callback done);

  /// Serializes every message `src` produces, in order. Never null; a source with no message
  /// gives an empty stream.
  static std::shared_ptr<const encoded_stream> encode(update_source& src);
  /// The same from messages already in wire form: each written straight into its buffer.
  static std::shared_ptr<const encoded_stream> encode(wire_source& src);
  /// The number of messages and the bytes they take.
  static std::size_t messages_in(const encoded_stream& s);
  static std::size_t bytes_in(const encoded_stream& s);

  /// ReportCacheState with `s`'s messages in order, the last one carrying the half-close, then
  /// the Ack. A null or empty stream completes at once, on the caller's thread, with code 3
  /// INVALID_ARGUMENT and no call. Otherwise the same completion rules as `report`.
  void report_encoded(std::shared_ptr<const encoded_stream> s, callback done);

  /// PublishEvent (unary). Same completion rules as `report`.
  void publish(std::shared_ptr<const inferencecache::v1alpha1::CacheEvent> ev, callback done);
  /// The same; `ev` is serialized before this returns, so the caller may reuse it at once.
  void publish(const inferencecache::v1alpha1::CacheEvent& ev, callback done);

  /// Calls issued whose callback has not returned yet.
  std::size_t in_flight() const;

  /// The channel's connectivity state: "IDLE", "CONNECTING", "READY", "TRANSIENT_FAILURE" or
  /// "SHUTDOWN". Does not trigger a connection.
  std::string channel_state() const;

  /// The same as an enum.
  emitter::channel_state state() const;

  /// Asks an idle channel to start connecting (e.g. at startup, so /readyz can turn green
  /// before the first flush). Never blocks.
  void try_connect();

  /// Follows the channel's connectivity on the shared completion thread (the one every call
  /// completes on): `on_change` runs there with the current state, then with every change. The
  /// watch also asks an IDLE channel to connect, so a transport that was lost comes back even
  /// while no call is made. Once per client; the destructor stops it (within ~1 s).
  void watch_connectivity(std::function<void(emitter::channel_state)> on_change);

  /// The options this client was built with.
  const client_options& options() const;

  /// The deadline of the calls issued from now on (clamped to [1 ms, 1 h]); calls in flight
  /// keep theirs. Starts as options().rpc_timeout. Any thread.
  void set_rpc_timeout(std::chrono::milliseconds t);

 private:
  struct impl;
  explicit policy_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay
