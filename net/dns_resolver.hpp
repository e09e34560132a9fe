// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// DNS fan-out: one name, typically a Kubernetes headless Service, resolved to every A
// and AAAA record it has, each address a policy-server target. Target syntax follows gRPC's dns
// resolver (base/dns_target.hpp parses it, for the config's checks too):
//
//   dns:///policy.ns.svc:9090        the system resolver (getaddrinfo: /etc/hosts, resolv.conf
//   dns:policy.ns.svc:9090           search domains, ndots), as a pod expects
//   dns://10.96.0.10/policy:9090     ask that nameserver directly (port 53), over UDP
//   dns://127.0.0.1:5353/policy:9090 the same on another port (tests run their own server)
//
// The port of the name is required (no default for a policy server). With a nameserver, the name
// is sent as given: no search domains, so it should be fully qualified.
//
// The client with a nameserver is ours, and small: one A and one AAAA query (recursion desired,
// EDNS0 with a 4096-byte UDP payload so ~250 records fit, a fresh random id each), each sent again
// once halfway through the timeout if unanswered (always once: a late wake-up still sends it
// before giving up); answers with another id are ignored (a late or spoofed packet). No TCP
// fallback: an answer truncated by the server (TC) still yields the records it carries, and is
// an error only when it carries none. The answer parser is a pure function,
// tested on hand-built packets and fuzzed (tests/fuzz/dns): every read is bounds-checked, and a
// malformed answer is an error, never a crash.
//
// No CAF, no sockets in the header; resolve() blocks, so callers run it off their actor thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dns_target.hpp"

namespace kvrelay::net {

struct resolve_result {
  std::vector<std::string> addresses;
  std::string error;
};

/// Blocking; callers run it off their actor thread. Every A and AAAA record, each as
/// "1.2.3.4:PORT" or "[::1]:PORT", sorted and unique. Empty addresses + error on failure
/// (NXDOMAIN, timeout, malformed answer: the error says which).
///
/// The system resolver has no timeout of its own: it runs on a helper thread that is abandoned
/// (and finishes on its own) if it outlives `timeout`. A name that exists with no address (NODATA
/// for both queries) is a failure too: a target list is never silently emptied without a reason.
resolve_result resolve(const dns_target& t, std::chrono::milliseconds timeout);

// -- the wire format, pure (RFC 1035 §4.1; AAAA: RFC 3596; EDNS0: RFC 6891) ---------------------

inline constexpr uint16_t dns_type_a = 1;
inline constexpr uint16_t dns_type_cname = 5;
inline constexpr uint16_t dns_type_aaaa = 28;

/// A query for `name` (dotted, a trailing dot allowed) of type `qtype`, class IN, RD set, with an
/// EDNS0 OPT record. Empty if the name cannot be encoded (an empty label, a label over 63 bytes,
/// over 255 bytes in all); `error` says why.
std::vector<uint8_t> build_dns_query(uint16_t id, std::string_view name, uint16_t qtype,
                                     std::string& error);

struct dns_answer {
  /// The packet is an answer to the query with that id. False: not ours (too short to carry an
  /// id, not a response, another id); a client ignores it and keeps waiting.
  bool ours = false;
  /// The answer was read and its RCODE is NOERROR (addresses may be empty: NODATA).
  bool ok = false;
  uint8_t rcode = 0;  // 3 = NXDOMAIN
  bool truncated = false;  // TC: the server cut the answer to fit the UDP payload
  /// Text of every A and AAAA record of the answer section ("10.0.0.1", "fd00::1"), in packet
  /// order, whatever the owner name (a CNAME chain's records are taken as the server sent them).
  std::vector<std::string> addresses;
  std::string error;  // set when !ok: which rule failed, with the offset where it matters
};

/// Reads an answer to the query `expected_id` asked for `expected_qtype` (the question section's
/// type must match, when it has one). Bounds-checked on every read; name compression pointers must
/// point strictly backwards from the previous one (no loops) and a name stays within 255 bytes.
/// Only the header, question and answer sections are read.
dns_answer parse_dns_answer(const uint8_t* data, std::size_t size, uint16_t expected_id,
                            uint16_t expected_qtype);

}  // namespace kvrelay::net
