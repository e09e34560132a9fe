// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/fake-engine/publisher.hpp"

#include <zmq.hpp>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kvrelay::fake {
namespace {

std::string be8(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

uint64_t from_be8(const void* data) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

std::string last_endpoint(zmq::socket_t& s) {
  return s.get(zmq::sockopt::last_endpoint);
}

// An IPv6 literal needs the socket's IPv6 mode; IPv4 endpoints keep the default so a wildcard
// bind stays what it was.
void bind_endpoint(zmq::socket_t& s, const std::string& endpoint) {
  if (endpoint.rfind("tcp://[", 0) == 0) s.set(zmq::sockopt::ipv6, 1);
  s.bind(endpoint);
}

}  // namespace

std::optional<std::string> dp_endpoint(const std::string& endpoint, int rank) {
  if (rank == 0) return endpoint;
  if (rank < 0) return std::nullopt;
  if (endpoint.rfind("inproc://", 0) == 0) return endpoint + "_dp" + std::to_string(rank);
  if (endpoint.rfind("tcp://", 0) != 0) return std::nullopt;
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < 6) return std::nullopt;
  const std::string port = endpoint.substr(colon + 1);
  // Ephemeral ('*', or 0 as vLLM writes it): every rank asks the OS for its own port. Offsetting
  // 0 would bind the literal ports 1, 2, ... (the bug vllm-project/vllm #55844 fixed).
  if (port == "*" || port == "0") return endpoint;
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const long p = std::stol(port) + rank;
  if (p > 65535) return std::nullopt;
  return endpoint.substr(0, colon + 1) + std::to_string(p);
}

struct publisher::impl {
  publisher_options opt;
  zmq::context_t ctx{1};
  zmq::socket_t pub;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  bool has_replay = false;
  std::string live_ep, replay_ep;

  mutable std::mutex mu;  // guards pub, seq, ring, stats
  uint64_t seq = 0;
  // Payloads shared, not copied, with a reply being sent: vLLM serves a replay from its deque,
  // and a copy of a 10 000-batch ring per request (hundreds of MB) took the caches from the
  // consumer under test on the same cores.
  using payload_ptr = std::shared_ptr<const std::string>;
  std::deque<std::pair<uint64_t, payload_ptr>> ring;
  counters stats;

  bool subscribed = false;  // xpub: a subscription arrived
  std::optional<uint64_t> last_framed;  // the last seq publish_frames() sent

  // Into the ring in seq order; a seq already there stays as it was. mu held.
  void insert(uint64_t s, std::string payload) {
    auto it = std::lower_bound(ring.begin(), ring.end(), s,
                               [](const auto& entry, uint64_t v) { return entry.first < v; });
    if (it != ring.end() && it->first == s) return;
    ring.emplace(it, s, std::make_shared<const std::string>(std::move(payload)));
    while (ring.size() > opt.buffer_steps) ring.pop_front();
  }

  std::atomic<bool> stopping{false};
  std::thread replay_thread;
  bool stopped = false;

  void serve_replay();
  void answer(const std::vector<zmq::message_t>& request);
};

void publisher::impl::answer(const std::vector<zmq::message_t>& request) {
  // ROUTER view: [identity, "", start_seq BE8]. Anything else is ignored without a reply, as
  // the engines do (a REQ client then hangs; that is the real behaviour).
  if (request.size() != 3 || request[1].size() != 0 || request[2].size() != 8) {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.ignored_requests;
    return;
  }
  const uint64_t start = from_be8(request[2].data());
  const std::string identity(static_cast<const char*>(request[0].data()), request[0].size());
  std::vector<std::pair<uint64_t, payload_ptr>> batches;
  {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.replay_requests;
    for (const auto& entry : ring) {
      if (entry.first >= start) batches.push_back(entry);
    }
    stats.replay_batches += batches.size();
  }
  // One message: identity, delimiter, [topic,] seq, payload. With ROUTER_MANDATORY a full queue
  // refuses the identity frame (nothing of the message is queued): the engines' silent drop,
  // which we can count; lossless mode waits for room instead.
  uint64_t dropped = 0;
  bool gone = false;  // the requester disconnected: the rest goes nowhere
  auto send_reply = [&](const std::string& topic, const std::string& seq_frame,
                        const std::string& payload) {
    if (gone) {
      ++dropped;
      return;
    }
    try {
      while (!router.send(zmq::buffer(identity), zmq::send_flags::sndmore |
                                                      zmq::send_flags::dontwait)) {
        if (!opt.replay_lossless || stopping.load(std::memory_order_relaxed)) {
          ++dropped;
          return;
        }
        // POLLOUT on a ROUTER says "some peer has room", not ours: just wait a little.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } catch (const zmq::error_t& e) {
      if (e.num() != EHOSTUNREACH) throw;
      gone = true;
      ++dropped;
      return;
    }
    router.send(zmq::message_t(), zmq::send_flags::sndmore);
    if (opt.replay_topic_frames) router.send(zmq::buffer(topic), zmq::send_flags::sndmore);
    router.send(zmq::buffer(seq_frame), zmq::send_flags::sndmore);
    router.send(zmq::buffer(payload), zmq::send_flags::none);
  };
  for (const auto& [s, payload] : batches) send_reply(opt.topic, be8(s), *payload);
  send_reply(std::string(), std::string(8, '\xff'), std::string());  // END: -1 as signed BE8, empty payload
  std::lock_guard<std::mutex> lock(mu);
  stats.replay_dropped += dropped;
  ++stats.replies_done;
}

void publisher::impl::serve_replay() {
  try {
    while (!stopping.load(std::memory_order_relaxed)) {
      zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> request;
      while (true) {
        zmq::message_t frame;
        if (!router.recv(frame, zmq::recv_flags::dontwait)) break;
        const bool more = frame.more();
        // Bound what a peer can make us hold: a request has 3 frames; drain the rest.
        if (request.size() < 8) request.push_back(std::move(frame));
        if (!more) break;
      }
      if (!request.empty()) answer(request);
    }
  } catch (const zmq::error_t&) {
    // Context terminated while stopping: nothing left to serve.
  }
}

publisher::publisher(publisher_options opt) : impl_(std::make_unique<impl>()) {
  auto& d = *impl_;
  d.opt = std::move(opt);
  d.pub = zmq::socket_t(d.ctx, d.opt.xpub ? zmq::socket_type::xpub : zmq::socket_type::pub);
  if (d.opt.buffer_steps == 0) d.opt.buffer_steps = 1;
  const auto live = dp_endpoint(d.opt.bind, d.opt.dp_rank);
  if (!live) throw std::runtime_error("cannot offset endpoint by DP rank: " + d.opt.bind);
  d.pub.set(zmq::sockopt::sndhwm, d.opt.sndhwm);
  d.pub.set(zmq::sockopt::linger, d.opt.linger_ms);
  try {
    bind_endpoint(d.pub, *live);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind " + *live + ": " + e.what());
  }
  d.live_ep = last_endpoint(d.pub);
  if (!d.opt.replay_bind.empty()) {
    const auto rep = dp_endpoint(d.opt.replay_bind, d.opt.dp_rank);
    if (!rep) throw std::runtime_error("cannot offset endpoint by DP rank: " + d.opt.replay_bind);
    d.router.set(zmq::sockopt::linger, 0);
    d.router.set(zmq::sockopt::sndhwm, d.opt.replay_sndhwm);
    d.router.set(zmq::sockopt::router_mandatory, 1);  // see answer(): counts the silent drops
    try {
      bind_endpoint(d.router, *rep);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("cannot bind " + *rep + ": " + e.what());
    }
    d.replay_ep = last_endpoint(d.router);
    d.has_replay = true;
    for (auto& [seq, payload] : d.opt.history) d.insert(seq, std::move(payload));
    d.opt.history.clear();
    d.replay_thread = std::thread([&d] { d.serve_replay(); });
  }
}

publisher::~publisher() { stop(); }

const std::string& publisher::live_endpoint() const noexcept { return impl_->live_ep; }
const std::string& publisher::replay_endpoint() const noexcept { return impl_->replay_ep; }

uint64_t publisher::publish(const std::string& payload, bool retain) {
  auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  const uint64_t s = d.seq++;
  if (d.stopped) return s;
  if (d.opt.unsequenced) {
    if (!d.opt.topic.empty()) d.pub.send(zmq::buffer(d.opt.topic), zmq::send_flags::sndmore);
    d.pub.send(zmq::buffer(payload), zmq::send_flags::none);
    ++d.stats.published;
    return s;
  }
  d.pub.send(zmq::buffer(d.opt.topic), zmq::send_flags::sndmore);
  d.pub.send(zmq::buffer(be8(s)), zmq::send_flags::sndmore);
  d.pub.send(zmq::buffer(payload), zmq::send_flags::none);
  ++d.stats.published;
  if (retain) {
    d.ring.emplace_back(s, std::make_shared<const std::string>(payload));
    while (d.ring.size() > d.opt.buffer_steps) d.ring.pop_front();
  }
  return s;
}

void publisher::publish_frames(const std::vector<std::string_view>& frames, bool retain) {
  auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.stopped || frames.empty()) return;
  for (size_t i = 0; i < frames.size(); ++i)
    d.pub.send(zmq::buffer(frames[i].data(), frames[i].size()),
               i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  ++d.stats.published;
  if (frames.size() != 3 || frames[1].size() != 8) return;
  const uint64_t s = from_be8(frames[1].data());
  if (s == ~uint64_t{0}) return;
  if (d.last_framed && s < *d.last_framed) d.ring.clear();  // a new incarnation
  d.last_framed = s;
  d.seq = s + 1;
  if (retain) d.insert(s, std::string(frames[2]));
}

void publisher::retain(uint64_t seq, std::string payload) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->insert(seq, std::move(payload));
}

bool publisher::wait_for_subscriber(std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (!d.opt.xpub) return false;
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(d.mu);
      if (d.stopped) return false;
      zmq::message_t m;
      // XPUB hands up [0x01 topic] for a subscription, [0x00 topic] for its end.
      while (d.pub.recv(m, zmq::recv_flags::dontwait))
        if (m.size() >= 1 && m.data<unsigned char>()[0] == 1) d.subscribed = true;
      if (d.subscribed) return true;
    }
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void publisher::skip(uint64_t n) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->seq += n;
}

void publisher::restart_incarnation() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->seq = 0;
  impl_->ring.clear();
}

uint64_t publisher::next_seq() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->seq;
}

publisher::counters publisher::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void publisher::stop() {
  auto& d = *impl_;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.stopped) return;
    d.stopped = true;
  }
  d.stopping.store(true);
  if (d.replay_thread.joinable()) d.replay_thread.join();
  d.router.close();
  d.pub.close();
  d.ctx.close();
}

}  // namespace kvrelay::fake
