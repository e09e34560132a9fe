// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The load-statistics path end to end over real loopback sockets: a fake engine /metrics endpoint
// (HTTP, cpp-httplib) → the in-process kvrelay daemon (scraper fetch thread → scraper_logic →
// stats_tracker / silent_stream_detector → emitter) → the demo policy server (gRPC), whose
// per-replica stats are read back with GetCacheState. Spec: docs/spec/reference-behaviour.md
// §1.7 (S01–S15), §1.8 (M01, M02), §1.9 (G01).
//
// The policy server runs on a fake clock (kServerClockUs): an update with timestamp_us = 0 would
// be stamped with it, so a last_seen near the real wall clock proves the daemon stamped the update
// with its own clock (S13).
//
// Waiting: every wait is a bounded poll; absence ("nothing delivered") is asserted only over a
// window in which the scraper demonstrably ran (the endpoint counted its requests).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/loader.hpp"
#include "config/settings.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "daemon/daemon.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "tests/support/metrics_endpoint.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::stats_e2e {
namespace {

namespace ic = inferencecache::v1alpha1;
using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr milliseconds kInterval{150};
constexpr int64_t kServerClockUs = 1'000'000;  // 1970-01-01T00:00:01Z: far from any real clock

struct identity {
  std::string replica = "vllm-0";
  std::string model = "llama";
  std::string tenant = "tenant-a";
  std::string scheme = "vllm";
};

identity sglang_identity() { return identity{"sglang-0", "medgemma", "tenant-b", "sglang"}; }

int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool wait_until(const std::function<bool()>& cond, milliseconds timeout = 5s) {
  const auto deadline = steady::now() + timeout;
  while (steady::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

// The vLLM CPU fixture with its two prefix-cache counters rewritten: an engine whose counters
// move on every scrape.
std::string vllm_with_counters(const std::string& cpu_fixture, uint64_t hits, uint64_t queries) {
  std::string out;
  size_t pos = 0;
  while (pos < cpu_fixture.size()) {
    size_t eol = cpu_fixture.find('\n', pos);
    if (eol == std::string::npos) eol = cpu_fixture.size();
    std::string line = cpu_fixture.substr(pos, eol - pos);
    if (line.rfind("vllm:prefix_cache_hits_total{", 0) == 0)
      line = line.substr(0, line.rfind(' ') + 1) + std::to_string(hits);
    else if (line.rfind("vllm:prefix_cache_queries_total{", 0) == 0)
      line = line.substr(0, line.rfind(' ') + 1) + std::to_string(queries);
    out += line;
    out += '\n';
    pos = eol + 1;
  }
  return out;
}

/// Every log line the daemon writes while a test runs.
class log_capture {
 public:
  void install() {
    log::set_sink([this](log::level l, const std::string& line) {
      std::lock_guard<std::mutex> lk(mu_);
      lines_.push_back({l, line});
    });
  }
  static void uninstall() { log::set_sink({}); }

  /// How many lines were captured so far (a starting point for find()).
  size_t mark() const {
    std::lock_guard<std::mutex> lk(mu_);
    return lines_.size();
  }
  /// Lines at `l` containing every one of `parts`, from line number `from` on.
  std::vector<std::string> find(log::level l, std::initializer_list<const char*> parts,
                                size_t from = 0) const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<std::string> out;
    for (size_t i = from; i < lines_.size(); ++i) {
      const auto& [lvl, line] = lines_[i];
      if (lvl != l) continue;
      bool all = true;
      for (const char* p : parts) all = all && line.find(p) != std::string::npos;
      if (all) out.push_back(line);
    }
    return out;
  }
  std::string dump() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string s;
    for (const auto& [lvl, line] : lines_) s += std::string(log::to_string(lvl)) + " " + line + "\n";
    return s;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<log::level, std::string>> lines_;
};

/// A policy server that records every CacheStateUpdate exactly as it arrived on the wire (the
/// demo server keeps only what it indexes, so the nested stats.replica_id and the hash_scheme of
/// a stats-only update are invisible there). Accepts everything.
class capture_service final : public ic::InferenceCache::Service {
 public:
  grpc::Status ReportCacheState(grpc::ServerContext*,
                                grpc::ServerReader<ic::CacheStateUpdate>* reader,
                                ic::Ack* ack) override {
    ic::CacheStateUpdate u;
    while (reader->Read(&u)) {
      std::lock_guard<std::mutex> lk(mu_);
      updates_.push_back(u);
    }
    ack->set_accepted(true);
    return grpc::Status::OK;
  }
  grpc::Status PublishEvent(grpc::ServerContext*, const ic::CacheEvent*, ic::Ack* ack) override {
    ack->set_accepted(true);
    return grpc::Status::OK;
  }
  std::vector<ic::CacheStateUpdate> stats_updates() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<ic::CacheStateUpdate> out;
    for (const auto& u : updates_)
      if (u.has_stats()) out.push_back(u);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<ic::CacheStateUpdate> updates_;
};

class StatsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    logs_.install();
    policy::server_options so;
    so.index.now_us = [] { return kServerClockUs; };
    server_ = std::make_unique<policy::policy_server>(so);
    ASSERT_TRUE(server_->start());
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
    stub_ = ic::InferenceCache::NewStub(
        grpc::CreateCustomChannel(server_->target(), grpc::InsecureChannelCredentials(), args));
    fake::publisher_options po;
    po.topic = "kv-events";
    po.linger_ms = 0;
    engine_ = std::make_unique<fake::publisher>(po);
    cpu_ = metrics_fixture("vllm_metrics_cpu.txt");
    tick2_ = metrics_fixture("vllm_metrics_cpu_tick2.txt");
  }

  void TearDown() override {
    // A held scrape would keep the scraper's fetch thread (and so the daemon's stop) waiting
    // for the 5 s HTTP timeout.
    metrics_.release();
    if (daemon_) daemon_->stop();
    daemon_.reset();
    metrics_.stop();
    engine_.reset();
    stub_.reset();
    if (server_) server_->stop();
    if (HasFailure()) std::cerr << "---- captured log ----\n" << logs_.dump();
    log_capture::uninstall();
  }

  /// `tweak` has the last word on the engine's settings (metrics tier, label, ceiling...).
  void start_daemon(identity id = identity{},
                    const std::function<void(config::engine_settings&)>& tweak = {}) {
    id_ = id;
    config::daemon_config c;
    c.server.address = server_address_.empty() ? server_->target() : server_address_;
    c.server.rpc_timeout = 2000ms;
    c.admin.listen.clear();
    c.log.format = config::log_format::json;
    c.log.level = config::log_level::debug;
    config::engine_settings e;
    e.replica_id = id.replica;
    e.model_id = id.model;
    e.tenant_id = id.tenant;
    e.hash_scheme = id.scheme;
    e.endpoint = engine_->live_endpoint();
    e.topic = "kv-events";
    e.window = 10ms;
    e.reconnect_backoff = 50ms;
    e.metrics.url = metrics_.url();
    e.metrics.interval = kInterval;
    e.metrics.cache_size_bytes = kGiB;
    e.metrics.max_concurrency = 256;
    if (tweak) tweak(e);
    c.engines.push_back(std::move(e));
    auto st = config::validate(c);
    ASSERT_TRUE(st) << st.error().context;
    daemon_ = std::make_unique<kvrelay::daemon>(c);
    started_ = steady::now();
    std::string err;
    ASSERT_TRUE(daemon_->start(err)) << err;
  }

  /// GetCacheState over gRPC: this replica's stats, nullopt when the server has none. A failed
  /// RPC is a test failure of its own, not "no stats": the server never goes away in this suite.
  /// Wait-for-ready, because the first call on the test's channel may meet it still connecting.
  std::optional<ic::ReplicaStats> stats(const identity& id) {
    ic::GetCacheStateRequest r;
    r.set_model_id(id.model);
    r.set_tenant_id(id.tenant);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    ctx.set_wait_for_ready(true);
    ic::GetCacheStateResponse resp;
    if (const auto st = stub_->GetCacheState(&ctx, r, &resp); !st.ok()) {
      ADD_FAILURE() << "GetCacheState failed: " << st.error_code() << " " << st.error_message();
      return std::nullopt;
    }
    for (const auto& s : resp.replicas())
      if (s.replica_id() == id.replica) return s;
    return std::nullopt;
  }
  std::optional<ic::ReplicaStats> stats() { return stats(id_); }

  /// last_seen_us the server recorded for this replica's stats (-1 when none).
  int64_t stats_last_seen_us() const {
    const auto doc = nlohmann::json::parse(server_->index().dump_json());
    for (const auto& m : doc.at("models")) {
      if (m.at("tenant_id") != id_.tenant || m.at("model_id") != id_.model) continue;
      const auto& s = m.at("stats");
      if (s.contains(id_.replica)) return s.at(id_.replica).at("last_seen_us").get<int64_t>();
    }
    return -1;
  }

  uint64_t stats_updates() const { return server_->index().counters().stats_updates; }
  bool has_stats() const { return server_->index().has_stats(id_.tenant, id_.model, id_.replica); }
  /// The first stats that stay: the daemon's start clear (ALL_CLEARED) erases the replica's
  /// stats on the server, and it may land after the first report (seen under TSan on a loaded
  /// machine: has_stats() true, the lookup right after it empty). Waits for that clear first.
  bool has_first_stats() const {
    return server_->index().counters().cleared_events >= 1 && has_stats();
  }

  double gauge(const std::string& name) const {
    return daemon_->metrics().value(name, {{"replica", id_.replica}});
  }
  double restarts(const std::string& unit) const {
    return daemon_->metrics().value("kvrelay_actor_restarts_total",
                                    {{"replica", id_.replica}, {"unit", unit}});
  }

  /// Publishes harmless empty batches until the daemon decoded one (PUB/SUB slow joiner).
  bool sync_engine() {
    const auto batches = [&] {
      return daemon_->metrics().value("kvrelay_batches_total", {{"replica", id_.replica}});
    };
    const double before = std::max(0.0, batches());
    const auto deadline = steady::now() + 10s;
    while (steady::now() < deadline) {
      engine_->publish(fake::encode_batch({}, {}));
      if (wait_until([&] { return batches() > before; }, 200ms)) return true;
    }
    return false;
  }

  /// One root BlockStored of one full 16-token block; distinct per `n`.
  void publish_block(uint32_t n) {
    fake::fake_event e;
    e.t = fake::fake_event::type::stored;
    e.block_hashes = {fake::fake_hash::u(1000 + n)};
    for (uint32_t i = 0; i < 16; ++i) e.token_ids.push_back(n * 16 + i);
    e.block_size = 16;
    engine_->publish(fake::encode_batch({e}, {}));
  }

  log_capture logs_;
  metrics_endpoint metrics_;
  std::unique_ptr<policy::policy_server> server_;
  std::unique_ptr<ic::InferenceCache::Stub> stub_;
  std::unique_ptr<fake::publisher> engine_;
  std::unique_ptr<kvrelay::daemon> daemon_;
  identity id_;
  std::string server_address_;  // "" = the demo policy server
  steady::time_point started_;
  std::string cpu_, tick2_;
};

// M01, M02, S01, S11, S12, S13: the vLLM CPU fixture, then tick 2, as the server sees them.
TEST_F(StatsE2E, VllmCpuFirstTickThenHitRateDelta) {
  metrics_.serve(200, cpu_);
  const int64_t wall_before = wall_us();
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  ASSERT_TRUE(wait_until([&] { return has_first_stats(); })) << server_->index().dump_json();

  // S13: the first tick fires one interval after start, not at startup.
  EXPECT_GE(metrics_.first_request() - started_, kInterval);

  auto s = stats();
  ASSERT_TRUE(s);
  EXPECT_NEAR(static_cast<double>(s->cache_memory_bytes()), 0.42 * kGiB, 1.0);  // M01
  EXPECT_FLOAT_EQ(s->pressure(), 8.0f / 256.0f);
  EXPECT_FLOAT_EQ(s->hit_rate(), 0.0f);  // first tick: only a baseline
  EXPECT_EQ(s->t2_hit_tokens(), 0);
  EXPECT_EQ(s->t2_query_tokens(), 0);
  EXPECT_EQ(s->client_version(), "");  // S13: never set

  // S13: stamped with the daemon's wall clock, not 0 (which the server would replace with its
  // fake clock).
  const int64_t seen = stats_last_seen_us();
  EXPECT_NE(seen, kServerClockUs);
  EXPECT_GE(seen, wall_before);
  EXPECT_LE(seen, wall_us());

  // S01, S11: stats only, never a prefix; identity (tenant, model, replica) is the configured one.
  const auto c = server_->index().counters();
  EXPECT_GE(c.stats_updates, 1u);
  EXPECT_EQ(c.prefixes_upserted, 0u);
  EXPECT_EQ(c.prefixes_dropped, 0u);
  EXPECT_EQ(server_->index().entries(), 0u);
  EXPECT_FALSE(stats(identity{"vllm-0", "llama", "other-tenant", "vllm"}));
  EXPECT_FALSE(stats(identity{"vllm-0", "other-model", "tenant-a", "vllm"}));

  // A few more identical ticks: hit rate stays 0 (Δqueries = 0), and a flat counter is an idle
  // engine, not a silent stream.
  const uint64_t after_first = stats_updates();
  ASSERT_TRUE(wait_until([&] { return stats_updates() >= after_first + 3; }));
  EXPECT_FLOAT_EQ(stats()->hit_rate(), 0.0f);
  EXPECT_EQ(gauge("kvrelay_engine_events_silent"), 0.0);

  // M02: tick 2 exactly once, then 500s: the server keeps the tick-2 sample for us to read.
  metrics_.serve_once(200, tick2_);
  metrics_.serve(500, "engine overloaded\n");
  ASSERT_TRUE(wait_until([&] {
    auto x = stats();
    return x && x->hit_rate() != 0.0f;
  })) << server_->index().dump_json();
  s = stats();
  EXPECT_NEAR(s->hit_rate(), 0.7f, 1e-6);  // (95-25)/(200-100)
  EXPECT_NEAR(static_cast<double>(s->cache_memory_bytes()), 0.55 * kGiB, 1.0);
  EXPECT_FLOAT_EQ(s->pressure(), 8.0f / 256.0f);  // (7+1)/256
}

// S01, S11, S13 on the wire: every stats update has no prefixes, the configured identity, the
// nested replica id mirrored, the daemon's clock, and no client_version.
TEST_F(StatsE2E, WireUpdateIsStatsOnlyWithMirroredIdentity) {
  capture_service capture;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&capture);
  auto grpc_server = b.BuildAndStart();
  ASSERT_TRUE(grpc_server);
  ASSERT_GT(port, 0);
  server_address_ = "127.0.0.1:" + std::to_string(port);

  metrics_.serve(200, cpu_);
  const int64_t wall_before = wall_us();
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  ASSERT_TRUE(wait_until([&] { return capture.stats_updates().size() >= 3; }));
  const auto got = capture.stats_updates();
  const int64_t wall_after = wall_us();
  int64_t prev_ts = 0;
  for (const auto& u : got) {
    EXPECT_EQ(u.prefixes_size(), 0);
    EXPECT_EQ(u.replica_id(), "vllm-0");
    EXPECT_EQ(u.model_id(), "llama");
    EXPECT_EQ(u.tenant_id(), "tenant-a");
    EXPECT_EQ(u.hash_scheme(), "vllm");
    EXPECT_EQ(u.adapter_id(), "");
    EXPECT_EQ(u.stats().replica_id(), "vllm-0");  // mirrored
    EXPECT_EQ(u.stats().client_version(), "");
    EXPECT_FLOAT_EQ(u.stats().pressure(), 8.0f / 256.0f);
    EXPECT_GE(u.timestamp_us(), wall_before);
    EXPECT_LE(u.timestamp_us(), wall_after);
    EXPECT_GT(u.timestamp_us(), prev_ts);  // one per tick, each freshly stamped
    prev_ts = u.timestamp_us();
  }
  // One interval apart, give or take scheduling.
  EXPECT_GE(got[1].timestamp_us() - got[0].timestamp_us(), 100'000);

  daemon_->stop();  // before the capture server goes away with this scope
  daemon_.reset();
  grpc_server->Shutdown(std::chrono::system_clock::now() + 2s);
}

// S02, G01: the SGLang profile is chosen by hash_scheme "sglang"; hit rate read directly.
TEST_F(StatsE2E, SglangFixtureFirstScrape) {
  metrics_.serve(200, metrics_fixture("sglang_metrics.txt"));
  ASSERT_NO_FATAL_FAILURE(start_daemon(sglang_identity()));
  ASSERT_TRUE(wait_until([&] { return has_first_stats(); })) << server_->index().dump_json();
  const auto s = stats();
  ASSERT_TRUE(s);
  EXPECT_FLOAT_EQ(s->pressure(), 8.0f / 256.0f);
  EXPECT_NEAR(s->hit_rate(), 0.75f, 1e-6);  // on the first scrape: no delta
  EXPECT_NEAR(static_cast<double>(s->cache_memory_bytes()), 0.63 * kGiB, 2.0);
  EXPECT_EQ(s->t2_hit_tokens(), 0);
  EXPECT_EQ(s->t2_query_tokens(), 0);
  EXPECT_EQ(server_->index().entries(), 0u);
  EXPECT_FALSE(stats(identity{"sglang-0", "medgemma", "tenant-a", "sglang"}));  // tenant kept
  // SGLang exposes no queries counter: the silent-stream alarm cannot fire.
  EXPECT_EQ(gauge("kvrelay_engine_events_silent"), 0.0);
}

// S03, S04, S15: HTTP 500s deliver nothing, go stale after 3 ticks (one ERROR), then recover.
TEST_F(StatsE2E, HttpErrorsGoStaleThenRecover) {
  metrics_.serve(200, cpu_);
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  ASSERT_TRUE(wait_until([&] { return has_first_stats(); }));
  EXPECT_EQ(gauge("kvrelay_stats_stale"), 0.0);

  const size_t failing_from = logs_.mark();
  metrics_.serve(500, "internal error\n");
  ASSERT_TRUE(wait_until([&] { return gauge("kvrelay_stats_stale") == 1.0; }))
      << "stale gauge " << gauge("kvrelay_stats_stale");
  // The last good sample was delivered ticks ago; from here on nothing may arrive while the
  // scraper keeps trying (S03).
  const uint64_t frozen = stats_updates();
  const uint64_t req = metrics_.requests();
  ASSERT_TRUE(wait_until([&] { return metrics_.requests() >= req + 3; }));
  EXPECT_EQ(stats_updates(), frozen);
  EXPECT_EQ(gauge("kvrelay_stats_stale"), 1.0);

  metrics_.serve(200, cpu_);
  ASSERT_TRUE(wait_until([&] { return gauge("kvrelay_stats_stale") == 0.0; }));
  EXPECT_GT(stats_updates(), frozen);
  ASSERT_TRUE(wait_until([&] {
    return !logs_.find(log::level::info, {"engine load stats recovered"}).empty();
  }));

  // S04: exactly one ERROR, naming the last delivered sample; 2 WARN; DEBUG after; 1 recovery.
  const auto errors = logs_.find(log::level::error, {"engine load stats stale"});
  ASSERT_EQ(errors.size(), 1u) << logs_.dump();
  EXPECT_NE(errors[0].find("last delivered sample"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0].find("undelivered since startup"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("load_signal_stale"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("consecutive_failures"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("vllm-0"), std::string::npos) << errors[0];
  EXPECT_EQ(logs_.find(log::level::warn, {"engine load stats update failed; will retry"},
                       failing_from)
                .size(),
            2u);
  EXPECT_GE(logs_.find(log::level::debug, {"engine load stats update still failing"}).size(), 1u);
  const auto recovered = logs_.find(log::level::info, {"engine load stats recovered"});
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_NE(recovered[0].find("load_signal_recovered"), std::string::npos) << recovered[0];
  EXPECT_NE(recovered[0].find("after_failures"), std::string::npos) << recovered[0];
}

// S05: failing since startup says so, and the server never hears of the replica.
TEST_F(StatsE2E, ColdStartFailuresSayUndeliveredSinceStartup) {
  metrics_.serve(500, "starting\n");
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  ASSERT_TRUE(wait_until([&] { return gauge("kvrelay_stats_stale") == 1.0; }));
  // At least 2 scrapes (S03): a tick that finds the previous GET still running (a slow first
  // connect on a busy machine) is a failure too, so 3 failures may take only 2 requests.
  EXPECT_GE(metrics_.requests(), 2u);
  const auto errors = logs_.find(log::level::error, {"engine load stats stale"});
  ASSERT_EQ(errors.size(), 1u) << logs_.dump();
  EXPECT_NE(errors[0].find("undelivered since startup"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0].find("last delivered sample"), std::string::npos) << errors[0];
  EXPECT_FALSE(has_stats());
  EXPECT_EQ(stats_updates(), 0u);
}

// A /metrics endpoint that never answers holds the scraper's fetch thread, not event ingestion.
// The scrape's deadline is a minute, so "did not wait for it" is a bound far below it.
TEST_F(StatsE2E, HungMetricsEndpointDoesNotBlockIngestion) {
  metrics_.serve(200, cpu_);
  metrics_.hang();
  ASSERT_NO_FATAL_FAILURE(
      start_daemon({}, [](config::engine_settings& e) { e.metrics.timeout = 60s; }));
  ASSERT_TRUE(sync_engine()) << "the daemon never decoded a batch";
  ASSERT_TRUE(wait_until([&] { return metrics_.held() >= 1; }));

  // KV events flow while the scrape hangs (for up to its minute).
  const auto t0 = steady::now();
  publish_block(1);
  ASSERT_TRUE(wait_until([&] { return server_->index().entries() >= 1; }, 30s))
      << server_->index().dump_json();
  const auto ingest = steady::now() - t0;
  EXPECT_LT(ingest, 30s);
  EXPECT_GE(metrics_.held(), 1u) << "the scrape must still be hanging for this to mean anything";
  std::cerr << "ingestion while the scrape hangs: "
            << std::chrono::duration_cast<milliseconds>(ingest).count() << " ms\n";

  // Ticks that find the fetch still running are failures: stale after 3 of them, well before the
  // hung GET's own timeout.
  ASSERT_TRUE(wait_until([&] { return gauge("kvrelay_stats_stale") == 1.0; }, 3s));
  EXPECT_FALSE(has_stats());
  EXPECT_FALSE(logs_.find(log::level::warn, {"previous scrape still running"}).empty() &&
               logs_.find(log::level::error, {"previous scrape still running"}).empty());

  // The engine answers again: stats flow and the stale signal clears.
  metrics_.release();
  ASSERT_TRUE(wait_until([&] { return has_stats(); }));
  ASSERT_TRUE(wait_until([&] { return gauge("kvrelay_stats_stale") == 0.0; }));
  publish_block(2);
  EXPECT_TRUE(wait_until([&] { return server_->index().entries() >= 2; }));
}

// The silent-stream alarm: the engine's prefix_cache_queries rise on every scrape, yet no KV
// event arrives → kvrelay_engine_events_silent = 1 after 3 intervals; events clear it.
TEST_F(StatsE2E, RisingQueriesWithoutEventsRaiseSilentAlarm) {
  const std::string cpu = cpu_;
  metrics_.serve_generated([cpu](uint64_t n) {
    return http_answer{200, vllm_with_counters(cpu, 25 + 5 * n, 100 + 10 * n)};
  });
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  ASSERT_TRUE(wait_until([&] { return gauge("kvrelay_engine_events_silent") == 1.0; }))
      << "silent gauge " << gauge("kvrelay_engine_events_silent") << ", "
      << metrics_.requests() << " scrapes";
  // A first reading is only a baseline; 3 rising readings after it are needed.
  EXPECT_GE(metrics_.requests(), 4u);
  const auto warned = logs_.find(log::level::warn, {"kv_events_silent"});
  ASSERT_EQ(warned.size(), 1u) << logs_.dump();
  EXPECT_NE(warned[0].find("vllm-0"), std::string::npos);
  // Stats are delivered all along: the alarm is about events, not load.
  const auto s = stats();
  ASSERT_TRUE(s);
  EXPECT_GT(s->hit_rate(), 0.0f);  // 5/10 per tick

  // KV events arrive: the alarm clears.
  // Republished until it lands: the first batches may meet the PUB/SUB slow joiner.
  bool cleared = false;
  for (uint32_t n = 1; n <= 50 && !cleared; ++n) {
    publish_block(n);
    cleared = wait_until([&] { return gauge("kvrelay_engine_events_silent") == 0.0; }, 200ms);
  }
  EXPECT_TRUE(cleared);
  EXPECT_FALSE(logs_.find(log::level::info, {"KV events arriving again"}).empty());
  EXPECT_EQ(logs_.find(log::level::warn, {"kv_events_silent"}).size(), 1u);
}

// Supervision: a crashed scraper is restarted alone and stats keep arriving.
TEST_F(StatsE2E, ScraperCrashRestartsAloneAndStatsContinue) {
  metrics_.serve(200, cpu_);
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  ASSERT_TRUE(wait_until([&] { return has_first_stats(); }));
  ASSERT_TRUE(daemon_->crash(id_.replica, "scraper"));
  ASSERT_TRUE(wait_until([&] { return restarts("scraper") == 1.0; }))
      << daemon_->metrics().render();
  const uint64_t after_crash = stats_updates();
  ASSERT_TRUE(wait_until([&] { return stats_updates() >= after_crash + 2; }))
      << "stats stopped after the scraper restart";
  EXPECT_EQ(restarts("scraper"), 1.0);
  EXPECT_LE(restarts("emitter"), 0.0);   // -1 (never created) or 0
  EXPECT_LE(restarts("datapath"), 0.0);
  EXPECT_EQ(gauge("kvrelay_stats_stale"), 0.0);
  const auto s = stats();
  ASSERT_TRUE(s);
  EXPECT_FLOAT_EQ(s->pressure(), 8.0f / 256.0f);
}

// The engine's metrics settings reach the scraper: model_label filters series (M15) and
// max_concurrency is the pressure denominator.
TEST_F(StatsE2E, ModelLabelAndCeilingFromConfig) {
  metrics_.serve(200, metrics_fixture("vllm_metrics_multimodel.txt"));
  ASSERT_NO_FATAL_FAILURE(start_daemon(identity{}, [](config::engine_settings& e) {
    e.metrics.model_label = "primary";
    e.metrics.max_concurrency = 8;
  }));
  ASSERT_TRUE(wait_until([&] { return stats_updates() >= 2 && has_first_stats(); }));
  const auto s = stats();
  ASSERT_TRUE(s);
  EXPECT_NEAR(static_cast<double>(s->cache_memory_bytes()), 0.20 * kGiB, 1.0);  // not 0.95
  EXPECT_FLOAT_EQ(s->pressure(), 0.25f);  // (2+0)/8, not the other model's clamped 1.0
  EXPECT_FLOAT_EQ(s->hit_rate(), 0.0f);   // identical ticks; the other model's 999/1000 stays out
}

// cache tier "gpu" pins the legacy gauge: a kv-only engine reports 0 bytes, no error (M13);
// load above the ceiling clamps pressure to 1 (M23).
TEST_F(StatsE2E, PinnedTierAndPressureClampFromConfig) {
  metrics_.serve(200, cpu_);
  ASSERT_NO_FATAL_FAILURE(start_daemon(identity{}, [](config::engine_settings& e) {
    e.metrics.tier = config::cache_tier::gpu;
    e.metrics.max_concurrency = 4;
  }));
  ASSERT_TRUE(wait_until([&] { return has_first_stats(); }));
  const auto s = stats();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->cache_memory_bytes(), 0);
  EXPECT_FLOAT_EQ(s->pressure(), 1.0f);  // 8 / 4, clamped
  EXPECT_EQ(gauge("kvrelay_stats_stale"), 0.0);
}

// A crash while a scrape hangs: neither the restart nor shutdown may wait for the hung GET's
// deadline, a minute here (the fetch thread is detached, not joined on a CAF scheduler thread).
TEST_F(StatsE2E, ScraperCrashDuringHungScrapeRestartsPromptly) {
  metrics_.serve(200, cpu_);
  metrics_.hang();
  ASSERT_NO_FATAL_FAILURE(
      start_daemon({}, [](config::engine_settings& e) { e.metrics.timeout = 60s; }));
  ASSERT_TRUE(wait_until([&] { return metrics_.held() >= 1; }));
  const auto t0 = steady::now();
  ASSERT_TRUE(daemon_->crash(id_.replica, "scraper"));
  ASSERT_TRUE(wait_until([&] { return restarts("scraper") == 1.0; }, 30s));
  const auto took = steady::now() - t0;
  std::cerr << "scraper restart with a hung scrape: "
            << std::chrono::duration_cast<milliseconds>(took).count() << " ms\n";
  EXPECT_LT(took, 30s);

  // The restarted scraper's GET hangs too; stopping the daemon must not wait for it either.
  ASSERT_TRUE(wait_until([&] { return metrics_.held() >= 2; }));
  const auto s0 = steady::now();
  daemon_->stop();
  const auto stop_took = steady::now() - s0;
  std::cerr << "daemon stop with a hung scrape: "
            << std::chrono::duration_cast<milliseconds>(stop_took).count() << " ms\n";
  EXPECT_LT(stop_took, 30s);
}

// an engine put to sleep discards its KV cache and an idle one may never publish
// the AllBlocksCleared that would say so. The scraped sleep state clears the replica (the
// server's index empties), /debug/engines and the log say so, and after the wake new events are
// indexed again. The same scrapes carry the engine's block counts for the coverage gauges.
TEST_F(StatsE2E, EngineAsleepClearsItsHintsAndAwakeIndexesAgain) {
  const std::string awake = metrics_fixture("vllm_metrics_engine_state.txt");
  const std::string asleep = metrics_fixture("vllm_metrics_asleep.txt");
  metrics_.serve(200, awake);
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  ASSERT_TRUE(sync_engine());
  publish_block(1);
  publish_block(2);
  ASSERT_TRUE(wait_until([&] { return server_->index().entries() == 2; }))
      << server_->index().dump_json();
  const auto engine = [&] {
    const auto doc = nlohmann::json::parse(daemon_->engines_json(), nullptr, false);
    return doc.is_array() && !doc.empty() ? doc[0] : nlohmann::json::object();
  };
  // The engine's own counts: 3002 blocks, 1000 in use; kvrelay holds 2 of them.
  EXPECT_TRUE(wait_until([&] {
    return daemon_->metrics().value("kvrelay_engine_cache_blocks",
                                    {{"replica", id_.replica}, {"kind", "capacity"}}) == 3002;
  }));
  EXPECT_TRUE(wait_until([&] {
    return std::abs(daemon_->metrics().value("kvrelay_index_coverage_ratio",
                                             {{"replica", id_.replica}, {"of", "in_use"}}) -
                    2.0 / 1000) < 1e-9;
  }));
  EXPECT_FALSE(engine().value("engine_asleep", true));

  const size_t mark = logs_.mark();
  metrics_.serve(200, asleep);
  EXPECT_TRUE(wait_until([&] { return server_->index().entries() == 0; }))
      << "a sleeping engine holds nothing: " << server_->index().dump_json();
  EXPECT_TRUE(wait_until([&] { return engine().value("engine_asleep", false); }))
      << daemon_->engines_json();
  EXPECT_EQ(gauge("kvrelay_engine_asleep"), 1);
  EXPECT_EQ(logs_.find(log::level::warn, {"engine asleep"}, mark).size(), 1u) << logs_.dump();

  metrics_.serve(200, awake);
  EXPECT_TRUE(wait_until([&] { return !engine().value("engine_asleep", true); }));
  EXPECT_EQ(logs_.find(log::level::info, {"engine awake"}, mark).size(), 1u);
  publish_block(3);
  EXPECT_TRUE(wait_until([&] { return server_->index().entries() == 1; }))
      << server_->index().dump_json();
}

}  // namespace
}  // namespace kvrelay::stats_e2e
