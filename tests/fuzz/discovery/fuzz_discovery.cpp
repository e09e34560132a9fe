// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// libFuzzer target: the engine discovery parser on arbitrary answers. The first byte picks which
// answer the rest of the input is (and its status); the bodies come from an engine's HTTP server
// we do not control, so nothing here may crash, hang, throw or accept a non-dialable endpoint.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "actors/discovery/engine_discovery.hpp"

namespace {

using namespace kvrelay::discovery;

void check(std::string_view url, const kvrelay::outcome<discovered_engine>& r) {
  if (!r.ok()) {
    const std::string& why = r.error().context;
    if (why.empty() || why.size() > 4096) __builtin_trap();
    // The parser's catch-all for an exception: reaching it means a missed type check.
    if (why.rfind("engine " + std::string(url) + ": answer not understood: ", 0) == 0) {
      __builtin_trap();
    }
    return;
  }
  const auto& e = r.value();
  if (e.publishers.empty() || e.publishers.size() > 1024) __builtin_trap();
  for (std::size_t i = 0; i < e.publishers.size(); ++i) {
    const auto& p = e.publishers[i];
    // tcp://host:port with a dialable host and a port 1..65535.
    if (p.endpoint.rfind("tcp://", 0) != 0) __builtin_trap();
    const std::size_t colon = p.endpoint.rfind(':');
    const std::string host = p.endpoint.substr(6, colon - 6);
    const std::string port = p.endpoint.substr(colon + 1);
    if (host.empty() || host == "*" || host == "0.0.0.0" || host == "[::]") __builtin_trap();
    if (port.empty() || port.size() > 5 || port[0] == '0' || std::stol(port) > 65535) {
      __builtin_trap();
    }
    if (i > 0 && p.dp_rank <= e.publishers[i - 1].dp_rank) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const int status = (pick & 0x10) ? 404 : 200;
  engine_answers a;
  switch (pick % 3) {
    case 0:
      a.kv_event_sources = http_answer{"/kv_event_sources", status, body, ""};
      a.server_info = http_answer{"/server_info", 200, body, ""};
      break;
    case 1:
      a.kv_event_sources = http_answer{"/kv_event_sources", 404, "", ""};
      a.server_info = http_answer{"/server_info", status, body, ""};
      break;
    default:
      a.kv_event_sources =
          http_answer{"/kv_event_sources", 200, R"({"0":{"endpoint":"tcp://*:1"}})", ""};
      a.models = http_answer{"/v1/models", status, body, ""};
      break;
  }
  const std::string_view url = (pick & 0x20) ? "http://[::1]:8000" : "http://10.0.0.5:8000/p";
  check(url, discover(url, a));
  return 0;
}
