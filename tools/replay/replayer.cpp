// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/replay/replayer.hpp"

#include <sys/stat.h>

#include <cstring>
#include <thread>
#include <vector>

#include "tools/capture/kvcap.hpp"
#include "tools/fake-engine/publisher.hpp"

namespace kvrelay::capture {

namespace {

using clock = std::chrono::steady_clock;

// Sleeps until `t` in slices, so a stop is seen within 50 ms. False when stopped.
bool sleep_until(clock::time_point t, const std::atomic<bool>& stop) {
  while (clock::now() < t) {
    if (stop.load(std::memory_order_relaxed)) return false;
    std::this_thread::sleep_for(std::min<clock::duration>(t - clock::now(),
                                                          std::chrono::milliseconds(50)));
  }
  return !stop.load(std::memory_order_relaxed);
}

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool shift_batch_timestamp(std::string& payload, double seconds) {
  // fixarray of 2 or 3 (the envelope), then 0xcb and 8 bytes of big-endian IEEE 754.
  if (payload.size() < 10) return false;
  const auto head = static_cast<unsigned char>(payload[0]);
  if ((head != 0x92 && head != 0x93) || static_cast<unsigned char>(payload[1]) != 0xcb)
    return false;
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(payload[2 + i]);
  double ts = 0;
  std::memcpy(&ts, &bits, sizeof ts);
  ts += seconds;
  std::memcpy(&bits, &ts, sizeof ts);
  for (int i = 7; i >= 0; --i) {
    payload[2 + i] = static_cast<char>(bits & 0xff);
    bits >>= 8;
  }
  return true;
}

struct replayer::contents {
  capture_contents file;
  uint64_t live = 0;
};

outcome<std::unique_ptr<replayer>> replayer::create(replay_options o) {
  std::unique_ptr<replayer> r(new replayer());
  r->opt_ = std::move(o);
  auto file = read_all(r->opt_.in);
  if (!file) return file.error();
  r->c_ = std::make_unique<contents>();
  r->c_->file = std::move(file).value();
  r->stats_.truncated_capture = r->c_->file.truncated;
  // What the engine looked like: its topic (from the first well-formed live message) and the
  // form of its replay replies.
  fake::publisher_options p;
  bool topic_known = false, replies_with_topic = false;
  for (const auto& rec : r->c_->file.records) {
    if (rec.kind == record_kind::live) {
      ++r->c_->live;
      if (!topic_known && live_seq(rec) >= 0) {
        p.topic = rec.frames[0];
        topic_known = true;
      }
    } else if (rec.frames.size() == 3) {
      replies_with_topic = true;
    }
  }
  p.bind = r->opt_.bind;
  p.replay_bind = r->opt_.replay_bind;
  p.replay_topic_frames = r->opt_.replay_topic_frames.value_or(replies_with_topic);
  p.buffer_steps = r->c_->file.records.size() + 1;  // the ring never forgets within a capture
  p.xpub = true;
  p.linger_ms = 1000;
  r->shift_timestamps();
  // The replies to the capture's replay request are what the engine's ring held before the
  // capture began. The ring holds them before the replay service answers anyone: a subscriber
  // that asks at once (kvrelay asks as soon as its SUB connects) must not find it empty and
  // then see live batches from the middle of the stream.
  for (const auto& rec : r->c_->file.records) {
    uint64_t seq = 0;
    std::string_view payload;
    if (reply_batch(rec, seq, payload)) {
      p.history.emplace_back(seq, std::string(payload));
      ++r->stats_.history;
    }
  }
  try {
    r->pub_ = std::make_unique<fake::publisher>(p);
  } catch (const std::exception& e) {
    return failure{ec::endpoint_unusable, e.what(), {}};
  }
  return r;
}

replayer::~replayer() {
  if (pub_) pub_->stop();
}

const std::string& replayer::live_endpoint() const { return pub_->live_endpoint(); }
const std::string& replayer::replay_endpoint() const { return pub_->replay_endpoint(); }
uint64_t replayer::live_records() const noexcept { return c_->live; }

void replayer::shift_timestamps() {
  auto& records = c_->file.records;
  for (const auto& rec : records)
    if (rec.kind == record_kind::live) {
      t0_ = rec.recv_unix_ns;
      break;
    }
  if (!opt_.shift_timestamps) return;
  // To the replayer's start, not to when the first message goes out: the history in the ring
  // is shifted before anyone can ask for it, and live and history move by the same amount.
  const double by = static_cast<double>(unix_ns() - t0_) / 1e9;
  for (auto& rec : records) {
    if (rec.kind == record_kind::live && live_seq(rec) >= 0)
      shift_batch_timestamp(rec.frames[2], by);
    else if (rec.kind == record_kind::replay_reply && rec.frames.size() >= 2)
      shift_batch_timestamp(rec.frames.back(), by);
  }
}

void replayer::run(const std::atomic<bool>& stop) {
  if (!opt_.go_file.empty()) {
    struct stat st {};
    while (::stat(opt_.go_file.c_str(), &st) != 0) {
      if (stop.load()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (opt_.wait_subscriber.count() > 0) {
    const auto end = clock::now() + opt_.wait_subscriber;
    while (!stats_.subscriber_seen && clock::now() < end && !stop.load())
      stats_.subscriber_seen = pub_->wait_for_subscriber(std::chrono::milliseconds(50));
  }
  const auto& records = c_->file.records;
  const int64_t t0 = t0_;
  const auto start = clock::now();
  std::vector<std::string_view> frames;
  for (const auto& rec : records) {
    if (opt_.speed > 0) {
      const double offset_ns = static_cast<double>(rec.recv_unix_ns - t0) / opt_.speed;
      if (!sleep_until(start + std::chrono::nanoseconds(static_cast<int64_t>(offset_ns)), stop))
        return;
    } else if (stop.load(std::memory_order_relaxed)) {
      return;
    }
    if (rec.kind == record_kind::replay_reply) continue;
    frames.assign(rec.frames.begin(), rec.frames.end());
    pub_->publish_frames(frames);
    ++stats_.live_sent;
    sent_.store(stats_.live_sent, std::memory_order_relaxed);
  }
  sleep_until(clock::now() + opt_.linger, stop);
}

}  // namespace kvrelay::capture
