// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The syntax of a DNS fan-out target, like gRPC's dns scheme: one parser, for the
// configuration's checks (config/) and the resolver (net/dns_resolver.hpp), so what the config
// accepts is what gets resolved.
//   dns:///policy.ns.svc:9090        the system resolver
//   dns:policy.ns.svc:9090           the same (gRPC's form without an authority)
//   dns://10.96.0.10/policy:9090     ask that nameserver directly (port 53)
//   dns://127.0.0.1:5353/policy:9090 the same on another port
// The name's port is required; the name may be an IP literal (`[v6]` bracketed), which resolves to
// itself.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvrelay {

struct dns_target {
  std::string nameserver;  // an IP literal (IPv6 without brackets); empty: the system resolver
  uint16_t nameserver_port = 53;
  std::string host;  // a DNS name or an IP literal (IPv6 without brackets)
  uint16_t port = 0;
};

/// True when `s` starts with "dns:" (case-sensitive, as gRPC's scheme).
bool is_dns_target(std::string_view s);

/// Parses a target; on failure nullopt, with `why` set to the reason alone (callers say which
/// setting or name it was).
std::optional<dns_target> parse_dns_target(std::string_view s, std::string& why);

/// "dns://ns:53/name:port" or "dns:///name:port": the form parse_dns_target reads back.
std::string to_string(const dns_target& t);

/// "host:port", or "[v6]:port" for an IPv6 literal.
std::string host_port_text(const std::string& host, uint16_t port);

/// An IPv4 or IPv6 address (the latter without brackets).
bool is_ip_literal(const std::string& s);

}  // namespace kvrelay
