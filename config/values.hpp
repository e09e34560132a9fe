// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Parsers and checks for the value kinds configuration uses, shared by the TOML loader and the
// flag parser so a value means the same thing on both paths. Each returns an error text (empty
// when fine) rather than throwing: every input here is untrusted.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvrelay::config {

/// Go `time.ParseDuration` syntax: an optional sign, then one or more <decimal><unit> with units
/// ns, us (µs, μs), ms, s, m, h ("100ms", "1h30m", "-1.5s", ".5s"); "0" alone is allowed. Kept at
/// millisecond resolution: truncated toward zero, except that a positive value under 1 ms becomes
/// 1 ms so a positive duration never turns into a clamped 0.
std::string parse_duration(std::string_view s, std::chrono::milliseconds& out);
/// The same at Go's own resolution (nanoseconds, truncated toward zero): the test tools' flags.
std::string parse_duration(std::string_view s, std::chrono::nanoseconds& out);

/// The shortest text parse_duration reads back to the same value: "100ms", "10s", "1m30s", "0s".
std::string format_duration(std::chrono::milliseconds d);

/// Go `strconv.ParseInt(s, 0, 64)` (what flag.Int/Int64 use): optional sign, 0x / 0o / 0b / 0
/// prefixes, underscores between digits.
std::string parse_go_int(std::string_view s, int64_t& out);

/// Go `strconv.ParseBool`: 1 t T TRUE true True 0 f F FALSE false False.
std::string parse_go_bool(std::string_view s, bool& out);

/// A byte count: digits, or a decimal number with a unit B, KB, MB, GB, TB (powers of 1000) or
/// KiB, MiB, GiB, TiB (powers of 1024), units case-insensitive ("16GiB", "1.5 GB"). >= 0.
std::string parse_size(std::string_view s, int64_t& out);

/// A ZeroMQ endpoint kvrelay can subscribe to: tcp://host:port (host a name, an IPv4 address,
/// [IPv6] or *; port 1-65535), ipc://path or inproc://name.
std::string check_endpoint(std::string_view s);

/// An http:// or https:// URL with a host and an optional port 1-65535.
std::string check_url(std::string_view s);

/// A listen address host:port (host may be empty for every interface; port 0-65535).
std::string check_listen_address(std::string_view s);

/// Whether a listen host is a loopback address, decided on the address, never on a prefix of
/// the text: an IPv4 literal in 127.0.0.0/8, ::1, an IPv4-mapped ::ffff:127.x.y.z, with or
/// without [brackets], or the name "localhost" (RFC 6761 reserves it for loopback). Any other
/// name ("127.attacker.example"), "", "0.0.0.0", "::" and forms inet_pton does not take
/// ("127.1", zone ids) are not: a false "no" only asks for a token, a false "yes" would open
/// the port. Pure: no DNS.
bool is_loopback_host(std::string_view host);

/// The host part of a listen address that passed check_listen_address, brackets removed.
std::string_view listen_host(std::string_view listen);

/// A gRPC target: host:port (port 1-65535, [IPv6] allowed) or a scheme-qualified target
/// (dns:, unix:, unix-abstract:, ipv4:, ipv6:).
std::string check_grpc_target(std::string_view s);

/// A policy server target (server.address, each server.targets entry, --server): what
/// check_grpc_target takes, and a dns: target must name a host and a port, with or without the
/// DNS server to ask: "dns:///name:port", "dns:name:port" or "dns://NS_IP:NS_PORT/name:port"
/// (NS_IP an IPv4 literal or [IPv6]).
std::string check_policy_target(std::string_view s);

/// The endpoint of data-parallel rank `rank`, the way engines derive it (docs/spec/engine-wire.md
/// §1): tcp port + rank; inproc://x → inproc://x_dp<rank>; ipc cannot be ranked (error). Rank 0
/// is the endpoint itself. Assumes check_endpoint passed.
std::string rank_endpoint(const std::string& endpoint, int64_t rank, std::string& out);

}  // namespace kvrelay::config
