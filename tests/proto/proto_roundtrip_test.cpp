// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Every message of inferencecache.v1alpha1.InferenceCache crosses a real gRPC server and client on
// loopback, fully populated, and arrives byte-identical: the contract compiles and is wire-whole.
#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <mutex>

#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace ic = inferencecache::v1alpha1;
using google::protobuf::util::MessageDifferencer;

namespace {

ic::ReplicaStats sample_stats() {
  ic::ReplicaStats s;
  s.set_replica_id("vllm-0");
  s.set_cache_memory_bytes(1 << 30);
  s.set_hit_rate(0.75f);
  s.set_pressure(0.125f);
  s.set_client_version("kvrelay/0.1");
  s.set_t2_hit_tokens(750);
  s.set_t2_query_tokens(1000);
  return s;
}

ic::CacheEvent sample_event() {
  ic::CacheEvent e;
  e.set_type(ic::CacheEvent::PREFIX_EVICTED);
  e.set_replica_id("vllm-0");
  e.set_model_id("llama");
  e.set_tenant_id("tenant-a");
  e.set_prefix_hash(std::string("\x3d\xa0\xff\x8d\xcd\x1d\x4e\x46", 8));
  e.set_timestamp_us(1767225600500000);
  e.set_adapter_id("sql-lora");
  return e;
}

// Records what it received and answers with fully populated responses.
class recording_service final : public ic::InferenceCache::Service {
 public:
  std::mutex mu;
  std::vector<ic::CacheStateUpdate> updates;
  ic::RenderTemplateRequest render_req;
  ic::LookupRouteRequest lookup_req;
  ic::LookupPDRouteRequest pd_req;
  ic::GetCacheStateRequest state_req;
  ic::CacheEvent event;
  ic::StreamEventsRequest stream_events_req;
  ic::StreamMetricsRequest stream_metrics_req;

  grpc::Status RenderTemplate(grpc::ServerContext*, const ic::RenderTemplateRequest* r,
                              ic::RenderTemplateResponse* out) override {
    std::lock_guard lk(mu);
    render_req = *r;
    *out = render_response();
    return grpc::Status::OK;
  }
  grpc::Status LookupRoute(grpc::ServerContext*, const ic::LookupRouteRequest* r,
                           ic::LookupRouteResponse* out) override {
    std::lock_guard lk(mu);
    lookup_req = *r;
    *out = lookup_response();
    return grpc::Status::OK;
  }
  grpc::Status LookupPDRoute(grpc::ServerContext*, const ic::LookupPDRouteRequest* r,
                             ic::LookupPDRouteResponse* out) override {
    std::lock_guard lk(mu);
    pd_req = *r;
    *out = pd_response();
    return grpc::Status::OK;
  }
  grpc::Status GetCacheState(grpc::ServerContext*, const ic::GetCacheStateRequest* r,
                             ic::GetCacheStateResponse* out) override {
    std::lock_guard lk(mu);
    state_req = *r;
    *out = state_response();
    return grpc::Status::OK;
  }
  grpc::Status ReportCacheState(grpc::ServerContext*, grpc::ServerReader<ic::CacheStateUpdate>* in,
                                ic::Ack* ack) override {
    ic::CacheStateUpdate u;
    while (in->Read(&u)) {
      std::lock_guard lk(mu);
      updates.push_back(u);
    }
    ack->set_accepted(true);
    ack->set_reason_code("ok");
    return grpc::Status::OK;
  }
  grpc::Status PublishEvent(grpc::ServerContext*, const ic::CacheEvent* e, ic::Ack* ack) override {
    std::lock_guard lk(mu);
    event = *e;
    ack->set_accepted(true);
    return grpc::Status::OK;
  }
  grpc::Status StreamCacheEvents(grpc::ServerContext*, const ic::StreamEventsRequest* r,
                                 grpc::ServerWriter<ic::CacheEvent>* w) override {
    {
      std::lock_guard lk(mu);
      stream_events_req = *r;
    }
    w->Write(sample_event());
    w->Write(sample_event());
    return grpc::Status::OK;
  }
  grpc::Status StreamMetrics(grpc::ServerContext*, const ic::StreamMetricsRequest* r,
                             grpc::ServerWriter<ic::Metric>* w) override {
    {
      std::lock_guard lk(mu);
      stream_metrics_req = *r;
    }
    w->Write(metric());
    return grpc::Status::OK;
  }

  static ic::RenderTemplateResponse render_response() {
    ic::RenderTemplateResponse r;
    r.set_rendered_prompt("hello");
    r.set_stable_prefix_hash(std::string(8, '\x7f'));
    r.set_tenant_namespace("ns");
    r.set_reason_code("OK");
    r.set_template_revision("r3");
    return r;
  }
  static ic::LookupRouteResponse lookup_response() {
    ic::LookupRouteResponse r;
    auto* s = r.add_replica_scores();
    s->set_replica_id("vllm-0");
    s->set_score(0.9f);
    s->set_matched_tokens(256);
    s->set_estimated_cache_hit_prob(0.8f);
    s->set_tier(ic::CACHE_TIER_T2);
    r.set_reason_code("PREFIX_MATCH");
    r.set_lookup_latency_us(42);
    r.add_token_ids(4294967295u);
    r.set_adapter_id("sql-lora");
    return r;
  }
  static ic::LookupPDRouteResponse pd_response() {
    ic::LookupPDRouteResponse r;
    r.set_prefill_replica_id("p-0");
    r.set_decode_replica_id("d-1");
    r.set_transport_hint("nixl");
    r.set_reason_code("PREFIX_MATCH");
    return r;
  }
  static ic::GetCacheStateResponse state_response() {
    ic::GetCacheStateResponse r;
    *r.add_replicas() = sample_stats();
    r.mutable_summary()->set_total_prefixes(12);
    r.mutable_summary()->set_hot_prefixes(3);
    return r;
  }
  static ic::Metric metric() {
    ic::Metric m;
    m.set_name("kvrelay_blocks");
    m.set_type("gauge");
    (*m.mutable_labels())["adapter"] = "sql-lora";
    m.set_value(3.5);
    m.set_timestamp_us(-1);
    return m;
  }
};

class ProtoRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&svc_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
    auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                        grpc::InsecureChannelCredentials(), args);
    stub_ = ic::InferenceCache::NewStub(ch);
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<grpc::ClientContext> ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return c;
  }

  int port_ = 0;
  recording_service svc_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ic::InferenceCache::Stub> stub_;
};

}  // namespace

TEST_F(ProtoRoundTrip, ReportCacheStateCarriesEveryField) {
  ic::CacheStateUpdate u;
  u.set_replica_id("vllm-0");
  u.set_model_id("llama");
  u.set_tenant_id("tenant-a");
  u.set_hash_scheme("vllm");
  u.set_timestamp_us(1767225600500000);
  auto* p = u.add_prefixes();
  p->set_prefix_hash(std::string("\x4c\x9d\x2e\x38\x32\xe3\x83\xa5", 8));
  p->set_token_count(256);
  p->add_block_hashes(std::string(8, '\x01'));
  p->add_block_token_counts(128);
  p->set_tier(ic::CACHE_TIER_T3);
  p->set_adapter_id("sql-lora");
  *u.mutable_stats() = sample_stats();
  u.set_adapter_id("chat-lora");

  ic::Ack ack;
  auto c = ctx();
  auto writer = stub_->ReportCacheState(c.get(), &ack);
  ASSERT_TRUE(writer->Write(u));
  ASSERT_TRUE(writer->Write(u));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_TRUE(ack.accepted());
  EXPECT_EQ(ack.reason_code(), "ok");
  std::lock_guard lk(svc_.mu);
  ASSERT_EQ(svc_.updates.size(), 2u);
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.updates[0], u));
  EXPECT_EQ(svc_.updates[1].SerializeAsString(), u.SerializeAsString());
}

TEST_F(ProtoRoundTrip, PublishEventCarriesEveryField) {
  ic::Ack ack;
  auto e = sample_event();
  auto c = ctx();
  ASSERT_TRUE(stub_->PublishEvent(c.get(), e, &ack).ok());
  EXPECT_TRUE(ack.accepted());
  std::lock_guard lk(svc_.mu);
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.event, e));
}

TEST_F(ProtoRoundTrip, UnaryLookupsRoundTrip) {
  ic::RenderTemplateRequest rt;
  rt.set_template_ref("t");
  (*rt.mutable_variables())["name"] = "x";
  rt.set_tenant_id("tenant-a");
  ic::RenderTemplateResponse rt_out;
  ASSERT_TRUE(stub_->RenderTemplate(ctx().get(), rt, &rt_out).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(rt_out, recording_service::render_response()));

  ic::LookupRouteRequest lr;
  lr.set_model_id("llama");
  lr.set_tenant_id("tenant-a");
  lr.set_prefix_hash(std::string(8, '\x02'));
  lr.set_prefix_token_count(128);
  lr.set_hash_scheme("vllm");
  lr.mutable_slo()->set_ttft_ms(200);
  lr.mutable_slo()->set_tbt_ms(30);
  lr.add_block_hashes(std::string(8, '\x03'));
  lr.add_block_token_counts(128);
  lr.add_token_ids(151644);
  lr.set_prompt_text("hi");
  lr.set_adapter_id("sql-lora");
  ic::LookupRouteResponse lr_out;
  ASSERT_TRUE(stub_->LookupRoute(ctx().get(), lr, &lr_out).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(lr_out, recording_service::lookup_response()));

  ic::LookupPDRouteRequest pd;
  pd.set_model_id("llama");
  pd.set_tenant_id("t");
  pd.set_prefix_hash("p");
  pd.set_prefix_token_count(64);
  pd.set_pd_topology_ref("topo");
  ic::LookupPDRouteResponse pd_out;
  ASSERT_TRUE(stub_->LookupPDRoute(ctx().get(), pd, &pd_out).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(pd_out, recording_service::pd_response()));

  ic::GetCacheStateRequest gs;
  gs.set_model_id("llama");
  gs.set_tenant_id("t");
  ic::GetCacheStateResponse gs_out;
  ASSERT_TRUE(stub_->GetCacheState(ctx().get(), gs, &gs_out).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(gs_out, recording_service::state_response()));

  std::lock_guard lk(svc_.mu);
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.render_req, rt));
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.lookup_req, lr));
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.pd_req, pd));
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.state_req, gs));
}

TEST_F(ProtoRoundTrip, ServerStreamsRoundTrip) {
  ic::StreamEventsRequest se;
  se.set_model_id("llama");
  se.set_tenant_id("t");
  se.add_types(ic::CacheEvent::ALL_CLEARED);
  se.add_types(ic::CacheEvent::PREFIX_EVICTED);
  auto c1 = ctx();
  auto events = stub_->StreamCacheEvents(c1.get(), se);
  ic::CacheEvent e;
  int n = 0;
  while (events->Read(&e)) {
    EXPECT_TRUE(MessageDifferencer::Equals(e, sample_event()));
    ++n;
  }
  EXPECT_TRUE(events->Finish().ok());
  EXPECT_EQ(n, 2);

  ic::StreamMetricsRequest sm;
  sm.add_names("kvrelay_blocks");
  auto c2 = ctx();
  auto metrics = stub_->StreamMetrics(c2.get(), sm);
  ic::Metric m;
  ASSERT_TRUE(metrics->Read(&m));
  EXPECT_TRUE(MessageDifferencer::Equals(m, recording_service::metric()));
  EXPECT_FALSE(metrics->Read(&m));
  EXPECT_TRUE(metrics->Finish().ok());

  std::lock_guard lk(svc_.mu);
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.stream_events_req, se));
  EXPECT_TRUE(MessageDifferencer::Equals(svc_.stream_metrics_req, sm));
}

TEST(ProtoContract, FieldNumbersAndNamesMatchTheContract) {
  // Spot-check the descriptor against docs/spec/policy-contract.md so a renumbering cannot slip through.
  const auto* csu = ic::CacheStateUpdate::descriptor();
  EXPECT_EQ(csu->full_name(), "inferencecache.v1alpha1.CacheStateUpdate");
  EXPECT_EQ(csu->FindFieldByName("prefixes")->number(), 6);
  EXPECT_EQ(csu->FindFieldByName("stats")->number(), 7);
  EXPECT_EQ(csu->FindFieldByName("adapter_id")->number(), 8);
  const auto* pe = ic::PrefixEntry::descriptor();
  EXPECT_EQ(pe->FindFieldByName("tier")->number(), 5);
  EXPECT_EQ(pe->FindFieldByName("adapter_id")->number(), 6);
  const auto* ev = ic::CacheEvent::descriptor();
  EXPECT_EQ(ev->FindFieldByName("adapter_id")->number(), 7);
  EXPECT_EQ(ic::CacheEvent::ALL_CLEARED, 4);
  EXPECT_EQ(ic::CACHE_TIER_T3, 3);
  const auto* svc = ic::CacheStateUpdate::descriptor()->file()->FindServiceByName("InferenceCache");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ(svc->method_count(), 8);
  EXPECT_TRUE(svc->FindMethodByName("ReportCacheState")->client_streaming());
  EXPECT_FALSE(svc->FindMethodByName("ReportCacheState")->server_streaming());
  EXPECT_TRUE(svc->FindMethodByName("StreamMetrics")->server_streaming());
}
