// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The fake engine's ZMQ side against a raw SUB and DEALER, as docs/spec/engine-wire.md §1
// describes the engines: live [topic, seq BE8, payload], replay replies in the 2-frame and the
// v0.26+ topic form, the END marker, ring overflow, DP port offsets and the fault hooks.
#include <gtest/gtest.h>

#include <zmq.hpp>

#include <chrono>
#include <thread>

#include "tests/support/skip.hpp"
#include "tests/tools/zmq_peer.hpp"
#include "tools/fake-engine/publisher.hpp"

namespace kvrelay::fake {
namespace {

using Publisher = zmq_fixture;

TEST_F(Publisher, LiveMessagesAreTopicSeqPayload) {
  publisher_options o;
  o.topic = "kv@10.0.0.1@llama";
  publisher p(o);
  auto s = sub(p.live_endpoint(), "kv@");
  const auto first = join(p, s, "hello");
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0], o.topic);
  ASSERT_EQ(first[1].size(), 8u);
  EXPECT_EQ(first[2], "hello");
  // Drain what the joining loop queued, then check consecutive seqs from here on.
  while (!recv_all(s).empty()) {
  }
  const uint64_t next = p.next_seq();
  EXPECT_EQ(p.publish("a"), next);
  EXPECT_EQ(p.publish("b"), next + 1);
  auto a = recv_all(s), b = recv_all(s);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(a[1], be8(next));
  EXPECT_EQ(b[1], be8(next + 1));
  EXPECT_EQ(b[2], "b");
}

// ROCm ATOM #869: [payload] with no topic, [topic, payload] with one; never a seq frame.
TEST_F(Publisher, UnsequencedFramingOfAtom869) {
  publisher_options o;
  o.unsequenced = true;
  publisher p(o);
  auto s = sub(p.live_endpoint(), "");
  const auto one = join(p, s, "payload");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], "payload");
  publisher_options t;
  t.unsequenced = true;
  t.topic = "atom";
  publisher q(t);
  auto s2 = sub(q.live_endpoint(), "atom");
  const auto two = join(q, s2, "payload");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], "atom");
  EXPECT_EQ(two[1], "payload");
}

TEST_F(Publisher, SeqStartsAtZeroAndSubscriberPrefixFilters) {
  publisher_options o;
  o.topic = "other";
  publisher p(o);
  EXPECT_EQ(p.next_seq(), 0u);
  EXPECT_EQ(p.publish("x"), 0u);
  auto s = sub(p.live_endpoint(), "kv@");
  for (int i = 0; i < 10; ++i) p.publish("x");
  EXPECT_TRUE(recv_all(s).empty());
}

TEST_F(Publisher, ReplayTwoFrameFormThenEnd) {
  publisher_options o;
  o.replay_bind = "tcp://127.0.0.1:*";
  o.topic = "kv-events";
  publisher p(o);
  for (int i = 0; i < 5; ++i) p.publish("batch" + std::to_string(i));
  auto d = dealer(p.replay_endpoint());
  const auto replies = replay(d, 2);
  ASSERT_EQ(replies.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(replies[i].size(), 3u);
    EXPECT_EQ(replies[i][0], "");
    EXPECT_EQ(replies[i][1], be8(2 + i));
    EXPECT_EQ(replies[i][2], "batch" + std::to_string(2 + i));
  }
  EXPECT_EQ(replies[3], (std::vector<std::string>{"", END, ""}));
  EXPECT_EQ(p.stats().replay_requests, 1u);
  EXPECT_EQ(p.stats().replay_batches, 3u);
}

TEST_F(Publisher, ReplayTopicFormOfV026) {
  publisher_options o;
  o.replay_bind = "tcp://127.0.0.1:*";
  o.topic = "kv-events";
  o.replay_topic_frames = true;
  publisher p(o);
  p.publish("only");
  auto d = dealer(p.replay_endpoint());
  const auto replies = replay(d, 0);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0], (std::vector<std::string>{"", "kv-events", be8(0), "only"}));
  EXPECT_EQ(replies[1], (std::vector<std::string>{"", "", END, ""}));
}

TEST_F(Publisher, RingOverflowStartsLaterAndEmptyRangeIsJustEnd) {
  publisher_options o;
  o.replay_bind = "tcp://127.0.0.1:*";
  o.buffer_steps = 3;
  publisher p(o);
  for (int i = 0; i < 6; ++i) p.publish(std::to_string(i));
  auto d = dealer(p.replay_endpoint());
  auto replies = replay(d, 0);
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(replies[0][1], be8(3));  // asked for 0: history before 3 is gone
  replies = replay(d, 6);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0][1], END);
}

TEST_F(Publisher, SkipRetainAndIncarnationHooks) {
  publisher_options o;
  o.replay_bind = "tcp://127.0.0.1:*";
  publisher p(o);
  EXPECT_EQ(p.publish("kept"), 0u);
  EXPECT_EQ(p.publish("lost", /*retain=*/false), 1u);
  p.skip(3);
  EXPECT_EQ(p.publish("after-gap"), 5u);
  auto d = dealer(p.replay_endpoint());
  auto replies = replay(d, 0);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0][1], be8(0));
  EXPECT_EQ(replies[1][1], be8(5));
  EXPECT_EQ(replies[1][2], "after-gap");
  p.restart_incarnation();
  replies = replay(d, 0);
  EXPECT_EQ(replies.size(), 1u);  // a restarted engine remembers nothing
  EXPECT_EQ(p.publish("new-life"), 0u);
}

// The replay endpoint behaves like vLLM's and SGLang's: the whole reply in one loop into a
// ROUTER queue of 1000 messages, what does not fit dropped (END too). The DEALER counts what
// arrives until the engine has finished its loop and every survivor is in (positive: the count
// the engine's own drop counter predicts).
TEST_F(Publisher, ReplayPastTheHighWaterMarkIsDroppedLikeTheEnginesDo) {
  publisher_options o;
  o.replay_bind = "tcp://127.0.0.1:*";
  publisher p(o);
  // Deterministic on any machine: 5001 replies of 4 KiB (20 MiB) never fit what can be in flight
  // while nobody reads: the ROUTER's 1000-message queue (4 MiB), the kernel's send buffer (at most
  // tcp_wmem's 4 MiB) and receive buffer (4 KiB here) and the DEALER's 1000-message queue.
  const std::string body(4096, 'x');
  for (int i = 0; i < 5000; ++i) p.publish(body);
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  d.set(zmq::sockopt::rcvtimeo, 2000);
  d.set(zmq::sockopt::rcvbuf, 4096);
  d.connect(p.replay_endpoint());
  d.send(zmq::message_t(), zmq::send_flags::sndmore);
  d.send(zmq::buffer(be8(0)), zmq::send_flags::none);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (p.stats().replies_done == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const auto st = p.stats();
  ASSERT_EQ(st.replies_done, 1u);
  ASSERT_GT(st.replay_dropped, 0u) << "5001 messages never fit a 1000-message queue at once";
  const uint64_t survivors = 5001 - st.replay_dropped;
  uint64_t got = 0, contiguous = 0, last = 0;
  bool first = true, end = false;
  while (got < survivors) {
    auto r = recv_all(d);
    ASSERT_FALSE(r.empty()) << "only " << got << " of " << survivors << " survivors arrived";
    ++got;
    if (r[1] == END) {
      end = true;
      continue;
    }
    uint64_t seq = 0;
    for (unsigned char c : r[1]) seq = (seq << 8) | c;
    if (first ? seq == 0 : seq == last + 1) ++contiguous;
    ASSERT_TRUE(first || seq > last) << "replies stay in seq order";
    first = false;
    last = seq;
  }
  EXPECT_GE(contiguous, 1000u) << "the first queue-full arrives whole";
  RecordProperty("dropped", static_cast<int>(st.replay_dropped));
  RecordProperty("end_arrived", end ? 1 : 0);
}

TEST_F(Publisher, LosslessReplayWaitsForRoomInstead) {
  publisher_options o;
  o.replay_bind = "tcp://127.0.0.1:*";
  o.replay_lossless = true;
  publisher p(o);
  for (int i = 0; i < 5000; ++i) p.publish(std::string(512, 'y'));
  auto d = dealer(p.replay_endpoint());
  const auto replies = replay(d, 0);
  ASSERT_EQ(replies.size(), 5001u);
  EXPECT_EQ(replies[4999][1], be8(4999));
  EXPECT_EQ(p.stats().replay_dropped, 0u);
}

TEST_F(Publisher, MalformedReplayRequestGetsNoReply) {
  publisher_options o;
  o.replay_bind = "tcp://127.0.0.1:*";
  publisher p(o);
  p.publish("x");
  auto d = dealer(p.replay_endpoint());
  d.set(zmq::sockopt::rcvtimeo, 200);
  d.send(zmq::buffer(be8(0)), zmq::send_flags::none);  // no empty delimiter: 2 frames at ROUTER
  EXPECT_TRUE(recv_all(d).empty());
  EXPECT_EQ(p.stats().ignored_requests, 1u);
  d.set(zmq::sockopt::rcvtimeo, 2000);
  EXPECT_EQ(replay(d, 0).size(), 2u);  // a well-formed request still works
}

TEST(DpEndpoint, OffsetsPortsLikeVllm) {
  EXPECT_EQ(dp_endpoint("tcp://*:5557", 0), "tcp://*:5557");
  EXPECT_EQ(dp_endpoint("tcp://*:5557", 1), "tcp://*:5558");
  EXPECT_EQ(dp_endpoint("tcp://127.0.0.1:5558", 3), "tcp://127.0.0.1:5561");
  EXPECT_EQ(dp_endpoint("tcp://127.0.0.1:*", 2), "tcp://127.0.0.1:*");
  EXPECT_EQ(dp_endpoint("tcp://*:0", 3), "tcp://*:0");  // port 0 is ephemeral, never offset
  EXPECT_EQ(dp_endpoint("inproc://kv", 2), "inproc://kv_dp2");
  EXPECT_FALSE(dp_endpoint("ipc:///tmp/kv", 1).has_value());
  EXPECT_FALSE(dp_endpoint("tcp://*:65535", 1).has_value());
  EXPECT_FALSE(dp_endpoint("tcp://*:5557", -1).has_value());
}

TEST_F(Publisher, DpRankBindsPortPlusRankForLiveAndReplay) {
  publisher_options base;
  base.replay_bind = "tcp://127.0.0.1:*";
  const auto port_of = [](const std::string& ep) { return std::stoi(ep.substr(ep.rfind(':') + 1)); };
  // Another process may hold a port next to an ephemeral one for a moment: a fresh rank 0 then.
  std::unique_ptr<publisher> rank0, rank1;
  int live0 = 0, replay0 = 0;
  std::string taken;
  for (int attempt = 0; attempt < 20 && !rank1; ++attempt) {
    rank0 = std::make_unique<publisher>(base);
    live0 = port_of(rank0->live_endpoint());
    replay0 = port_of(rank0->replay_endpoint());
    publisher_options o;
    o.bind = "tcp://127.0.0.1:" + std::to_string(live0);
    o.replay_bind = "tcp://127.0.0.1:" + std::to_string(replay0);
    o.dp_rank = 1;
    try {
      rank1 = std::make_unique<publisher>(o);
    } catch (const std::exception& e) {
      taken = e.what();
    }
  }
  if (!rank1) KVRELAY_SKIP("port+1 was taken for 20 ephemeral ports here: " << taken);
  EXPECT_EQ(port_of(rank1->live_endpoint()), live0 + 1);
  EXPECT_EQ(port_of(rank1->replay_endpoint()), replay0 + 1);
  auto s = sub("tcp://127.0.0.1:" + std::to_string(live0 + 1), "");
  const auto frames = join(*rank1, s, "rank1");
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[2], "rank1");
  auto d = dealer("tcp://127.0.0.1:" + std::to_string(replay0 + 1));
  EXPECT_GE(replay(d, 0).size(), 2u);
  EXPECT_EQ(rank0->stats().replay_requests, 0u);  // rank 0's own space is untouched
}

TEST(PublisherBind, BadEndpointThrows) {
  publisher_options o;
  o.bind = "tcp://256.0.0.1:1";
  EXPECT_THROW(publisher p(o), std::runtime_error);
}

}  // namespace
}  // namespace kvrelay::fake

// kvrelay-replay's use of the publisher: recorded messages with their own seqs, history put in
// the ring before anything is sent, an engine restart in the recording, and XPUB subscribers.
namespace kvrelay::fake {
namespace {

TEST_F(Publisher, RecordedFramesKeepTheirSeqsAndFillTheRingInOrder) {
  publisher_options o;
  o.topic = "kv";
  o.replay_bind = "tcp://127.0.0.1:*";
  publisher p(o);
  p.retain(5, "h5");  // history from a capture's replay replies, out of order
  p.retain(3, "h3");
  p.retain(5, "again");  // a seq already there stays as it was
  const std::string s7 = be8(7), s8 = be8(8);
  p.publish_frames({"kv", s7, "live7"});
  p.publish_frames({"only one frame"});  // sent, never retained
  p.publish_frames({"kv", s8, "live8"});
  EXPECT_EQ(p.next_seq(), 9u);
  auto d = dealer(p.replay_endpoint());
  auto r = replay(d, 4);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], (std::vector<std::string>{"", be8(5), "h5"}));
  EXPECT_EQ(r[1], (std::vector<std::string>{"", be8(7), "live7"}));
  EXPECT_EQ(r[2], (std::vector<std::string>{"", be8(8), "live8"}));
  EXPECT_EQ(r[3][1], END);
  // The recorded engine restarted: seqs begin again and the ring forgets the old incarnation.
  p.publish_frames({"kv", be8(0), "new0"});
  r = replay(d, 0);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], (std::vector<std::string>{"", be8(0), "new0"}));
}

TEST_F(Publisher, AnXpubSeesItsFirstSubscriber) {
  publisher_options o;
  o.topic = "kv";
  o.xpub = true;
  publisher p(o);
  EXPECT_FALSE(p.wait_for_subscriber(std::chrono::milliseconds(0)));
  auto s = sub(p.live_endpoint(), "kv");
  EXPECT_TRUE(p.wait_for_subscriber(std::chrono::seconds(10)));
  p.publish_frames({"kv", be8(0), "x"});
  auto frames = recv_all(s);
  for (int i = 0; i < 100 && frames.empty(); ++i) frames = recv_all(s);
  EXPECT_EQ(frames, (std::vector<std::string>{"kv", be8(0), "x"}))
      << "subscribed means the next message arrives";
  publisher plain(publisher_options{});
  EXPECT_FALSE(plain.wait_for_subscriber(std::chrono::milliseconds(10))) << "a PUB cannot tell";
}

}  // namespace
}  // namespace kvrelay::fake
