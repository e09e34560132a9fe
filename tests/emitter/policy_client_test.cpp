// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// policy_client against a real gRPC server on loopback: delivery, acks, concurrency, failure
// codes, deadlines, teardown with calls in flight, and TLS / mTLS with certificates generated at
// run time.
#include "actors/emitter/policy_client.hpp"

#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/emitter/policy_port.hpp"
#include "tests/support/unprivileged.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace ic = inferencecache::v1alpha1;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using google::protobuf::util::MessageDifferencer;
using kvrelay::client_options;
using kvrelay::policy_client;
using kvrelay::rpc_result;

namespace {

constexpr int k_ok = 0;
constexpr int k_cancelled = 1;
constexpr int k_invalid_argument = 3;
constexpr int k_deadline_exceeded = 4;
constexpr int k_unavailable = 14;

// -- the fake policy server ---------------------------------------------------------------------

// Records everything it receives. Answers at once by default; `hang` makes it never answer (until
// the client cancels), `fail` answers UNAVAILABLE, `barrier` holds every PublishEvent until that
// many have arrived (proof they were all in flight together).
class fake_policy final : public ic::InferenceCache::Service {
 public:
  grpc::Status ReportCacheState(grpc::ServerContext* ctx,
                                grpc::ServerReader<ic::CacheStateUpdate>* reader,
                                ic::Ack* ack) override {
    std::vector<ic::CacheStateUpdate> got;
    ic::CacheStateUpdate u;
    while (reader->Read(&u)) got.push_back(u);
    {
      std::lock_guard<std::mutex> lk(mu);
      streams.push_back(std::move(got));
      record_peer(ctx);
      cv.notify_all();
    }
    return respond(ctx, ack);
  }

  grpc::Status PublishEvent(grpc::ServerContext* ctx, const ic::CacheEvent* ev,
                            ic::Ack* ack) override {
    {
      std::lock_guard<std::mutex> lk(mu);
      events.push_back(*ev);
      record_peer(ctx);
      cv.notify_all();
    }
    return respond(ctx, ack);
  }

  std::size_t stream_count() {
    std::lock_guard<std::mutex> lk(mu);
    return streams.size();
  }
  std::size_t event_count() {
    std::lock_guard<std::mutex> lk(mu);
    return events.size();
  }
  // Waits until the server has seen `n` report streams and `m` events.
  bool wait_seen(std::size_t n, std::size_t m, std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, limit, [&] { return streams.size() >= n && events.size() >= m; });
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<ic::CacheStateUpdate>> streams;
  std::vector<ic::CacheEvent> events;
  std::vector<std::string> peer_common_names;
  bool accept = true;
  bool hang = false;
  bool fail = false;
  std::size_t barrier = 0;

 private:
  void record_peer(grpc::ServerContext* ctx) {
    auto auth = ctx->auth_context();
    if (!auth) return;
    for (const auto& v : auth->FindPropertyValues("x509_common_name"))
      peer_common_names.emplace_back(v.data(), v.size());
  }

  grpc::Status respond(grpc::ServerContext* ctx, ic::Ack* ack) {
    std::unique_lock<std::mutex> lk(mu);
    // IsCancelled has no notification, so poll it; 5 ms is far below every timing asserted.
    while (!ctx->IsCancelled() && (hang || events.size() < barrier)) cv.wait_for(lk, 5ms);
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    if (fail) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "refused by test");
    ack->set_accepted(accept);
    return grpc::Status::OK;
  }
};

struct test_server {
  explicit test_server(std::shared_ptr<grpc::ServerCredentials> creds =
                           grpc::InsecureServerCredentials(),
                       int fixed_port = 0) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(fixed_port), std::move(creds), &port);
    b.RegisterService(&svc);
    server = b.BuildAndStart();
  }
  ~test_server() { stop(); }
  void stop() {
    if (!server) return;
    server->Shutdown(std::chrono::system_clock::now() + 1s);
    server->Wait();
    server.reset();
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }

  fake_policy svc;  // declared first: must outlive the server
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// -- client-side helpers ------------------------------------------------------------------------

// Collects results from `done` callbacks on gRPC threads.
struct collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<rpc_result> results;

  policy_client::callback cb() {
    return [this](rpc_result r) {
      std::lock_guard<std::mutex> lk(mu);
      results.push_back(std::move(r));
      cv.notify_all();
    };
  }
  // Waits for `n` results; returns a copy of them (fewer on timeout).
  std::vector<rpc_result> wait(std::size_t n, std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, limit, [&] { return results.size() >= n; });
    return results;
  }
};

std::unique_ptr<policy_client> make_client(const client_options& o) {
  std::string err;
  auto c = policy_client::make(o, err);
  EXPECT_TRUE(c) << err;
  EXPECT_EQ(err, "");
  return c;
}

client_options plain(const std::string& target, std::chrono::milliseconds timeout = 5s) {
  client_options o;
  o.target = target;
  o.rpc_timeout = timeout;
  return o;
}

std::shared_ptr<const ic::CacheStateUpdate> sample_update(int salt = 0) {
  auto u = std::make_shared<ic::CacheStateUpdate>();
  u->set_replica_id("vllm-0");
  u->set_model_id("llama");
  u->set_tenant_id("tenant-a");
  u->set_hash_scheme("xxh3-64-s1337");
  u->set_timestamp_us(1767225600000000 + salt);
  auto* p = u->add_prefixes();
  p->set_prefix_hash(std::string("\x3d\xa0\xff\x8d\xcd\x1d\x4e\x46", 8));
  p->set_token_count(128);
  p->set_tier(ic::CACHE_TIER_T1);
  p->set_adapter_id("sql-lora");
  auto* q = u->add_prefixes();
  q->set_prefix_hash(std::string("\x4c\x9d\x2e\x38\x32\xe3\x83\xa5", 8));
  q->set_token_count(256);
  q->set_tier(ic::CACHE_TIER_T2);
  u->mutable_stats()->set_hit_rate(0.5f);
  return u;
}

std::shared_ptr<const ic::CacheEvent> sample_event(std::uint64_t n = 0) {
  auto e = std::make_shared<ic::CacheEvent>();
  e->set_type(ic::CacheEvent::PREFIX_EVICTED);
  e->set_replica_id("vllm-0");
  e->set_model_id("llama");
  e->set_tenant_id("tenant-a");
  std::string be8(8, '\0');
  for (int i = 0; i < 8; ++i) be8[static_cast<std::size_t>(i)] = static_cast<char>(n >> (56 - 8 * i));
  e->set_prefix_hash(be8);
  e->set_timestamp_us(1767225600500000);
  return e;
}

// -- plaintext ----------------------------------------------------------------------------------

TEST(PolicyClient, ReportDeliversExactlyTheMessageAndReturnsTheAck) {
  test_server srv;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  auto msg = sample_update();
  collector col;
  client->report(msg, col.cb());
  auto rs = col.wait(1);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].code, k_ok) << rs[0].message;
  EXPECT_TRUE(rs[0].accepted);
  EXPECT_GT(rs[0].latency.count(), 0);

  // The Ack's flag is passed through, not assumed.
  srv.svc.accept = false;
  client->report(msg, col.cb());
  rs = col.wait(2);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].code, k_ok);
  EXPECT_FALSE(rs[1].accepted);

  std::lock_guard<std::mutex> lk(srv.svc.mu);
  ASSERT_EQ(srv.svc.streams.size(), 2u);  // one stream per report
  for (const auto& s : srv.svc.streams) {
    ASSERT_EQ(s.size(), 1u);  // carrying exactly one message
    EXPECT_TRUE(MessageDifferencer::Equals(s[0], *msg)) << s[0].DebugString();
  }
}

TEST(PolicyClient, PublishDeliversTheEvent) {
  test_server srv;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  auto ev = sample_event(0xDEADBEEF);
  collector col;
  client->publish(ev, col.cb());
  auto rs = col.wait(1);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].code, k_ok) << rs[0].message;
  EXPECT_TRUE(rs[0].accepted);
  std::lock_guard<std::mutex> lk(srv.svc.mu);
  ASSERT_EQ(srv.svc.events.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(srv.svc.events[0], *ev));
  EXPECT_EQ(srv.svc.streams.size(), 0u);
}

TEST(PolicyClient, SixtyFourPublishesInFlightAtOnceAllComplete) {
  test_server srv;
  srv.svc.barrier = 64;  // nobody is answered before all 64 have arrived
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  collector col;
  for (std::uint64_t i = 0; i < 64; ++i) client->publish(sample_event(i), col.cb());
  EXPECT_EQ(client->in_flight(), 64u);
  auto rs = col.wait(64);
  ASSERT_EQ(rs.size(), 64u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.code, k_ok) << r.message;
    EXPECT_TRUE(r.accepted);
  }
  std::set<std::string> keys;
  {
    std::lock_guard<std::mutex> lk(srv.svc.mu);
    for (const auto& e : srv.svc.events) keys.insert(e.prefix_hash());
  }
  EXPECT_EQ(keys.size(), 64u);
  // The count drops once each callback has returned.
  for (int i = 0; i < 200 && client->in_flight() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(client->in_flight(), 0u);
}

TEST(PolicyClient, ServerDownIsUnavailablePromptly) {
  std::string target;
  {
    test_server gone;
    target = gone.target();
  }  // nothing listens on that port any more
  auto client = make_client(plain(target, 60s));
  ASSERT_TRUE(client);
  collector col;
  const auto t0 = std::chrono::steady_clock::now();
  client->report(sample_update(), col.cb());
  client->publish(sample_event(), col.cb());
  auto rs = col.wait(2, 60s);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.code, k_unavailable) << r.message;
    EXPECT_FALSE(r.accepted);
  }
  // Fails fast: a call that waited for the minute's deadline is the failure looked for (half of
  // it is a bound no loaded machine reaches otherwise).
  EXPECT_LT(took, 30s);
}

TEST(PolicyClient, SilentServerIsDeadlineExceededWithinTheTimeout) {
  test_server srv;
  srv.svc.hang = true;
  auto client = make_client(plain(srv.target(), 200ms));
  ASSERT_TRUE(client);
  collector col;
  const auto t0 = std::chrono::steady_clock::now();
  client->report(sample_update(), col.cb());
  client->publish(sample_event(), col.cb());
  auto rs = col.wait(2);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.code, k_deadline_exceeded) << r.message;
    EXPECT_FALSE(r.accepted);
    EXPECT_GE(r.latency, 190ms);
    // The deadline ended them, not something else: far below the default 5 s, yet loose enough
    // for a loaded machine (how fast is not this test's business).
    EXPECT_LT(r.latency, 4s);
  }
  EXPECT_LT(took, 4s);
  EXPECT_TRUE(srv.svc.wait_seen(1, 1));  // both calls really reached the server
}

TEST(PolicyClient, DeadlinesAreTheClientsOwnEvenAgainstAPeerThatNeverSpeaks) {
  // A listener that never accepts: the kernel completes the TCP handshake, nobody answers the
  // HTTP/2 preface, so no server can end a call, and the channel never leaves CONNECTING. Only
  // the client's own deadline ends these calls: a channel setting that turned off its deadline
  // checks (gRPC's minimal stack does by default) would hang them, and rule UQ11 with them.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  {
    auto client = make_client(plain("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), 200ms));
    ASSERT_TRUE(client);
    collector col;
    client->report(sample_update(), col.cb());
    client->publish(sample_event(), col.cb());
    auto rs = col.wait(2, 20s);
    ASSERT_EQ(rs.size(), 2u);
    for (const auto& r : rs) {
      EXPECT_EQ(r.code, k_deadline_exceeded) << r.message;
      EXPECT_GE(r.latency, 190ms);
    }
  }
  ::close(fd);
}

// Every policy client of the process shares one completion queue and its one thread
// (kvr.publish): completions and connectivity watches of every target run there, one after
// the other. A target that never answers must cost a live one nothing: while calls wait on a
// silent server (held until their 5 s deadline) and a peer that never speaks (its channel stuck
// connecting, its watch firing), a hundred calls to a live server each complete well inside
// that deadline. One that waited behind the others' completions would take the deadline.
TEST(PolicyClient, ASilentTargetCostsALiveOneNothing) {
  test_server silent;
  silent.svc.hang = true;
  test_server live;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // accepts nothing: never speaks HTTP/2
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  constexpr auto deadline = 5s;
  {
    auto mute = make_client(plain(silent.target(), deadline));
    auto dead = make_client(plain("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), deadline));
    auto ok = make_client(plain(live.target(), deadline));
    ASSERT_TRUE(mute && dead && ok);
    for (auto* c : {mute.get(), dead.get(), ok.get()}) c->watch_connectivity([](auto) {});
    collector held;
    for (int i = 0; i < 8; ++i) {
      mute->report(sample_update(i), held.cb());
      mute->publish(sample_event(static_cast<uint64_t>(i)), held.cb());
      dead->publish(sample_event(static_cast<uint64_t>(i)), held.cb());
    }
    ASSERT_TRUE(silent.svc.wait_seen(8, 8)) << "the silent server never got the calls";
    std::chrono::microseconds slowest{0};
    for (int i = 0; i < 100; ++i) {
      collector one;
      ok->publish(sample_event(static_cast<uint64_t>(100 + i)), one.cb());
      const auto rs = one.wait(1, 2 * deadline);
      ASSERT_EQ(rs.size(), 1u) << "call " << i << " never completed";
      EXPECT_EQ(rs[0].code, k_ok) << rs[0].message;
      slowest = std::max(slowest, std::chrono::duration_cast<std::chrono::microseconds>(rs[0].latency));
    }
    // Half the deadline: a machine slow enough to miss it is not the failure this looks for.
    EXPECT_LT(slowest.count(), std::chrono::microseconds(deadline / 2).count())
        << "microseconds: a live call waited behind the silent targets' calls";
    std::printf("[ measure  ] slowest of 100 live calls beside silent ones: %lld us\n",
                static_cast<long long>(slowest.count()));
    const auto ended = held.wait(24, 4 * deadline);
    ASSERT_EQ(ended.size(), 24u);
    for (const auto& r : ended) EXPECT_EQ(r.code, k_deadline_exceeded) << r.message;
  }
  ::close(fd);
}

TEST(PolicyClient, ServerErrorIsReportedOnceAndNeverRetried) {
  test_server srv;
  srv.svc.fail = true;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  collector col;
  client->publish(sample_event(), col.cb());
  client->report(sample_update(), col.cb());
  auto rs = col.wait(2);
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.code, k_unavailable);
    EXPECT_EQ(r.message, "refused by test");
    EXPECT_FALSE(r.accepted);
  }
  // A retry would be a second call on the same channel, issued when the first failed. Markers
  // issued after both failures, once they have reached the server, prove the channel delivered
  // everything sent before them: the server must have seen each original exactly once.
  {
    std::lock_guard<std::mutex> lk(srv.svc.mu);
    srv.svc.fail = false;
  }
  client->publish(sample_event(1), col.cb());
  client->report(sample_update(1), col.cb());
  rs = col.wait(4);
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[2].code, k_ok) << rs[2].message;
  EXPECT_EQ(rs[3].code, k_ok) << rs[3].message;
  std::lock_guard<std::mutex> lk(srv.svc.mu);
  ASSERT_EQ(srv.svc.events.size(), 2u) << "the failed publish was sent again";
  EXPECT_TRUE(MessageDifferencer::Equals(srv.svc.events[0], *sample_event()));
  EXPECT_TRUE(MessageDifferencer::Equals(srv.svc.events[1], *sample_event(1)));
  ASSERT_EQ(srv.svc.streams.size(), 2u) << "the failed report was sent again";
  EXPECT_EQ(srv.svc.streams[0].at(0).timestamp_us(), sample_update()->timestamp_us());
  EXPECT_EQ(srv.svc.streams[1].at(0).timestamp_us(), sample_update(1)->timestamp_us());
  EXPECT_EQ(rs.size(), col.wait(5, 0ms).size()) << "a callback ran twice";
}

TEST(PolicyClient, NullMessageIsInvalidArgumentWithoutACall) {
  test_server srv;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  collector col;
  client->report(nullptr, col.cb());
  client->publish(nullptr, col.cb());
  auto rs = col.wait(2, 0ms);  // delivered synchronously
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) EXPECT_EQ(r.code, k_invalid_argument);
  EXPECT_EQ(client->in_flight(), 0u);
  EXPECT_EQ(srv.svc.event_count(), 0u);
}

// Callbacks record whether they ran after the client was gone.
struct teardown_probe {
  std::atomic<bool> destroyed{false};
  std::atomic<int> calls{0};
  std::atomic<int> late{0};
  std::atomic<int> not_cancelled{0};
  policy_client::callback cb() {
    return [this](rpc_result r) {
      if (destroyed.load()) ++late;
      if (r.code != k_cancelled) ++not_cancelled;
      ++calls;
    };
  }
};

// The proof that a late callback of a destroyed client would have run by now: the server ended
// every call it had (a handler returns once the client's cancellation reaches it; Shutdown waits
// for all of them, so no call of that client lives on either side of the wire), and then a fresh
// client's call, issued after all that, completed on gRPC's callback threads.
void settle_after_teardown(test_server& srv) {
  const std::string target = srv.target();
  srv.stop();
  auto marker = make_client(plain(target));
  ASSERT_TRUE(marker);
  collector col;
  marker->publish(sample_event(), col.cb());
  const auto rs = col.wait(1);
  ASSERT_EQ(rs.size(), 1u) << "the marker call never completed";
  EXPECT_EQ(rs[0].code, k_unavailable) << "nothing listens there any more: " << rs[0].message;
}

TEST(PolicyClient, DestructorCancelsCallsInFlightAndNoCallbackRunsAfterIt) {
  test_server srv;
  srv.svc.hang = true;
  teardown_probe probe;
  auto client = make_client(plain(srv.target(), 30s));
  ASSERT_TRUE(client);
  for (int i = 0; i < 8; ++i) {
    client->report(sample_update(i), probe.cb());
    client->publish(sample_event(static_cast<std::uint64_t>(i)), probe.cb());
  }
  ASSERT_TRUE(srv.svc.wait_seen(8, 8));  // all 16 are on the wire and stuck
  EXPECT_EQ(client->in_flight(), 16u);
  const auto t0 = std::chrono::steady_clock::now();
  client.reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  probe.destroyed = true;
  // The calls' deadline is 30 s: a destructor that waited for it is the failure looked for.
  EXPECT_LT(took, 15s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                       << " ms";
  EXPECT_EQ(probe.calls.load(), 16);  // every callback ran, exactly once, before it returned
  EXPECT_EQ(probe.not_cancelled.load(), 0);
  ASSERT_NO_FATAL_FAILURE(settle_after_teardown(srv));
  EXPECT_EQ(probe.calls.load(), 16);
  EXPECT_EQ(probe.late.load(), 0);
}

TEST(PolicyClient, DestructorRightAfterIssuingStillRunsEachCallbackOnce) {
  // Calls that gRPC has not even started yet are the racy case for cancellation.
  test_server srv;
  srv.svc.hang = true;
  teardown_probe probe;
  for (int round = 0; round < 20; ++round) {
    auto client = make_client(plain(srv.target(), 30s));
    ASSERT_TRUE(client);
    client->report(sample_update(round), probe.cb());
    client->publish(sample_event(static_cast<std::uint64_t>(round)), probe.cb());
    client.reset();
    EXPECT_EQ(probe.calls.load(), 2 * (round + 1)) << "round " << round;
  }
  probe.destroyed = true;
  ASSERT_NO_FATAL_FAILURE(settle_after_teardown(srv));
  EXPECT_EQ(probe.calls.load(), 40);
  EXPECT_EQ(probe.late.load(), 0);
}

TEST(PolicyClient, DestroyingRightAfterACompletionNeverCrashes) {
  // The callback thread still owns the finished call for a moment after `done` returns. If the
  // destructor did not wait for that, the channel's last reference would be dropped on gRPC's
  // callback thread, which aborts the process (grpc/grpc#32584); before the fix this crashed
  // about every other run of this binary.
  // Both a success and a fast failure (nothing listens on `gone`), which complete on different
  // gRPC paths.
  std::string gone;
  {
    test_server tmp;
    gone = tmp.target();
  }
  test_server srv;
  for (int round = 0; round < 100; ++round) {
    auto client = make_client(plain(round % 2 ? gone : srv.target()));
    ASSERT_TRUE(client);
    collector col;
    client->report(sample_update(round), col.cb());
    client->publish(sample_event(static_cast<std::uint64_t>(round)), col.cb());
    ASSERT_EQ(col.wait(2).size(), 2u);
    client.reset();  // races the gRPC threads still returning from the callbacks
  }
  EXPECT_EQ(srv.svc.event_count(), 50u);
}

TEST(PolicyClient, SustainedWindowOf64CompletesEveryCall) {
  // 2000 publishes with at most 64 outstanding, the way the emitter drives evictions.
  test_server srv;
  constexpr int total = 2000;
  constexpr int window = 64;
  // Declared before the client: its destructor may still run callbacks that use them.
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0, finished = 0, failed = 0;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < total; ++i) {
    {
      std::unique_lock<std::mutex> lk(mu);
      ASSERT_TRUE(cv.wait_for(lk, 10s, [&] { return outstanding < window; }));
      ++outstanding;
    }
    client->publish(sample_event(static_cast<std::uint64_t>(i)), [&](rpc_result r) {
      std::lock_guard<std::mutex> lk(mu);
      --outstanding;
      ++finished;
      if (r.code != k_ok || !r.accepted) ++failed;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 30s, [&] { return finished == total; }));
  }
  const auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(srv.svc.event_count(), static_cast<std::size_t>(total));
  std::cout << "[ measure  ] " << total << " publishes, window " << window << ": "
            << static_cast<int>(total / secs) << " calls/s\n";
  client.reset();  // must not wait on anything: every callback has returned
}

TEST(PolicyClientDeathTest, DestroyingFromItsOwnCallbackAbortsInsteadOfHanging) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        test_server srv;
        auto owner = std::make_shared<std::unique_ptr<policy_client>>(
            make_client(plain(srv.target())));
        std::atomic<bool> ran{false};
        // The callback drops the last reference to its own client.
        (*owner)->publish(sample_event(), [owner, &ran](rpc_result) {
          ran = true;
          owner->reset();
        });
        for (int i = 0; i < 1000; ++i) std::this_thread::sleep_for(10ms);
      },
      "destroyed from inside its own callback");
}

TEST(PolicyClient, ChannelStateStartsIdleAndTryConnectReachesReady) {
  test_server srv;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  EXPECT_EQ(client->channel_state(), "IDLE");  // lazy: no connection before asked
  client->try_connect();
  std::string st;
  for (int i = 0; i < 500 && (st = client->channel_state()) != "READY"; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(st, "READY");
}

// A source that reuses one message for all it produces, as the emitter's does.
class counting_source final : public kvrelay::update_source {
 public:
  explicit counting_source(int n) : left_(n) {}
  const ic::CacheStateUpdate* next() override {
    if (left_ == 0) return nullptr;
    msg_.Clear();
    msg_.set_replica_id("vllm-0");
    msg_.set_timestamp_us(++produced_);
    auto* p = msg_.add_prefixes();
    p->set_prefix_hash(std::string(8, static_cast<char>(produced_)));
    --left_;
    return &msg_;
  }

 private:
  int left_;
  int produced_ = 0;
  ic::CacheStateUpdate msg_;
};

TEST(PolicyClient, ReportEncodedWritesEveryMessageInOrderOnOneStream) {
  test_server srv;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  collector col;
  counting_source three_src(3), one_src(1);
  const auto three_enc = kvrelay::policy_client::encode(three_src);
  EXPECT_EQ(kvrelay::policy_client::messages_in(*three_enc), 3u);
  EXPECT_GT(kvrelay::policy_client::bytes_in(*three_enc), 3u * 8);
  client->report_encoded(three_enc, col.cb());
  client->report_encoded(kvrelay::policy_client::encode(one_src), col.cb());
  auto rs = col.wait(2);
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) EXPECT_EQ(r.code, k_ok) << r.message;
  std::lock_guard<std::mutex> lk(srv.svc.mu);
  ASSERT_EQ(srv.svc.streams.size(), 2u);
  const auto& three = srv.svc.streams[0].size() == 3 ? srv.svc.streams[0] : srv.svc.streams[1];
  ASSERT_EQ(three.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(three[static_cast<std::size_t>(i)].timestamp_us(), i + 1) << "in order";
    EXPECT_EQ(three[static_cast<std::size_t>(i)].prefixes_size(), 1);
  }
}

// One encoding, sent to two servers at once: both get the same messages, and each call's Ack
// is its own.
TEST(PolicyClient, OneEncodedStreamGoesToSeveralServers) {
  test_server a, b;
  auto ca = make_client(plain(a.target()));
  auto cb = make_client(plain(b.target()));
  ASSERT_TRUE(ca && cb);
  {
    std::lock_guard<std::mutex> lk(b.svc.mu);
    b.svc.accept = false;
  }
  counting_source src(2);
  const auto enc = kvrelay::policy_client::encode(src);
  collector col_a, col_b;
  for (int i = 0; i < 3; ++i) {
    ca->report_encoded(enc, col_a.cb());
    cb->report_encoded(enc, col_b.cb());
  }
  const auto ra = col_a.wait(3), rb = col_b.wait(3);
  ASSERT_EQ(ra.size(), 3u);
  ASSERT_EQ(rb.size(), 3u);
  for (const auto& r : ra) EXPECT_TRUE(r.code == k_ok && r.accepted) << r.message;
  for (const auto& r : rb) EXPECT_TRUE(r.code == k_ok && !r.accepted) << "b's own Ack";
  for (auto* srv : {&a, &b}) {
    std::lock_guard<std::mutex> lk(srv->svc.mu);
    ASSERT_EQ(srv->svc.streams.size(), 3u);
    for (const auto& st : srv->svc.streams) {
      ASSERT_EQ(st.size(), 2u);
      EXPECT_EQ(st[0].timestamp_us(), 1);
      EXPECT_EQ(st[1].timestamp_us(), 2);
      EXPECT_EQ(st[1].prefixes(0).prefix_hash(), std::string(8, '\2'));
    }
  }
}

TEST(PolicyClient, ReportEncodedWithoutAMessageIsInvalidArgumentWithoutACall) {
  test_server srv;
  auto client = make_client(plain(srv.target()));
  ASSERT_TRUE(client);
  collector col;
  counting_source none(0);
  client->report_encoded(kvrelay::policy_client::encode(none), col.cb());
  client->report_encoded(nullptr, col.cb());
  auto rs = col.wait(2, 1s);
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) EXPECT_EQ(r.code, k_invalid_argument);
  EXPECT_EQ(srv.svc.stream_count(), 0u);
}

// Records the states the connectivity thread reports.
struct state_log {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<kvrelay::emitter::channel_state> seen;
  std::function<void(kvrelay::emitter::channel_state)> cb() {
    return [this](kvrelay::emitter::channel_state s) {
      std::lock_guard<std::mutex> lk(mu);
      seen.push_back(s);
      cv.notify_all();
    };
  }
  // Waits until a state in `want` is reported after index `from`; returns its index or -1.
  int wait_for(kvrelay::emitter::channel_state want, std::size_t from,
               std::chrono::milliseconds limit = 20s) {
    std::unique_lock<std::mutex> lk(mu);
    int at = -1;
    cv.wait_for(lk, limit, [&] {
      for (std::size_t i = from; i < seen.size(); ++i)
        if (seen[i] == want) return (at = static_cast<int>(i)) >= 0;
      return false;
    });
    return at;
  }
};

TEST(PolicyClient, ConnectivityWatchSeesTheTransportGoAndComeBackWithoutAnyCall) {
  using kvrelay::emitter::channel_state;
  auto srv = std::make_unique<test_server>();
  const int port = srv->port;
  auto client = make_client(plain(srv->target()));
  ASSERT_TRUE(client);
  state_log log;
  client->try_connect();
  client->watch_connectivity(log.cb());
  const int ready = log.wait_for(channel_state::ready, 0);
  ASSERT_GE(ready, 0);
  srv.reset();  // the server goes away: the transport is lost
  int lost = -1;
  {
    std::unique_lock<std::mutex> lk(log.mu);
    log.cv.wait_for(lk, 20s, [&] {
      for (std::size_t i = static_cast<std::size_t>(ready) + 1; i < log.seen.size(); ++i)
        if (log.seen[i] != channel_state::ready) return (lost = static_cast<int>(i)) >= 0;
      return false;
    });
  }
  ASSERT_GE(lost, 0) << "the channel never left READY";
  // A new server on the same port: the watch reconnects on its own (no call is made).
  srv = std::make_unique<test_server>(grpc::InsecureServerCredentials(), port);
  ASSERT_EQ(srv->port, port);
  EXPECT_GE(log.wait_for(channel_state::ready, static_cast<std::size_t>(lost) + 1), 0)
      << "never READY again";
  EXPECT_EQ(srv->svc.stream_count() + srv->svc.event_count(), 0u);
}

TEST(PolicyClient, KeepaliveOptionsAreValidated) {
  client_options o;
  o.keepalive_time = -1ms;
  EXPECT_NE(policy_client::validate(o).find("keepalive_time"), std::string::npos);
  o.keepalive_time = 1000ms;
  o.keepalive_timeout = 0ms;
  EXPECT_NE(policy_client::validate(o).find("keepalive_timeout"), std::string::npos);
  o.keepalive_time = 0ms;  // off: the timeout does not matter
  EXPECT_EQ(policy_client::validate(o), "");
}

// -- the gRPC port: a unit's stream as the server sees it ---------------------------------------

struct port_events {
  std::shared_ptr<kvrelay::emitter::port_inbox> inbox =
      std::make_shared<kvrelay::emitter::port_inbox>();
  std::mutex mu;
  std::condition_variable cv;
  std::size_t wakes = 0;
  port_events() {
    inbox->bind([this] {
      std::lock_guard<std::mutex> lk(mu);
      ++wakes;
      cv.notify_all();
    });
  }
  // Completions (not channel changes) received so far, after waiting for `n` of them.
  std::vector<kvrelay::emitter::port_event> completions(std::size_t n,
                                                        std::chrono::milliseconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    std::vector<kvrelay::emitter::port_event> batch;
    while (got.size() < n && std::chrono::steady_clock::now() < until) {
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_for(lk, 20ms);
      }
      inbox->take(batch);
      for (auto& e : batch)
        if (e.what == kvrelay::emitter::port_event::kind::completed) got.push_back(std::move(e));
    }
    return got;
  }
  std::vector<kvrelay::emitter::port_event> got;
};

TEST(GrpcPort, AUnitIsOneStreamCutIntoMessagesBySectionAndSize) {
  test_server srv;
  port_events ev;
  kvrelay::emitter::port_config cfg;
  cfg.client = plain(srv.target());
  cfg.identity = {"vllm-0", "llama", "tenant-a", "vllm"};
  cfg.max_entries_per_message = 2;
  std::string err;
  auto port = kvrelay::emitter::make_grpc_port(cfg, ev.inbox, err);
  ASSERT_TRUE(port) << err;
  auto u = std::make_shared<kvrelay::emit_unit>();
  u->adds_ts_us = 5000;
  for (std::uint64_t i = 1; i <= 3; ++i) u->adds.push_back({i, 16, kvrelay::tier::t1, "sql"});
  u->downgrades.push_back({7000, {{10, 32, kvrelay::tier::t2, ""}}});
  u->downgrades.push_back({8000, {{11, 48, kvrelay::tier::t2, ""}}});
  for (std::uint64_t i = 20; i < 25; ++i) u->evicts.push_back({i, i == 20 ? "sql" : "", 9000});
  port->stream(42, u, true);
  auto done = ev.completions(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].call, 42u);
  EXPECT_EQ(done[0].code, k_ok) << done[0].message;
  std::lock_guard<std::mutex> lk(srv.svc.mu);
  ASSERT_EQ(srv.svc.streams.size(), 1u) << "one stream per unit";
  const auto& s = srv.svc.streams[0];
  // adds 2+1, one message per downgrade group, expirations 2+2+1.
  ASSERT_EQ(s.size(), 7u);
  const std::vector<std::pair<std::int64_t, int>> want{{5000, 2}, {5000, 1}, {7000, 1}, {8000, 1},
                                                       {1, 2},    {1, 2},    {1, 1}};
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].timestamp_us(), want[i].first) << "message " << i;
    EXPECT_EQ(s[i].prefixes_size(), want[i].second) << "message " << i;
    EXPECT_EQ(s[i].replica_id(), "vllm-0");
    EXPECT_EQ(s[i].hash_scheme(), "vllm");
  }
  EXPECT_EQ(s[0].prefixes(0).prefix_hash(), std::string("\0\0\0\0\0\0\0\x01", 8));
  EXPECT_EQ(s[0].prefixes(0).adapter_id(), "sql");
  EXPECT_EQ(s[2].prefixes(0).tier(), ic::CACHE_TIER_T2);
  EXPECT_EQ(s[4].prefixes(0).adapter_id(), "sql");
  EXPECT_EQ(s[4].prefixes(1).adapter_id(), "") << "a reused entry carries no stale adapter";
  EXPECT_EQ(s[4].prefixes(1).token_count(), 0);
  EXPECT_EQ(s[6].prefixes(0).prefix_hash(), std::string("\0\0\0\0\0\0\0\x18", 8));
}

// -- option validation --------------------------------------------------------------------------

class PolicyClientOptions : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("kvrelay_rpc_opts_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    pem = (dir / "ok.pem").string();
    std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    junk = (dir / "junk.txt").string();
    std::ofstream(junk) << "not a certificate\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // Expects `o` to be rejected with a reason mentioning `needle`.
  static void expect_rejected(const client_options& o, const std::string& needle) {
    const auto why = policy_client::validate(o);
    EXPECT_NE(why.find(needle), std::string::npos) << "reason: '" << why << "'";
    std::string err;
    EXPECT_EQ(policy_client::make(o, err), nullptr);
    EXPECT_EQ(err, why);
  }
  fs::path dir;
  std::string pem, junk;
};

TEST_F(PolicyClientOptions, DefaultsArePlaintextAndValid) {
  client_options o;
  EXPECT_EQ(o.target, "127.0.0.1:9090");
  EXPECT_EQ(o.rpc_timeout, 5000ms);
  EXPECT_EQ(policy_client::validate(o), "");
  std::string err = "stale";
  auto c = policy_client::make(o, err);
  EXPECT_TRUE(c);
  EXPECT_EQ(err, "");
}

TEST_F(PolicyClientOptions, RejectsBadValuesWithAReason) {
  client_options o;
  o.target = "";
  expect_rejected(o, "target");
  o = {};
  o.rpc_timeout = 0ms;
  expect_rejected(o, "rpc_timeout");
  o = {};
  o.ca_file = (dir / "missing.pem").string();
  expect_rejected(o, "cannot open ca_file");
  o.ca_file = dir.string();
  expect_rejected(o, "not a regular file");
  o.ca_file = junk;
  expect_rejected(o, "not a PEM file");
  o.ca_file = pem;
  o.cert_file = pem;  // key missing
  expect_rejected(o, "together");
  o.key_file = (dir / "missing.key").string();
  expect_rejected(o, "key_file");
  o = {};
  o.cert_file = pem;
  o.key_file = pem;  // mTLS material but TLS off
  expect_rejected(o, "need ca_file");
  o = {};
  o.server_name = "localhost";
  expect_rejected(o, "needs ca_file");
}

// As the image's user (root reads any file, so as root the check never runs).
TEST_F(PolicyClientOptions, RejectsAnUnreadableFile) {
  fs::permissions(pem, fs::perms::none);
  client_options o;
  o.ca_file = pem;
  const fs::path mine = dir;
  KVRELAY_EXPECT_UNPRIVILEGED(
      [&]() -> std::string {
        const auto why = policy_client::validate(o);
        if (why.find("Permission denied") == std::string::npos)
          return "validate says '" + why + "', not that the file is not readable";
        std::string err;
        if (policy_client::make(o, err) != nullptr || err != why)
          return "make() accepted it or said something else: '" + err + "'";
        return "";
      },
      [mine] {
        std::error_code ec;
        fs::remove_all(mine, ec);
      });
}

// -- TLS and mutual TLS -------------------------------------------------------------------------

// Generates, with the openssl CLI, two CAs, a server certificate (SAN localhost and 127.0.0.1)
// and a client certificate, all signed by the first CA.
class PolicyClientTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new fs::path(fs::temp_directory_path() / ("kvrelay_rpc_tls_" + std::to_string(::getpid())));
    fs::create_directories(*dir);
    const std::string d = dir->string();
    auto write = [&](const char* name, const char* text) { std::ofstream(*dir / name) << text; };
    write("ca.cnf",
          "[req]\ndistinguished_name=dn\nx509_extensions=ext\nprompt=no\n"
          "[dn]\nCN=kvrelay-test-ca\n"
          "[ext]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
          "subjectKeyIdentifier=hash\n");
    write("other-ca.cnf",
          "[req]\ndistinguished_name=dn\nx509_extensions=ext\nprompt=no\n"
          "[dn]\nCN=kvrelay-other-ca\n"
          "[ext]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n");
    write("server.cnf", "[req]\ndistinguished_name=dn\nprompt=no\n[dn]\nCN=localhost\n");
    write("client.cnf", "[req]\ndistinguished_name=dn\nprompt=no\n[dn]\nCN=kvrelay-client\n");
    write("server.ext",
          "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
          "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n");
    write("client.ext",
          "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
          "extendedKeyUsage=clientAuth\n");
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string cmd =
        "cd '" + d + "' && exec >openssl.log 2>&1 && " +
        "openssl req -x509 " + key + " -keyout ca.key -out ca.pem -days 2 -config ca.cnf && " +
        "openssl req -x509 " + key + " -keyout other-ca.key -out other-ca.pem -days 2 " +
        "-config other-ca.cnf && " +
        "openssl req " + key + " -keyout server.key -out server.csr -config server.cnf && " +
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial " +
        "-out server.pem -days 2 -extfile server.ext && " +
        "openssl req " + key + " -keyout client.key -out client.csr -config client.cnf && " +
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial " +
        "-out client.pem -days 2 -extfile client.ext";
    generated = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir, ec);
    delete dir;
    dir = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(generated) << "openssl failed; see " << (*dir / "openssl.log");
  }

  static std::string path(const char* name) { return (*dir / name).string(); }
  static std::string slurp(const char* name) {
    std::ifstream in(*dir / name);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  static std::shared_ptr<grpc::ServerCredentials> server_creds(bool require_client_cert) {
    grpc::SslServerCredentialsOptions o(
        require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    o.pem_root_certs = slurp("ca.pem");
    o.pem_key_cert_pairs.push_back({slurp("server.key"), slurp("server.pem")});
    return grpc::SslServerCredentials(o);
  }
  // One report and one publish; returns both results.
  static std::vector<rpc_result> round_trip(const client_options& o) {
    auto client = make_client(o);
    if (!client) return {};
    collector col;
    client->report(sample_update(), col.cb());
    client->publish(sample_event(), col.cb());
    return col.wait(2);
  }
  static client_options tls(const test_server& srv, const char* ca = "ca.pem") {
    client_options o = plain(srv.target());
    o.ca_file = path(ca);
    return o;
  }

  static fs::path* dir;
  static bool generated;
};
fs::path* PolicyClientTls::dir = nullptr;
bool PolicyClientTls::generated = false;

void expect_all(const std::vector<rpc_result>& rs, int code) {
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) {
    EXPECT_EQ(r.code, code) << r.message;
    EXPECT_EQ(r.accepted, code == k_ok);
  }
}

TEST_F(PolicyClientTls, ServerAuthenticatedTlsWorks) {
  test_server srv(server_creds(false));
  expect_all(round_trip(tls(srv)), k_ok);  // 127.0.0.1 matches the IP SAN
  EXPECT_EQ(srv.svc.stream_count(), 1u);
  EXPECT_EQ(srv.svc.event_count(), 1u);
}

TEST_F(PolicyClientTls, ServerNameOverrideIsWhatGetsVerified) {
  test_server srv(server_creds(false));
  auto o = tls(srv);
  o.server_name = "localhost";  // in the SAN
  expect_all(round_trip(o), k_ok);
  o.server_name = "policy.example.com";  // not in the SAN
  expect_all(round_trip(o), k_unavailable);
}

TEST_F(PolicyClientTls, WrongCaFails) {
  test_server srv(server_creds(false));
  expect_all(round_trip(tls(srv, "other-ca.pem")), k_unavailable);
  EXPECT_EQ(srv.svc.event_count(), 0u);
}

TEST_F(PolicyClientTls, PlaintextClientCannotTalkToTlsServer) {
  test_server srv(server_creds(false));
  auto rs = round_trip(plain(srv.target(), 2s));
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) EXPECT_NE(r.code, k_ok);
  EXPECT_EQ(srv.svc.event_count(), 0u);
}

TEST_F(PolicyClientTls, MutualTlsPresentsTheClientCertificate) {
  test_server srv(server_creds(true));
  auto o = tls(srv);
  o.cert_file = path("client.pem");
  o.key_file = path("client.key");
  expect_all(round_trip(o), k_ok);
  std::lock_guard<std::mutex> lk(srv.svc.mu);
  ASSERT_FALSE(srv.svc.peer_common_names.empty());
  for (const auto& cn : srv.svc.peer_common_names) EXPECT_EQ(cn, "kvrelay-client");
}

TEST_F(PolicyClientTls, MutualTlsServerRejectsAClientWithoutCertificate) {
  test_server srv(server_creds(true));
  expect_all(round_trip(tls(srv)), k_unavailable);
  EXPECT_EQ(srv.svc.event_count(), 0u);
  EXPECT_EQ(srv.svc.stream_count(), 0u);
}

}  // namespace
