// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The demo policy server over real gRPC on loopback: the daemon's two producer RPCs in, router
// lookups out, with the e2e expectations E04/E05 of docs/spec/reference-behaviour.md, plus the
// fault hooks (black hole, restart empty) and TLS.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include "base/fingerprint.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "tests/support/skip.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::policy {
namespace {

std::vector<uint32_t> range(uint32_t first, uint32_t n) {
  std::vector<uint32_t> out(n);
  for (uint32_t i = 0; i < n; ++i) out[i] = first + i;
  return out;
}

std::unique_ptr<ic::InferenceCache::Stub> stub_for(
    const std::string& target,
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials(),
    const std::string& ssl_name = "") {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  if (!ssl_name.empty()) args.SetSslTargetNameOverride(ssl_name);
  return ic::InferenceCache::NewStub(grpc::CreateCustomChannel(target, creds, args));
}

void deadline(grpc::ClientContext& ctx, int ms = 5000) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

server_options manual_sweep() {
  server_options o;
  o.sweep_interval_us = 0;  // the tests sweep (or not) themselves
  return o;
}

struct PolicyService : ::testing::Test {
  policy_server server{manual_sweep()};
  std::unique_ptr<ic::InferenceCache::Stub> stub;
  const std::vector<uint32_t> prompt = range(5000, 256);  // the e2e prompt, 2 blocks of 128

  void SetUp() override {
    ASSERT_TRUE(server.start());
    ASSERT_GT(server.port(), 0);
    stub = stub_for(server.target());
  }

  grpc::Status report(const std::vector<ic::CacheStateUpdate>& updates) {
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::Ack ack;
    auto writer = stub->ReportCacheState(&ctx, &ack);
    for (const auto& u : updates) EXPECT_TRUE(writer->Write(u));
    writer->WritesDone();
    auto st = writer->Finish();
    if (st.ok()) {
      EXPECT_TRUE(ack.accepted());
    }
    return st;
  }

  // What the daemon sends after fingerprinting the fake engine's 2 blocks.
  ic::CacheStateUpdate stored_prompt() {
    ic::CacheStateUpdate u;
    u.set_replica_id("fake-engine-0");
    u.set_model_id("fake-model");
    u.set_tenant_id("tenant-e2e");
    u.set_hash_scheme("vllm");
    const auto prefixes = fingerprint::prefixes(prompt, 128);
    for (size_t i = 0; i < prefixes.size(); ++i) {
      auto* p = u.add_prefixes();
      p->set_prefix_hash(fingerprint::to_be8(prefixes[i]));
      p->set_token_count(static_cast<int32_t>(128 * (i + 1)));
      p->set_tier(ic::CACHE_TIER_T1);
    }
    return u;
  }

  ic::LookupRouteResponse lookup(const std::vector<std::string>& hashes,
                                 const std::vector<int32_t>& counts) {
    ic::LookupRouteRequest r;
    r.set_model_id("fake-model");
    r.set_tenant_id("tenant-e2e");
    r.set_hash_scheme("vllm");
    for (const auto& h : hashes) r.add_block_hashes(h);
    for (int32_t c : counts) r.add_block_token_counts(c);
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::LookupRouteResponse resp;
    EXPECT_TRUE(stub->LookupRoute(&ctx, r, &resp).ok());
    return resp;
  }
  ic::LookupRouteResponse lookup_prompt(const std::vector<uint32_t>& tokens) {
    const auto q = fingerprint::query(tokens, 128);
    return lookup(q.block_hashes, q.block_token_counts);
  }

  grpc::Status publish(ic::CacheEvent::Type type, const std::string& key = "", int ms = 5000) {
    ic::CacheEvent e;
    e.set_type(type);
    e.set_replica_id("fake-engine-0");
    e.set_model_id("fake-model");
    e.set_tenant_id("tenant-e2e");
    e.set_prefix_hash(key);
    grpc::ClientContext ctx;
    deadline(ctx, ms);
    ic::Ack ack;
    auto st = stub->PublishEvent(&ctx, e, &ack);
    if (st.ok()) {
      EXPECT_TRUE(ack.accepted());
    }
    return st;
  }

  int64_t total_prefixes() {
    ic::GetCacheStateRequest r;
    r.set_model_id("fake-model");
    r.set_tenant_id("tenant-e2e");
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::GetCacheStateResponse resp;
    EXPECT_TRUE(stub->GetCacheState(&ctx, r, &resp).ok());
    return resp.summary().total_prefixes();
  }
};

TEST_F(PolicyService, PrefixMatchAffinityAndEngineHashesLikeE04) {
  ASSERT_TRUE(report({stored_prompt()}).ok());
  auto two = lookup_prompt(prompt);
  EXPECT_EQ(two.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(two.replica_scores_size(), 1);
  EXPECT_EQ(two.replica_scores(0).replica_id(), "fake-engine-0");
  EXPECT_EQ(two.replica_scores(0).matched_tokens(), 256);
  auto one = lookup_prompt(range(5000, 128));
  EXPECT_EQ(one.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(one.replica_scores_size(), 1);
  EXPECT_EQ(one.replica_scores(0).matched_tokens(), 128);
  auto novel = lookup_prompt(range(90000, 256));
  EXPECT_EQ(novel.reason_code(), "AFFINITY_HINT");
  ASSERT_EQ(novel.replica_scores_size(), 1);
  EXPECT_EQ(novel.replica_scores(0).matched_tokens(), 0);
  // The engine's own block hashes are not index keys: never a prefix match.
  auto engine = lookup({fingerprint::to_be8(0xE000), fingerprint::to_be8(0xE001)}, {128, 128});
  EXPECT_EQ(engine.reason_code(), "AFFINITY_HINT");
  ASSERT_EQ(engine.replica_scores_size(), 1);
  EXPECT_EQ(engine.replica_scores(0).matched_tokens(), 0);
  EXPECT_EQ(total_prefixes(), 2);
  EXPECT_EQ(server.calls().report_messages, 1u);
  EXPECT_EQ(server.calls().lookup, 4u);
}

TEST_F(PolicyService, NothingIndexedIsNoHintLikeE05) {
  ASSERT_TRUE(report({}).ok());
  EXPECT_EQ(total_prefixes(), 0);
  auto resp = lookup_prompt(prompt);
  EXPECT_EQ(resp.reason_code(), "NO_HINT");
  EXPECT_EQ(resp.replica_scores_size(), 0);
}

TEST_F(PolicyService, EvictionShortensTheMatchAndClearForgetsTheReplica) {
  ASSERT_TRUE(report({stored_prompt()}).ok());
  const auto q = fingerprint::query(prompt, 128);
  ASSERT_TRUE(publish(ic::CacheEvent::PREFIX_EVICTED, q.block_hashes[1]).ok());
  auto resp = lookup_prompt(prompt);
  EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores_size(), 1);
  EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 128);
  ASSERT_TRUE(publish(ic::CacheEvent::ALL_CLEARED).ok());
  EXPECT_EQ(total_prefixes(), 0);
  EXPECT_EQ(lookup_prompt(prompt).reason_code(), "NO_HINT");
}

TEST_F(PolicyService, OtherRpcsAnswerValidResponses) {
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::RenderTemplateRequest r;
    ic::RenderTemplateResponse resp;
    EXPECT_TRUE(stub->RenderTemplate(&ctx, r, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::LookupPDRouteRequest r;
    ic::LookupPDRouteResponse resp;
    EXPECT_TRUE(stub->LookupPDRoute(&ctx, r, &resp).ok());
    EXPECT_EQ(resp.reason_code(), "NO_HINT");
  }
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::StreamEventsRequest r;
    auto reader = stub->StreamCacheEvents(&ctx, r);
    ic::CacheEvent e;
    EXPECT_FALSE(reader->Read(&e));
    EXPECT_TRUE(reader->Finish().ok());
  }
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::StreamMetricsRequest r;
    r.add_names("policy_lookups_total");
    auto reader = stub->StreamMetrics(&ctx, r);
    ic::Metric m;
    ASSERT_TRUE(reader->Read(&m));
    EXPECT_EQ(m.name(), "policy_lookups_total");
    EXPECT_FALSE(reader->Read(&m));
    EXPECT_TRUE(reader->Finish().ok());
  }
}

TEST_F(PolicyService, BlackHoleHoldsCallsUntilReleased) {
  server.set_black_hole(true);
  const auto started = std::chrono::steady_clock::now();
  const auto st = publish(ic::CacheEvent::ALL_CLEARED, "", 300);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(250));
  EXPECT_GE(server.calls().black_holed, 1u);
  // A call held right now is released by turning the hole off, and then answered.
  std::thread late([&] { EXPECT_TRUE(publish(ic::CacheEvent::ALL_CLEARED).ok()); });
  for (int i = 0; i < 200 && server.held_calls() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(server.held_calls(), 1u);
  server.set_black_hole(false);
  late.join();
  EXPECT_TRUE(publish(ic::CacheEvent::ALL_CLEARED).ok());
}

TEST_F(PolicyService, StopReleasesHeldCallsPromptly) {
  server.set_black_hole(true);
  // The held call's deadline is a minute: a stop that waited for it is what this looks for, and
  // half of it is a bound no loaded machine reaches otherwise.
  std::thread held([&] { EXPECT_FALSE(publish(ic::CacheEvent::ALL_CLEARED, "", 60000).ok()); });
  for (int i = 0; i < 1000 && server.held_calls() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(server.held_calls(), 0u) << "the call was never held";
  const auto started = std::chrono::steady_clock::now();
  server.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30))
      << "stop() waited for the held call's deadline";
  held.join();
  EXPECT_FALSE(server.running());
}

TEST_F(PolicyService, RestartEmptyOnTheSamePort) {
  ASSERT_TRUE(report({stored_prompt()}).ok());
  const int port = server.port();
  ASSERT_TRUE(server.restart(/*empty_index=*/true));
  EXPECT_EQ(server.port(), port);
  // The same channel reconnects; the restarted server remembers nothing.
  ic::LookupRouteResponse resp;
  for (int i = 0; i < 50; ++i) {
    ic::LookupRouteRequest r;
    r.set_model_id("fake-model");
    r.set_tenant_id("tenant-e2e");
    const auto q = fingerprint::query(prompt, 128);
    for (const auto& h : q.block_hashes) r.add_block_hashes(h);
    for (int32_t c : q.block_token_counts) r.add_block_token_counts(c);
    grpc::ClientContext ctx;
    deadline(ctx, 1000);
    ctx.set_wait_for_ready(true);
    if (stub->LookupRoute(&ctx, r, &resp).ok()) break;
  }
  EXPECT_EQ(resp.reason_code(), "NO_HINT");
  // And keeps what it is told after the restart.
  ASSERT_TRUE(report({stored_prompt()}).ok());
  EXPECT_EQ(lookup_prompt(prompt).reason_code(), "PREFIX_MATCH");
}

// kvrelay's expire mode: an eviction is the entry re-reported 1 µs after the epoch.
TEST_F(PolicyService, AnExpiredEntryIsGoneForRoutingAtOnceAndCountedUntilTheSweep) {
  ASSERT_TRUE(report({stored_prompt()}).ok());
  auto evict = stored_prompt();
  evict.set_timestamp_us(1);
  evict.mutable_prefixes()->DeleteSubrange(0, 1);  // block 2 only
  ASSERT_TRUE(report({evict}).ok());
  auto resp = lookup_prompt(prompt);
  EXPECT_EQ(resp.reason_code(), "PREFIX_MATCH");
  ASSERT_EQ(resp.replica_scores_size(), 1);
  EXPECT_EQ(resp.replica_scores(0).matched_tokens(), 128);
  EXPECT_EQ(total_prefixes(), 2);  // GetCacheState still counts it, as the reference does
  EXPECT_EQ(server.index().sweep(), 1u);
  EXPECT_EQ(total_prefixes(), 1);
  EXPECT_EQ(server.index().counters().prefixes_expired, 1u);
}

TEST(PolicyServiceSweep, SweepsPeriodicallyWhileRunning) {
  server_options o;
  o.sweep_interval_us = 10'000;
  policy_server server(o);
  ASSERT_TRUE(server.start());
  ic::CacheStateUpdate u;
  u.set_replica_id("r0");
  u.set_model_id("m");
  u.set_tenant_id("t");
  u.set_hash_scheme("vllm");
  u.set_timestamp_us(1);
  u.add_prefixes()->set_prefix_hash(fingerprint::to_be8(7));
  server.index().ingest(u);
  const auto swept = [&] {  // bounded poll (5 s): the sweeper runs every 10 ms
    for (int i = 0; i < 500; ++i) {
      if (server.index().entries() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  ASSERT_EQ(server.index().entries(), 1u);
  EXPECT_TRUE(swept());
  EXPECT_EQ(server.index().counters().swept, 1u);
  server.stop();                // joins the sweeper
  ASSERT_TRUE(server.start());  // and a restart brings it back
  server.index().ingest(u);
  EXPECT_TRUE(swept());
}

// kvrelay pings idle connections (server.keepalive_time); the demo server must not answer with
// GOAWAY too_many_pings, which would drop the connection (and, in kvrelay, trigger a resync).
TEST_F(PolicyService, KeepalivePingsWithoutCallsKeepTheConnection) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 100);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // keep pinging without calls
  args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 100);  // default: 5 min
  auto channel =
      grpc::CreateCustomChannel(server.target(), grpc::InsecureChannelCredentials(), args);
  auto pinging = ic::InferenceCache::NewStub(channel);
  {
    grpc::ClientContext ctx;
    deadline(ctx);
    ic::GetCacheStateRequest r;
    ic::GetCacheStateResponse resp;
    ASSERT_TRUE(pinging->GetCacheState(&ctx, r, &resp).ok());
  }
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // A strict server sends GOAWAY after three pings (~300 ms); ten times that with no change.
  EXPECT_FALSE(channel->WaitForStateChange(
      GRPC_CHANNEL_READY, std::chrono::system_clock::now() + std::chrono::seconds(3)))
      << "state now " << channel->GetState(false);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(PolicyServiceTls, ServesTlsAndRequiresClientCertForMtls) {
  const std::string dir = std::string(KVRELAY_BINARY_DIR) + "/tools_test_tls";
  const std::string cmd =
      "mkdir -p " + dir + " && cd " + dir +
      " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=kvrelay-test-ca"
      " -keyout ca.key -out ca.pem >/dev/null 2>&1"
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key"
      " -out server.csr >/dev/null 2>&1"
      " && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext"
      " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1"
      " -extfile san.ext -out server.pem >/dev/null 2>&1"
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=kvrelay -keyout client.key"
      " -out client.csr >/dev/null 2>&1"
      " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1"
      " -out client.pem >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) KVRELAY_SKIP("openssl could not make test certificates");
  const std::string ca = slurp(dir + "/ca.pem");

  server_options o;
  tls_options tls;
  tls.cert_pem = slurp(dir + "/server.pem");
  tls.key_pem = slurp(dir + "/server.key");
  tls.client_ca_pem = ca;
  tls.require_client_cert = true;
  o.tls = tls;
  policy_server server(o);
  ASSERT_TRUE(server.start());

  auto call = [&](std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = stub_for(server.target(), creds, "localhost");
    grpc::ClientContext ctx;
    deadline(ctx, 1500);
    ic::GetCacheStateRequest r;
    ic::GetCacheStateResponse resp;
    return stub->GetCacheState(&ctx, r, &resp);
  };
  grpc::SslCredentialsOptions with_cert;
  with_cert.pem_root_certs = ca;
  with_cert.pem_private_key = slurp(dir + "/client.key");
  with_cert.pem_cert_chain = slurp(dir + "/client.pem");
  EXPECT_TRUE(call(grpc::SslCredentials(with_cert)).ok());
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = ca;
  EXPECT_FALSE(call(grpc::SslCredentials(no_cert)).ok());
  EXPECT_FALSE(call(grpc::InsecureChannelCredentials()).ok());
}

}  // namespace
}  // namespace kvrelay::policy
