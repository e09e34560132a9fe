// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Integration tests of the ingress ZMQ thread against a fake engine in the test: an XPUB (a PUB
// that shows us when the subscription has arrived, so no slow-joiner sleeps) and a ROUTER replay
// endpoint, both on 127.0.0.1 with kernel-chosen ports.

#include "actors/ingress/zmq_source.hpp"
#include "base/log.hpp"
#include "tools/fake-engine/publisher.hpp"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kvrelay::ingress {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

std::string be8(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
  return s;
}
uint64_t from_be8(const zmq::message_t& m) {
  uint64_t v = 0;
  for (size_t i = 0; i < m.size(); ++i) v = (v << 8) | static_cast<const uint8_t*>(m.data())[i];
  return v;
}
std::string payload(uint64_t seq) { return "batch-" + std::to_string(seq); }

void send_frames(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    s.send(zmq::buffer(frames[i]),
           i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

// Everything the source reported, in order, with waits bounded by a deadline.
struct collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ingress_event> events;
  zmq_source* source = nullptr;  // credits immediately when set
  std::atomic<bool> auto_credit{true};

  void operator()(ingress_event e) {
    const bool batch = std::holds_alternative<raw_batch_ptr>(e);
    {
      std::lock_guard<std::mutex> lk(mu);
      events.push_back(std::move(e));
    }
    if (batch && auto_credit && source) source->credit(1);
    cv.notify_all();
  }
  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, timeout, [&] { return pred(events); });
  }
  size_t batch_count() {
    std::lock_guard<std::mutex> lk(mu);
    size_t n = 0;
    for (auto& e : events) n += std::holds_alternative<raw_batch_ptr>(e);
    return n;
  }
  bool wait_batches(size_t n, std::chrono::milliseconds timeout = 5000ms) {
    return wait(
        [&](auto& ev) {
          size_t k = 0;
          for (auto& e : ev) k += std::holds_alternative<raw_batch_ptr>(e);
          return k >= n;
        },
        timeout);
  }
  // "0 1 2r 3r 4", checking each payload on the way.
  std::string batches() {
    std::lock_guard<std::mutex> lk(mu);
    std::string out;
    for (auto& e : events) {
      if (auto* p = std::get_if<raw_batch_ptr>(&e)) {
        const raw_batch& b = **p;
        if (!out.empty()) out += ' ';
        out += std::to_string(b.seq) + (b.replayed ? "r" : "");
        if (std::string_view(b.data, b.size) != payload(b.seq)) out += "!BAD";
      }
    }
    return out;
  }
  // The delivered seqs, in order; counts payload mismatches in `bad`.
  std::vector<uint64_t> seqs(size_t* bad = nullptr) {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<uint64_t> out;
    for (auto& e : events)
      if (auto* p = std::get_if<raw_batch_ptr>(&e)) {
        out.push_back((*p)->seq);
        if (bad && std::string_view((*p)->data, (*p)->size) != payload((*p)->seq)) ++*bad;
      }
    return out;
  }
  // Lost history (or new incarnations) the source told the pipeline about.
  std::vector<ingress_notice> notices(ingress_notice::kind k) {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<ingress_notice> out;
    for (auto& e : events)
      if (auto* n = std::get_if<ingress_notice_ptr>(&e); n && (*n)->what == k)
        out.push_back(**n);
    return out;
  }
  std::vector<ingress_notice> losses() { return notices(ingress_notice::kind::history_lost); }
  template <class T>
  std::vector<T> all() {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<T> out;
    for (auto& e : events)
      if (auto* x = std::get_if<T>(&e)) out.push_back(*x);
    return out;
  }
};

// The fake engine: XPUB live socket + optional ROUTER replay socket with a ring.
struct engine {
  std::shared_ptr<zmq::context_t> ctx = std::make_shared<zmq::context_t>(1);
  zmq::socket_t pub{*ctx, zmq::socket_type::xpub};
  zmq::socket_t router{*ctx, zmq::socket_type::router};
  std::string pub_ep, router_ep;
  std::string topic;
  std::map<uint64_t, std::string> ring;

  explicit engine(bool bind_pub = true) {
    pub.set(zmq::sockopt::linger, 0);
    router.set(zmq::sockopt::linger, 0);
    if (bind_pub) {
      pub.bind("tcp://127.0.0.1:*");
      pub_ep = pub.get(zmq::sockopt::last_endpoint);
    }
    router.bind("tcp://127.0.0.1:*");
    router_ep = router.get(zmq::sockopt::last_endpoint);
  }
  // Blocks (bounded) until a subscription reached the XPUB.
  bool wait_subscriber(std::chrono::milliseconds timeout = 5000ms) {
    return wait_subscription_message(1, timeout);
  }
  // Blocks (bounded) until the XPUB saw a subscriber go (its unsubscription). Until then the
  // XPUB's session for it may still be failing its connection, and a context terminated at the
  // same moment, with a multipart message half written to it, trips a libzmq assertion
  // ("Resource temporarily unavailable (src/session_base.cpp:260)": clean_pipes reads the rest
  // of the message from a pipe the termination already closed) and aborts the test. Tests
  // that drop the subscriber while publishing wait for this before the engine goes away.
  bool wait_unsubscribed(std::chrono::milliseconds timeout = 5000ms) {
    return wait_subscription_message(0, timeout);
  }
  // An XPUB receives 1 + topic per subscription and 0 + topic per unsubscription.
  bool wait_subscription_message(uint8_t kind, std::chrono::milliseconds timeout) {
    std::array<zmq_pollitem_t, 1> it{{{pub.handle(), 0, ZMQ_POLLIN, 0}}};
    const auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      zmq::poll(it, 50ms);
      zmq::message_t m;
      while (pub.recv(m, zmq::recv_flags::dontwait))
        if (m.size() >= 1 && static_cast<const uint8_t*>(m.data())[0] == kind) return true;
    }
    return false;
  }
  void publish(uint64_t seq, bool keep = true) {
    send_frames(pub, {topic, be8(seq), payload(seq)});
    if (keep) ring[seq] = payload(seq);
  }
  // Waits for one replay request; returns its start seq and the requester identity.
  std::optional<uint64_t> next_request(std::string& identity,
                                       std::chrono::milliseconds timeout = 5000ms) {
    std::array<zmq_pollitem_t, 1> it{{{router.handle(), 0, ZMQ_POLLIN, 0}}};
    if (zmq::poll(it, timeout) <= 0) return std::nullopt;
    std::vector<zmq::message_t> parts;
    for (bool more = true; more;) {
      parts.emplace_back();
      (void)router.recv(parts.back());
      more = parts.back().more();
    }
    if (parts.size() != 3 || parts[1].size() != 0 || parts[2].size() != 8) return std::nullopt;
    identity = parts[0].to_string();
    return from_be8(parts[2]);
  }
  // Serves one request from the ring: 2-frame (old vLLM, SGLang) or 3-frame (vLLM >= 0.26).
  std::optional<uint64_t> serve_replay(bool with_topic, uint64_t ring_floor = 0,
                                       const std::string& end_payload = "") {
    std::string id;
    auto from = next_request(id);
    if (!from) return std::nullopt;
    for (auto& [seq, p] : ring) {
      if (seq < *from || seq < ring_floor) continue;
      if (with_topic)
        send_frames(router, {id, "", topic, be8(seq), p});
      else
        send_frames(router, {id, "", be8(seq), p});
    }
    if (with_topic)
      send_frames(router, {id, "", "", std::string(8, '\xff'), end_payload});
    else
      send_frames(router, {id, "", std::string(8, '\xff'), end_payload});
    return from;
  }
};

zmq_source_options options_for(const engine& e, bool replay, bool cold = false) {
  zmq_source_options o;
  o.endpoint = e.pub_ep;
  if (replay) o.replay_endpoint = e.router_ep;
  o.topic = e.topic;
  o.tracker.cold_start_replay = cold;
  o.reconnect_interval = 50ms;
  o.context = e.ctx;
  return o;
}

struct fixture {
  collector sink;
  std::unique_ptr<zmq_source> src;
  void start(zmq_source_options o) {
    src = std::make_unique<zmq_source>(std::move(o), [this](ingress_event e) { sink(std::move(e)); });
    sink.source = src.get();
    std::string err;
    ASSERT_TRUE(src->start(&err)) << err;
  }
  template <class Pred>
  bool wait_stats(Pred pred, std::chrono::milliseconds timeout = 2000ms) {
    const auto deadline = clock_type::now() + timeout;
    while (!pred(src->stats())) {
      if (clock_type::now() >= deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }
  ~fixture() {
    if (src) src->stop();
  }
};

TEST(SubBinds, FollowsTheWildcardHeuristicAndOverrides) {
  EXPECT_TRUE(sub_binds("tcp://*:5557", bind_mode::auto_detect));
  EXPECT_TRUE(sub_binds("tcp://0.0.0.0:5557", bind_mode::auto_detect));
  EXPECT_TRUE(sub_binds("tcp://[::]:5557", bind_mode::auto_detect));
  EXPECT_FALSE(sub_binds("tcp://127.0.0.1:5557", bind_mode::auto_detect));
  EXPECT_FALSE(sub_binds("tcp://[::1]:5557", bind_mode::auto_detect));
  EXPECT_FALSE(sub_binds("tcp://vllm-0.svc:5557", bind_mode::auto_detect));
  EXPECT_FALSE(sub_binds("ipc:///tmp/kv", bind_mode::auto_detect));
  EXPECT_FALSE(sub_binds("inproc://kv", bind_mode::auto_detect));
  EXPECT_FALSE(sub_binds("garbage", bind_mode::auto_detect));
  EXPECT_TRUE(sub_binds("tcp://127.0.0.1:5557", bind_mode::bind));
  EXPECT_FALSE(sub_binds("tcp://*:5557", bind_mode::connect));
}

TEST(ZmqSource, DeliversInOrderWithPayloadsIntact) {
  engine e;
  fixture f;
  f.start(options_for(e, false));
  ASSERT_TRUE(e.wait_subscriber());
  for (uint64_t s = 0; s < 100; ++s) e.publish(s);
  ASSERT_TRUE(f.sink.wait_batches(100));
  std::string want;
  for (uint64_t s = 0; s < 100; ++s) want += (s ? " " : "") + std::to_string(s);
  EXPECT_EQ(f.sink.batches(), want);
  ASSERT_TRUE(f.wait_stats([](const zmq_source_stats& st) { return st.tracker.batches == 100; }));
  auto st = f.src->stats();
  EXPECT_EQ(st.frames.messages, 100u);
  EXPECT_EQ(st.tracker.batches, 100u);
  EXPECT_EQ(st.in_flight, 0u);  // every batch was credited
}

class ZmqSourceReplay : public ::testing::TestWithParam<bool> {};

TEST_P(ZmqSourceReplay, ForcedGapIsRepairedInOrder) {
  const bool three_frames = GetParam();
  engine e;
  e.topic = "kv@10.0.0.1@m";
  fixture f;
  f.start(options_for(e, true));
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  e.publish(1);
  ASSERT_TRUE(f.sink.wait_batches(2));
  e.publish(2);
  ASSERT_TRUE(f.sink.wait_batches(3));
  e.ring[3] = payload(3);  // 3 and 4 never reach the SUB: only the ring has them
  e.ring[4] = payload(4);
  e.publish(5);
  auto from = e.serve_replay(three_frames);
  ASSERT_TRUE(from.has_value());
  EXPECT_EQ(*from, 3u);
  ASSERT_TRUE(f.sink.wait_batches(6));
  EXPECT_EQ(f.sink.batches(), "0 1 2 3r 4r 5");
  auto gaps = f.sink.all<gap_event>();
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].first_missing, 3u);
  EXPECT_EQ(gaps[0].seen, 5u);
  EXPECT_TRUE(gaps[0].repairing);
  EXPECT_TRUE(f.sink.losses().empty());
  ASSERT_TRUE(f.wait_stats([](const zmq_source_stats& st) {
    return st.tracker.replays_succeeded == 1 && st.tracker.duplicates == 1;
  }));
  auto st = f.src->stats();
  EXPECT_EQ(st.tracker.replays_succeeded, 1u);
  EXPECT_EQ(st.tracker.batches_recovered, 2u);
  EXPECT_EQ(st.tracker.duplicates, 1u);  // 5 came back in the replay too
}

INSTANTIATE_TEST_SUITE_P(ReplyShapes, ZmqSourceReplay, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "ThreeFrame" : "TwoFrame"; });

TEST(ZmqSource, ReplayStartingLaterIsReportedAsHistoryLost) {
  engine e;
  fixture f;
  f.start(options_for(e, true));
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  ASSERT_TRUE(f.sink.wait_batches(1));
  for (uint64_t s = 1; s < 10; ++s) e.ring[s] = payload(s);
  e.publish(10);
  ASSERT_TRUE(e.serve_replay(false, /*ring_floor=*/6).has_value());
  ASSERT_TRUE(f.sink.wait_batches(6));
  EXPECT_EQ(f.sink.batches(), "0 6r 7r 8r 9r 10");
  auto lost = f.sink.losses();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first_missing, 1u);
  EXPECT_EQ(lost[0].first_available, 6u);
  EXPECT_STREQ(lost[0].reason, "history_lost");
}

TEST(ZmqSource, SequenceResetIsANewIncarnation) {
  engine e;
  fixture f;
  f.start(options_for(e, false));
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(5);
  e.publish(6);
  e.publish(0);
  e.publish(1);
  ASSERT_TRUE(f.sink.wait_batches(4));
  EXPECT_EQ(f.sink.batches(), "5 6 0 1");
  auto resets = f.sink.notices(ingress_notice::kind::incarnation_reset);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].previous_seq, 6u);
  EXPECT_EQ(resets[0].new_seq, 0u);
}

TEST(ZmqSource, GapWithoutReplayEndpointIsHistoryLost) {
  engine e;
  fixture f;
  f.start(options_for(e, false));
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  e.publish(3);
  ASSERT_TRUE(f.sink.wait_batches(2));
  auto lost = f.sink.losses();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_STREQ(lost[0].reason, "no_replay_endpoint");
  EXPECT_EQ(lost[0].first_missing, 1u);
  EXPECT_EQ(lost[0].first_available, 3u);
}

TEST(ZmqSource, MalformedFramesAreCountedAndSkipped) {
  engine e;
  fixture f;
  f.start(options_for(e, false));
  ASSERT_TRUE(e.wait_subscriber());
  send_frames(e.pub, {"", be8(0)});                            // 2 frames
  send_frames(e.pub, {"", be8(0), "x", "y"});                  // 4 frames
  send_frames(e.pub, {"", "abcd", payload(0)});                // 4-byte seq
  send_frames(e.pub, {"", std::string(8, '\xff'), "x"});      // END seq on data
  e.publish(0);
  // One SUB delivers in order: once batch 0 is in, every malformed message before it was judged.
  ASSERT_TRUE(f.sink.wait_batches(1));
  EXPECT_EQ(f.sink.batches(), "0");
  ASSERT_TRUE(f.wait_stats([](const zmq_source_stats& st) { return st.frames.messages == 5; }));
  auto st = f.src->stats();
  EXPECT_EQ(st.frames.bad_frame_count, 2u);
  EXPECT_EQ(st.frames.bad_seq_size, 1u);
  EXPECT_EQ(st.frames.reserved_seq, 1u);
  EXPECT_EQ(st.frames.messages, 5u);
}

// Live 0, then 2: seq 1 is missing and in the ring, and the source asks for it.
void open_gap_at_one(engine& e, fixture& f, const zmq_source_options& o) {
  f.start(o);
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  ASSERT_TRUE(f.sink.wait_batches(1));
  e.ring[1] = payload(1);
  e.publish(2);
}

// The ring's batch arrived between the two live ones and the replay ended well, once.
void expect_repaired_once(fixture& f) {
  ASSERT_TRUE(f.sink.wait_batches(3));
  EXPECT_EQ(f.sink.batches(), "0 1r 2");
  ASSERT_TRUE(f.wait_stats([](const zmq_source_stats& st) {
    return st.tracker.replays_succeeded == 1;
  }));
}

TEST(ZmqSource, MalformedReplayRepliesAreCountedAndTheReplayRetried) {
  engine e;
  fixture f;
  auto o = options_for(e, true);
  o.replay_timeout = 200ms;
  o.replay_backoff_initial = 10ms;
  ASSERT_NO_FATAL_FAILURE(open_gap_at_one(e, f, o));
  std::string id;
  auto from = e.next_request(id);
  ASSERT_TRUE(from.has_value());
  send_frames(e.router, {id, "x", be8(1), payload(1)});           // no delimiter
  send_frames(e.router, {id, "", "abc", payload(1)});             // short seq
  send_frames(e.router, {id, "", std::string(8, '\xff'), "junk"});  // END with payload
  // No valid END: the source times out, reconnects and asks again.
  ASSERT_TRUE(e.serve_replay(false).has_value());
  ASSERT_NO_FATAL_FAILURE(expect_repaired_once(f));
  auto st = f.src->stats();
  EXPECT_EQ(st.frames.replay_malformed, 2u);
  EXPECT_EQ(st.frames.replay_bad_end, 1u);
  EXPECT_EQ(st.tracker.replays_failed, 1u) << "no valid reply: a failure, not a stall";
}

// ROCm ATOM #1316 ends a replay with msgpack([oldest, latest]): that is an END like an empty one.
// Any other payload on the END seq still is not (the test above).
TEST(ZmqSource, AnEndCarryingTheRingSpanAsAtomSendsItEndsTheReplay) {
  engine e;
  fixture f;
  ASSERT_NO_FATAL_FAILURE(open_gap_at_one(e, f, options_for(e, true)));
  // [0x92, 0, 0xcd 0x01 0x2c]: oldest 0, latest 300 (a uint16)
  ASSERT_TRUE(e.serve_replay(false, 0, std::string("\x92\x00\xcd\x01\x2c", 5)).has_value());
  ASSERT_NO_FATAL_FAILURE(expect_repaired_once(f));
  auto st = f.src->stats();
  EXPECT_EQ(st.frames.replay_bad_end, 0u);
  EXPECT_EQ(st.tracker.replays_failed, 0u);
}

// The cold start catches up from 0. batches the engine published after the
// catch-up read its ring, but before the subscription took effect, reach neither socket, and an
// engine that then goes quiet never shows the gap. The source must ask the ring again until a
// live batch proves the subscription.
TEST(ZmqSource, ColdStartCatchesUpFromZeroAndFetchesTheTail) {
  engine e;
  for (uint64_t s = 0; s < 3; ++s) e.ring[s] = payload(s);  // published before we started
  fixture f;
  auto o = options_for(e, true, /*cold=*/true);
  o.tail_probe_initial = 20ms;
  f.start(o);
  auto from = e.serve_replay(true);
  ASSERT_TRUE(from.has_value());
  EXPECT_EQ(*from, 0u);
  ASSERT_TRUE(f.sink.wait_batches(3));
  e.ring[3] = payload(3);  // published while the subscription was still joining: ring only
  e.ring[4] = payload(4);
  auto again = e.serve_replay(false);
  ASSERT_TRUE(again.has_value()) << "the catch-up ended without asking for the tail";
  EXPECT_EQ(*again, 3u);
  ASSERT_TRUE(f.sink.wait_batches(5));
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(5);
  ASSERT_TRUE(f.sink.wait_batches(6));
  EXPECT_EQ(f.sink.batches(), "0r 1r 2r 3r 4r 5");
  EXPECT_TRUE(f.sink.losses().empty());
  EXPECT_TRUE(f.sink.all<gap_event>().empty());
  ASSERT_TRUE(f.wait_stats([](const zmq_source_stats& st) { return st.tracker.batches == 6; }));
  EXPECT_GE(f.src->stats().tracker.tail_probes, 1u);
}

// the fake engine (tools/fake-engine) answers a replay like vLLM and SGLang do, so a
// cold start against a ring far longer than the engine's 1000-message queue gets a reply that
// stops short, loses stragglers and often its END. The source must ask for the rest until it has
// everything, declaring nothing lost, while the engine keeps publishing (~200 batches/s).
TEST(ZmqSourceBusyEngine, ColdStartAgainstARingFarLongerThanTheEnginesQueueEndsExact) {
  fake::publisher_options po;
  po.replay_bind = "tcp://127.0.0.1:*";
  po.buffer_steps = 10000;
  fake::publisher p(po);
  for (uint64_t s = 0; s < 5000; ++s) p.publish(payload(s));  // history before kvrelay starts
  fixture f;
  zmq_source_options o;
  o.endpoint = p.live_endpoint();
  o.replay_endpoint = p.replay_endpoint();
  o.tracker.cold_start_replay = true;
  o.tracker.max_buffered_batches = 8192;
  o.reconnect_interval = 50ms;
  f.start(o);
  std::atomic<bool> done{false};
  std::thread engine_loop([&] {
    while (!done.load()) {
      p.publish(payload(p.next_seq()));
      std::this_thread::sleep_for(5ms);
    }
  });
  const bool caught_up = f.wait_stats(
      [](const zmq_source_stats& st) {
        return st.live && !st.catching_up && st.tracker.batches >= 5000;
      },
      20s);
  done = true;
  engine_loop.join();
  ASSERT_TRUE(caught_up) << "catch-up did not finish";
  const uint64_t published = p.next_seq();
  ASSERT_TRUE(f.sink.wait_batches(published, 10s));
  size_t bad = 0;
  const auto got = f.sink.seqs(&bad);
  ASSERT_EQ(got.size(), published);
  for (uint64_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i) << "delivered out of order";
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(f.sink.losses().empty());
  const auto st = f.src->stats();
  EXPECT_EQ(st.tracker.cold_skipped, 0u) << "the ring held everything from 0";
  EXPECT_EQ(st.tracker.replays_failed, 0u);
  ASSERT_GT(p.stats().replay_dropped, 0u) << "the scenario must make the engine drop replies";
  EXPECT_GT(st.tracker.replays_continued, 0u);
  RecordProperty("requests", static_cast<int>(st.tracker.replays_requested));
  RecordProperty("engine_dropped", static_cast<int>(p.stats().replay_dropped));
}

// A reply the engine cut short (the rest, END included, dropped past its queue) whose last
// message filled the reader's budget: the reader pauses with nothing more to read. The pause
// ends no reply, whatever its length; once the reader resumes, the rest is asked for at the
// stall timeout, not at the request's.
TEST(ZmqSource, AReplyCutShortAsTheReaderPausedIsAskedOnFromAtTheStallTimeout) {
  engine e;
  for (uint64_t s = 0; s < 8; ++s) e.ring[s] = payload(s);
  fixture f;
  f.sink.auto_credit = false;
  auto o = options_for(e, true, /*cold=*/true);
  o.max_in_flight = 4;
  o.replay_timeout = 30s;  // a request never answered: beyond every wait below
  o.replay_stall_timeout = 300ms;
  f.start(o);
  std::string id;
  const auto from = e.next_request(id);
  ASSERT_TRUE(from.has_value());
  ASSERT_EQ(*from, 0u);
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(20);  // the live stream goes on meanwhile: what the reply lacks is a hole below it
  for (uint64_t s = 0; s < 4; ++s) send_frames(e.router, {id, "", be8(s), payload(s)});  // no END
  ASSERT_TRUE(f.sink.wait_batches(4));  // the budget's worth: the reader pauses
  std::this_thread::sleep_for(1s);      // three stall timeouts
  auto st = f.src->stats();
  EXPECT_EQ(st.tracker.replays_requested, 1u) << "the pause ended the reply";
  EXPECT_EQ(st.tracker.replays_continued, 0u) << "the pause ended the reply";
  EXPECT_EQ(st.in_flight, 4u);
  f.sink.auto_credit = true;
  f.src->credit(4);
  std::string again_id;
  const auto again = e.next_request(again_id, 5s);
  ASSERT_TRUE(again.has_value()) << "the rest of the reply was not asked for within 5 s";
  EXPECT_EQ(*again, 4u) << "not the rest of the reply";
  EXPECT_EQ(f.sink.batches(), "0r 1r 2r 3r");
  EXPECT_EQ(f.src->stats().tracker.replays_continued, 1u);
}

TEST(ZmqSource, PublisherAbsentAtStartIsPickedUpWhenItAppears) {
  std::string ep;
  {
    engine probe;  // learn a free port, then let it go
    ep = probe.pub_ep;
  }
  fixture f;
  zmq_source_options o;
  o.endpoint = ep;
  o.reconnect_interval = 50ms;
  f.start(o);
  EXPECT_FALSE(f.src->stats().connected);
  // The scenario, not a proof: let a few 50 ms reconnect attempts fail before the engine binds.
  std::this_thread::sleep_for(200ms);
  engine e(false);
  e.pub.bind(ep);
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  e.publish(1);
  ASSERT_TRUE(f.sink.wait_batches(2));
  EXPECT_EQ(f.sink.batches(), "0 1");
  ASSERT_TRUE(f.sink.wait([](auto& ev) {
    for (auto& x : ev)
      if (std::holds_alternative<connected_event>(x)) return true;
    return false;
  }));
  EXPECT_TRUE(f.src->stats().connected);
}

TEST(ZmqSource, SubBindsWhenAskedAndTheEngineDialsIn) {
  fixture f;
  zmq_source_options o;
  o.endpoint = "tcp://127.0.0.1:*";
  o.mode = bind_mode::bind;
  f.start(o);
  const std::string ep = f.src->sub_endpoint();
  ASSERT_NE(ep.find("tcp://127.0.0.1:"), std::string::npos);
  engine e(false);
  e.pub.connect(ep);
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  ASSERT_TRUE(f.sink.wait_batches(1));
}

TEST(ZmqSource, TopicIsAPrefixFilter) {
  engine e;
  fixture f;
  auto o = options_for(e, false);
  o.topic = "kv@a";
  f.start(o);
  ASSERT_TRUE(e.wait_subscriber());
  send_frames(e.pub, {"kv@b@m", be8(0), payload(0)});
  send_frames(e.pub, {std::string("kv@a@m\0sgl-kv-epoch=1", 21), be8(7), payload(7)});
  send_frames(e.pub, {"kv@b@m", be8(1), payload(1)});
  send_frames(e.pub, {"kv@a", be8(8), payload(8)});
  // Delivery is in publishing order: with 8 in, the other topic's 0 and 1 had their chance.
  ASSERT_TRUE(f.sink.wait_batches(2));
  EXPECT_EQ(f.sink.batches(), "7 8");
}

TEST(ZmqSource, StopsReadingAboveTheInFlightBudgetUntilCredited) {
  engine e;
  fixture f;
  f.sink.auto_credit = false;
  auto o = options_for(e, false);
  o.max_in_flight = 4;
  f.start(o);
  ASSERT_TRUE(e.wait_subscriber());
  for (uint64_t s = 0; s < 20; ++s) e.publish(s);
  ASSERT_TRUE(f.sink.wait_batches(4));
  // Proof that the thread chose not to read: it went round its poll loop throttled (every ~4 ms)
  // several times with the 16 other batches waiting in its socket.
  const auto throttled0 = f.src->stats().throttled;
  ASSERT_TRUE(f.wait_stats(
      [&](const zmq_source_stats& st) { return st.throttled >= throttled0 + 5; }));
  EXPECT_EQ(f.sink.batch_count(), 4u);
  auto st = f.src->stats();
  EXPECT_EQ(st.in_flight, 4u);
  f.src->credit(100);
  ASSERT_TRUE(f.sink.wait_batches(8));  // another budget's worth, then it stops again
  f.sink.auto_credit = true;
  f.src->credit(100);
  ASSERT_TRUE(f.sink.wait_batches(20));
}

// Under a publisher that never pauses, stop() still ends the thread and leaves the engine: a
// thread that read until its socket was empty would never return (the test's timeout fails it).
// How long the stop takes is a measurement (the stop_ms property; bench_ingress_stop), not an
// assertion.
TEST(ZmqSource, StopUnderLoadReturnsAndLeavesTheEngine) {
  engine e;
  fixture f;
  f.start(options_for(e, false));
  ASSERT_TRUE(e.wait_subscriber());
  std::atomic<bool> done{false};
  // The engine socket belongs to the publishing thread from here on.
  std::thread publisher([&] {
    for (uint64_t s = 0; !done.load(); ++s) e.publish(s, false);
  });
  ASSERT_TRUE(f.sink.wait_batches(1000));
  const auto t0 = clock_type::now();
  f.src->stop();
  const auto took = clock_type::now() - t0;
  EXPECT_FALSE(f.src->running()) << "stopped while the engine was still publishing";
  done = true;
  publisher.join();
  RecordProperty("stop_ms", static_cast<int>(
                                std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_TRUE(e.wait_unsubscribed()) << "the stopped source left the engine";
}

TEST(ZmqSource, DeadReplayEndpointDelaysLiveOnlyUntilTheReplayIsGivenUp) {
  std::string dead;
  {
    engine probe;  // a port nobody listens on any more
    dead = probe.router_ep;
  }
  engine e;
  fixture f;
  auto o = options_for(e, false, /*cold=*/true);
  o.replay_endpoint = dead;
  o.replay_timeout = 100ms;
  o.replay_backoff_initial = 10ms;
  o.tracker.max_replay_attempts = 2;
  const auto t0 = clock_type::now();
  f.start(o);
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(7);
  e.publish(8);
  ASSERT_TRUE(f.sink.wait_batches(2));
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
  EXPECT_EQ(f.sink.batches(), "7 8");
  EXPECT_TRUE(f.sink.losses().empty());  // cold: we never had that history
  EXPECT_GE(waited.count(), 200);  // two 100 ms attempts
  // stats() is refreshed once per poll round, just after the sink calls.
  EXPECT_TRUE(f.wait_stats([](const zmq_source_stats& st) { return st.tracker.replays_failed == 2; }));
  e.publish(9);
  ASSERT_TRUE(f.sink.wait_batches(3));
}

TEST(ZmqSource, LogsTheReferenceMessagesThroughTheHook) {
  // The level is process-wide: a daemon run earlier in this process (a test binary run whole)
  // leaves its configured one, and "subscribed" is an info line.
  struct info_level {
    log::level was = log::current_level();
    info_level() { log::set_level(log::level::info); }
    ~info_level() { log::set_level(was); }
  } level;
  engine e;
  fixture f;
  std::mutex mu;
  std::vector<std::string> lines;
  auto o = options_for(e, false);
  o.log = [&](const log::record& r) {
    std::string line = std::to_string(static_cast<int>(r.severity)) + " " + r.message;
    for (auto& f : r.fields) line += " " + f.key + "=" + f.value;
    std::lock_guard<std::mutex> lk(mu);
    lines.push_back(line);
  };
  f.start(o);
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  e.publish(2);
  ASSERT_TRUE(f.sink.wait_batches(2));
  std::lock_guard<std::mutex> lk(mu);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].rfind("1 subscribed to engine KV events endpoint=" + e.pub_ep + " topic=", 0),
            0u)
      << lines[0];
  bool lost = false;
  for (auto& l : lines) lost |= l.find("2 engine history lost") == 0;
  EXPECT_TRUE(lost);
}

TEST(ZmqSource, UndialableReplayEndpointDoesNotKillTheThread) {
  engine e;
  fixture f;
  auto o = options_for(e, false, /*cold=*/true);
  o.replay_endpoint = "tcp://*:5558";  // the engine-side form: cannot be dialled
  o.replay_backoff_initial = 1ms;
  f.start(o);
  ASSERT_TRUE(e.wait_subscriber());
  e.publish(0);
  e.publish(1);
  ASSERT_TRUE(f.sink.wait_batches(2));
  EXPECT_EQ(f.sink.batches(), "0 1");
  EXPECT_TRUE(f.sink.all<source_failed_event>().empty());
  EXPECT_TRUE(f.src->running());
  EXPECT_TRUE(f.wait_stats([](const zmq_source_stats& st) {
    return st.frames.replay_send_failed >= 1 && st.tracker.replays_failed >= 1;
  }));
}

TEST(ZmqSource, StartFailsCleanlyOnABadEndpoint) {
  collector sink;
  zmq_source_options o;
  o.endpoint = "tcp://256.1.1.1:*";
  o.mode = bind_mode::bind;
  zmq_source src(o, [&](ingress_event ev) { sink(std::move(ev)); });
  std::string err;
  EXPECT_FALSE(src.start(&err));
  EXPECT_FALSE(err.empty());
  EXPECT_FALSE(src.running());
}

TEST(ZmqSource, ContextTerminationEndsTheThreadQuietly) {
  engine e;
  fixture f;
  auto o = options_for(e, false);
  auto ctx = std::make_shared<zmq::context_t>(1);
  o.context = ctx;
  f.start(o);
  ctx->shutdown();  // what a process-wide teardown does first
  const auto deadline = clock_type::now() + 2s;
  while (f.src->running() && clock_type::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(f.src->running());
  EXPECT_TRUE(f.sink.all<source_failed_event>().empty());
}

}  // namespace
}  // namespace kvrelay::ingress

namespace kvrelay::ingress {
namespace {

// Not a regression test: a throughput probe for the report (run with
// --gtest_also_run_disabled_tests --gtest_filter='*Probe*'). Engine → SUB thread → tracker → sink.
TEST(ZmqSourceProbe, DISABLED_Throughput) {
  constexpr uint64_t n = 200000;
  engine e(false);
  e.pub.set(zmq::sockopt::sndhwm, 0);  // HWM applies to pipes made after it is set: before bind
  e.pub.bind("tcp://127.0.0.1:*");
  e.pub_ep = e.pub.get(zmq::sockopt::last_endpoint);
  std::atomic<uint64_t> got{0};
  zmq_source* src_ptr = nullptr;
  auto o = options_for(e, false);
  o.rcvhwm = 0;
  zmq_source src(o, [&](ingress_event ev) {
    if (std::holds_alternative<raw_batch_ptr>(ev)) {
      got.fetch_add(1, std::memory_order_relaxed);
      src_ptr->credit(1);
    }
  });
  src_ptr = &src;
  ASSERT_TRUE(src.start());
  ASSERT_TRUE(e.wait_subscriber());
  const std::string body(1024, 'x');
  const auto t0 = clock_type::now();
  for (uint64_t s = 0; s < n; ++s) send_frames(e.pub, {"", be8(s), body});
  const double send_secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  while (got.load() < n && clock_type::now() - t0 < 30s) std::this_thread::sleep_for(1ms);
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  src.stop();
  auto st = src.stats();
  std::printf("sent in %.3f s; delivered %llu/%llu 1 KiB batches in %.3f s = %.0f batches/s; "
              "gaps %llu\n",
              send_secs, static_cast<unsigned long long>(got.load()),
              static_cast<unsigned long long>(n), secs, static_cast<double>(got.load()) / secs,
              static_cast<unsigned long long>(st.tracker.gaps));
  EXPECT_EQ(got.load(), n);
}

}  // namespace
}  // namespace kvrelay::ingress
