// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// libFuzzer target: the DNS answer parser and the target syntax (net/dns_resolver.hpp). Answers
// come off the network from whoever can reach our UDP port, so nothing here may crash, hang,
// overread or accept a record it cannot print. The first byte picks what the rest is:
//   bit 7 clear: a DNS answer; the expected id is the packet's own (bit 0 set: another one), the
//                expected type A (bit 1 set: AAAA);
//   bit 7 set:   a target string (parsed, printed, parsed again) and a name to encode.
#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/dns_resolver.hpp"

namespace {

using namespace kvrelay;
using namespace kvrelay::net;

void check_answer(const uint8_t* data, size_t size, uint8_t pick) {
  uint16_t id = size >= 2 ? static_cast<uint16_t>((data[0] << 8) | data[1]) : 0;
  if (pick & 0x01) id = static_cast<uint16_t>(id + 1);
  const uint16_t qtype = (pick & 0x02) ? dns_type_aaaa : dns_type_a;
  const dns_answer a = parse_dns_answer(data, size, id, qtype);
  if (a.ok != a.error.empty()) __builtin_trap();  // ok exactly when there is no error
  if (!a.ok && !a.addresses.empty()) __builtin_trap();
  if (!a.ours && a.ok) __builtin_trap();
  if ((pick & 0x01) && size >= 12 && a.ours) __builtin_trap();
  if (a.error.size() > 512) __builtin_trap();
  if (a.addresses.size() > size / 11) __builtin_trap();  // a record takes 11 bytes at least
  for (const auto& s : a.addresses) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, s.c_str(), buf) != 1 && inet_pton(AF_INET6, s.c_str(), buf) != 1) {
      __builtin_trap();
    }
  }
}

void check_target(std::string_view text) {
  std::string err;
  const auto t = parse_dns_target(text, err);
  if (!t) {
    if (err.empty()) __builtin_trap();  // a refusal always says why
  } else {
    if (t->port == 0 || t->host.empty()) __builtin_trap();
    std::string err2;
    const auto again = parse_dns_target(to_string(*t), err2);
    if (!again || again->host != t->host || again->port != t->port ||
        again->nameserver != t->nameserver || again->nameserver_port != t->nameserver_port) {
      __builtin_trap();
    }
  }
  err.clear();
  const std::vector<uint8_t> q = build_dns_query(0x1234, text, dns_type_a, err);
  if (q.empty() && err.empty()) __builtin_trap();  // empty only with a reason
  if (!q.empty()) {
    if (q.size() > 12 + 255 + 4 + 11) __builtin_trap();
    if (parse_dns_answer(q.data(), q.size(), 0x1234, dns_type_a).ours) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  if (pick & 0x80) {
    check_target(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  } else {
    check_answer(data + 1, size - 1, pick);
  }
  return 0;
}
