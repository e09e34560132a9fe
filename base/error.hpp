// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// kvrelay's one error type: a stable code plus a one-line context. Codes never change meaning
// once released (logs, /debug/tree and alerts quote them). messages/fwd.hpp registers the enum
// with CAF (CAF_ERROR_CODE_ENUM), so an actor's exit reason or a failed request carries these
// codes; pure code returns `outcome<T>` / `failure` without any CAF in sight.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kvrelay {

enum class ec : uint8_t {
  no_error = 0,
  unspecified,
  /// A configuration value (file, flag, runtime request) is invalid.
  invalid_config,
  /// An engine endpoint cannot be bound or dialed.
  endpoint_unusable,
  /// The ZMQ thread of an ingress ended on an error.
  source_failed,
  /// An RPC to the policy server failed (context: gRPC code and message).
  rpc_failed,
  /// Fault injection through the admin port.
  crash_requested,
  /// A drain did not finish within its deadline.
  drain_timeout,
  /// An engine's discovery endpoint did not answer, or answered something not understood.
  discovery_failed,
  /// An admin request is malformed or names nothing that exists.
  bad_request,
  /// A child of a supervisor is not running.
  not_running,
};

/// The code's stable name, e.g. "rpc_failed".
const char* to_string(ec code) noexcept;

/// An error with its context: what to show an operator in one line.
struct failure {
  ec code = ec::unspecified;
  std::string context;
  /// The log line's message when it must be a fixed text rather than the code's name (e.g. the
  /// reference's "invalid --cache-tier"; the context then goes in a field). "" = none.
  std::string headline;

  /// "rpc_failed: UNAVAILABLE: connection refused".
  std::string render() const;
};

/// A value or the failure that prevented it (the pure-code form of caf::expected<T>).
template <class T>
class outcome {
 public:
  outcome(T value) : v_(std::move(value)) {}   // NOLINT: implicit by design
  outcome(failure f) : v_(std::move(f)) {}     // NOLINT
  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const failure& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, failure> v_;
};

/// Success, or the failure that prevented it.
template <>
class outcome<void> {
 public:
  outcome() = default;
  outcome(failure f) : f_(std::move(f)) {}  // NOLINT: implicit by design
  bool ok() const noexcept { return !f_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  const failure& error() const { return *f_; }

 private:
  std::optional<failure> f_;
};

}  // namespace kvrelay
