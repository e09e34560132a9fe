// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/capture/capturer.hpp"

#include <cerrno>
#include <zmq.hpp>

#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

#include "actors/ingress/zmq_source.hpp"
#include "tools/capture/kvcap.hpp"

namespace kvrelay::capture {

namespace {

using clock = std::chrono::steady_clock;

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// SIGINT/SIGTERM (the way an operator ends a capture) interrupt the poll, and cppzmq throws
// for that; the stop flag the handler set is checked at the top of the loop.
void poll_interruptible(zmq::pollitem_t* items, size_t n, std::chrono::milliseconds timeout) {
  try {
    zmq::poll(items, n, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
  }
}

// One multipart message, whatever its frame count (bounded: frames past max_frames are read
// and dropped so the socket stays in step; the record then holds the first max_frames).
bool recv_all(zmq::socket_t& s, std::vector<zmq::message_t>& parts) {
  parts.clear();
  for (;;) {
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::dontwait)) return !parts.empty();
    const bool more = m.more();
    if (parts.size() < max_frames) parts.push_back(std::move(m));
    if (!more) return true;
  }
}

std::vector<std::string_view> views(const std::vector<zmq::message_t>& parts, size_t from) {
  std::vector<std::string_view> out;
  for (size_t i = from; i < parts.size(); ++i)
    out.emplace_back(parts[i].data<char>(), parts[i].size());
  return out;
}

}  // namespace

outcome<void> capturer::run(const std::atomic<bool>& stop) {
  nlohmann::ordered_json meta;
  meta["format"] = "kvrelay-capture";
  meta["version"] = format_version;
  meta["tool"] = std::string("kvrelay-capture ") + KVRELAY_VERSION;
  meta["started_unix_ns"] = unix_ns();
  meta["endpoint"] = opt_.endpoint;
  meta["replay_endpoint"] = opt_.replay_endpoint;
  meta["topic"] = opt_.topic;
  meta["bounds"] = {{"max_bytes", opt_.max_bytes},
                    {"max_duration_ms", opt_.max_duration.count()},
                    {"max_messages", opt_.max_messages}};
  auto w = writer::create(opt_.out, meta.dump());
  if (!w) return w.error();
  auto& file = *w.value();

  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::rcvhwm, 0);  // a capture must not drop what it is there to record
  sub.set(zmq::sockopt::subscribe, opt_.topic);
  try {
    if (ingress::sub_binds(opt_.endpoint, ingress::bind_mode::auto_detect))
      sub.bind(opt_.endpoint);
    else
      sub.connect(opt_.endpoint);
  } catch (const zmq::error_t& e) {
    return failure{ec::endpoint_unusable, opt_.endpoint + ": " + e.what(), {}};
  }
  std::unique_ptr<zmq::socket_t> dealer;

  const auto started = clock::now();
  auto replay_deadline = clock::time_point::max();
  auto last_flush = started;
  std::vector<zmq::message_t> parts;
  // True when written, false when it would take the file past max_bytes (the capture stops).
  const auto keep = [&](record_kind kind,
                        const std::vector<std::string_view>& frames) -> outcome<bool> {
    if (file.bytes() + writer::record_bytes(frames) > opt_.max_bytes) {
      stats_.stopped_by = "max_bytes";
      return false;
    }
    if (auto r = file.write(kind, unix_ns(), frames); !r) return r.error();
    return true;
  };
  const auto ask_replay = [&]() -> outcome<void> {
    stats_.replay_asked = true;
    dealer = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    dealer->set(zmq::sockopt::linger, 0);
    dealer->set(zmq::sockopt::rcvhwm, 0);
    try {
      dealer->connect(opt_.replay_endpoint);
    } catch (const zmq::error_t& e) {
      return failure{ec::endpoint_unusable, opt_.replay_endpoint + ": " + e.what(), {}};
    }
    const std::string zero(8, '\0');  // everything the ring holds
    dealer->send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore);
    dealer->send(zmq::buffer(zero), zmq::send_flags::none);
    replay_deadline = clock::now() + opt_.replay_timeout;
    return {};
  };

  while (stats_.stopped_by.empty()) {
    const auto now = clock::now();
    if (stop.load(std::memory_order_relaxed)) stats_.stopped_by = "stop";
    else if (opt_.max_duration.count() > 0 && now - started >= opt_.max_duration)
      stats_.stopped_by = "max_duration";
    else if (opt_.max_messages > 0 && stats_.live >= opt_.max_messages)
      stats_.stopped_by = "max_messages";
    if (!stats_.stopped_by.empty()) break;
    if (!opt_.replay_endpoint.empty() && !stats_.replay_asked &&
        (stats_.live > 0 || now - started >= opt_.replay_after)) {
      if (auto r = ask_replay(); !r) return r;
    }
    if (dealer && now >= replay_deadline) dealer.reset();  // the ring never ended its reply

    zmq::pollitem_t items[2] = {{sub.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, 0, ZMQ_POLLIN, 0}};
    int n = 1;
    if (dealer) items[n++] = {dealer->handle(), 0, ZMQ_POLLIN, 0};
    poll_interruptible(items, static_cast<size_t>(n), std::chrono::milliseconds(50));
    if (items[0].revents & ZMQ_POLLIN) {
      while (stats_.stopped_by.empty() && recv_all(sub, parts)) {
        auto r = keep(record_kind::live, views(parts, 0));
        if (!r) return r.error();
        if (!r.value()) break;
        ++stats_.live;
        live_.store(stats_.live, std::memory_order_relaxed);
        if (parts.size() == 3 && parts[1].size() == 8) {
          uint64_t seq = 0;
          for (int b = 0; b < 8; ++b) seq = (seq << 8) | parts[1].data<unsigned char>()[b];
          last_seq_.store(static_cast<int64_t>(seq), std::memory_order_relaxed);
        }
        if (opt_.max_messages > 0 && stats_.live >= opt_.max_messages) break;
      }
    }
    if (n > 1 && (items[1].revents & ZMQ_POLLIN)) {
      while (dealer && stats_.stopped_by.empty() && recv_all(*dealer, parts)) {
        // DEALER view: ["", ...reply]; the delimiter is not recorded.
        const size_t from = !parts.empty() && parts[0].size() == 0 ? 1 : 0;
        auto r = keep(record_kind::replay_reply, views(parts, from));
        if (!r) return r.error();
        if (!r.value()) break;
        ++stats_.replay_replies;
        replay_deadline = clock::now() + opt_.replay_timeout;
        const bool end = parts.size() - from >= 2 && parts[parts.size() - 2].size() == 8 &&
                         std::string_view(parts[parts.size() - 2].data<char>(), 8) ==
                             std::string_view("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
        if (end) {
          stats_.replay_ended = true;
          dealer.reset();
        }
      }
    }
    if (clock::now() - last_flush >= std::chrono::seconds(1)) {
      // A capture killed outright loses at most the last second.
      if (auto r = file.flush(); !r) return r;
      last_flush = clock::now();
    }
  }
  stats_.bytes = file.bytes();
  return file.close();
}

}  // namespace kvrelay::capture
