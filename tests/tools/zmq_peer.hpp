// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Raw ZMQ peers of the fake engine for tests: a SUB, a replay DEALER, the slow-joiner publish loop
// (docs/spec/engine-wire.md §1 framing). An IPv6 endpoint turns the socket's IPv6 mode on.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "tools/fake-engine/publisher.hpp"

namespace kvrelay::fake {

inline std::string be8(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return out;
}
inline const std::string END(8, '\xff');

inline std::vector<std::string> recv_all(zmq::socket_t& s) {
  std::vector<std::string> frames;
  while (true) {
    zmq::message_t m;
    if (!s.recv(m)) return {};  // timeout
    frames.emplace_back(static_cast<const char*>(m.data()), m.size());
    if (!m.more()) return frames;
  }
}

// A subscriber and replay client against the fake engine's sockets.
struct zmq_peer {
  zmq::context_t ctx{1};

  zmq::socket_t sub(const std::string& endpoint, const std::string& prefix) {
    zmq::socket_t s(ctx, zmq::socket_type::sub);
    if (endpoint.rfind("tcp://[", 0) == 0) s.set(zmq::sockopt::ipv6, 1);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 50);
    s.set(zmq::sockopt::subscribe, prefix);
    s.connect(endpoint);
    return s;
  }
  zmq::socket_t dealer(const std::string& endpoint) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    if (endpoint.rfind("tcp://[", 0) == 0) s.set(zmq::sockopt::ipv6, 1);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 2000);
    s.connect(endpoint);
    return s;
  }
  // Sends a DEALER replay request ["", start] and collects replies up to the END marker.
  std::vector<std::vector<std::string>> replay(zmq::socket_t& d, uint64_t start) {
    d.send(zmq::message_t(), zmq::send_flags::sndmore);
    d.send(zmq::buffer(be8(start)), zmq::send_flags::none);
    std::vector<std::vector<std::string>> replies;
    for (int i = 0; i < 100000; ++i) {
      auto r = recv_all(d);
      if (r.empty()) {
        ADD_FAILURE() << "replay timed out";
        break;
      }
      replies.push_back(r);
      if (r.size() >= 2 && r[r.size() - 2] == END) break;
    }
    return replies;
  }
  // PUB/SUB slow joiner: publish until the subscriber sees a message (bounded).
  std::vector<std::string> join(publisher& p, zmq::socket_t& s, const std::string& payload) {
    for (int i = 0; i < 100; ++i) {
      p.publish(payload);
      auto frames = recv_all(s);
      if (!frames.empty()) return frames;
    }
    return {};
  }
};

struct zmq_fixture : ::testing::Test, zmq_peer {};

}  // namespace kvrelay::fake
