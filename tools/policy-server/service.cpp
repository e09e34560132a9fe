// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tools/policy-server/service.hpp"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace kvrelay::policy {
namespace {

// Holds calls while black-hole mode is on. Released by turning it off, by stop(), or by the
// client cancelling (polled, since a sync handler gets no cancellation callback).
class gate {
 public:
  // Returns false when the call must end without an answer (server stopping or client gone).
  bool pass(grpc::ServerContext* ctx, std::atomic<uint64_t>& held_counter) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!closed_ && !stopping_) return true;
    if (stopping_) return false;
    ++held_;
    ++held_counter;
    while (closed_ && !stopping_ && !ctx->IsCancelled()) {
      cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    --held_;
    return !stopping_ && !ctx->IsCancelled();
  }
  void set_closed(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = on;
    cv_.notify_all();
  }
  void set_stopping(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = on;
    cv_.notify_all();
  }
  size_t held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  bool stopping_ = false;
  size_t held_ = 0;
};

struct atomic_calls {
  std::atomic<uint64_t> report_streams{0}, report_messages{0}, publish{0}, lookup{0},
      get_state{0}, other{0}, black_holed{0};
  std::atomic<int64_t> ingest_delay_ms{0};  // set_ingest_delay
};

// A slow server: each message is applied, then costs this long (set_ingest_delay).
void slow_down(const atomic_calls& c) {
  const int64_t ms = c.ingest_delay_ms.load();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

const grpc::Status k_unavailable(grpc::StatusCode::UNAVAILABLE, "policy server stopping");

class service final : public ic::InferenceCache::Service {
 public:
  service(policy_index& index, gate& g, atomic_calls& calls)
      : index_(index), gate_(g), calls_(calls) {}

  grpc::Status ReportCacheState(grpc::ServerContext* ctx,
                                grpc::ServerReader<ic::CacheStateUpdate>* reader,
                                ic::Ack* ack) override {
    ++calls_.report_streams;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    ic::CacheStateUpdate update;
    // Each message is ingested as it arrives; the Ack comes at the client's half-close.
    while (reader->Read(&update)) {
      ++calls_.report_messages;
      index_.ingest(update);
      slow_down(calls_);
    }
    ack->set_accepted(true);
    return grpc::Status::OK;
  }

  grpc::Status PublishEvent(grpc::ServerContext* ctx, const ic::CacheEvent* event,
                            ic::Ack* ack) override {
    ++calls_.publish;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    index_.apply(*event);
    slow_down(calls_);
    ack->set_accepted(true);  // always true, even for ignored or dropped input
    return grpc::Status::OK;
  }

  grpc::Status LookupRoute(grpc::ServerContext* ctx, const ic::LookupRouteRequest* req,
                           ic::LookupRouteResponse* resp) override {
    ++calls_.lookup;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    index_.lookup(*req, resp);
    return grpc::Status::OK;
  }

  grpc::Status GetCacheState(grpc::ServerContext* ctx, const ic::GetCacheStateRequest* req,
                             ic::GetCacheStateResponse* resp) override {
    ++calls_.get_state;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    index_.cache_state(*req, resp);
    return grpc::Status::OK;
  }

  grpc::Status RenderTemplate(grpc::ServerContext* ctx, const ic::RenderTemplateRequest*,
                              ic::RenderTemplateResponse* resp) override {
    ++calls_.other;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    resp->set_reason_code("NO_TEMPLATE");  // the demo server stores no templates
    return grpc::Status::OK;
  }

  grpc::Status LookupPDRoute(grpc::ServerContext* ctx, const ic::LookupPDRouteRequest*,
                             ic::LookupPDRouteResponse* resp) override {
    ++calls_.other;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    resp->set_reason_code("NO_HINT");  // no P/D topology in the demo server
    return grpc::Status::OK;
  }

  grpc::Status StreamCacheEvents(grpc::ServerContext* ctx, const ic::StreamEventsRequest*,
                                 grpc::ServerWriter<ic::CacheEvent>*) override {
    ++calls_.other;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    return grpc::Status::OK;  // an empty stream: the demo server does not fan events out
  }

  grpc::Status StreamMetrics(grpc::ServerContext* ctx, const ic::StreamMetricsRequest* req,
                             grpc::ServerWriter<ic::Metric>* writer) override {
    ++calls_.other;
    if (!gate_.pass(ctx, calls_.black_holed)) return k_unavailable;
    // One snapshot of the index counters, filtered by name when names are given.
    const auto c = index_.counters();
    const std::pair<const char*, uint64_t> values[] = {
        {"policy_lookups_total", c.lookups},
        {"policy_prefix_match_total", c.prefix_match},
        {"policy_affinity_hint_total", c.affinity_hint},
        {"policy_no_hint_total", c.no_hint},
        {"policy_prefixes_upserted_total", c.prefixes_upserted},
        {"policy_events_total", c.events},
        {"policy_entries", index_.entries()}};
    const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (const auto& [name, value] : values) {
      bool wanted = req->names_size() == 0;
      for (const auto& n : req->names()) wanted = wanted || n == name;
      if (!wanted) continue;
      ic::Metric m;
      m.set_name(name);
      m.set_type(std::string(name).find("_total") != std::string::npos ? "counter" : "gauge");
      m.set_value(static_cast<double>(value));
      m.set_timestamp_us(now_us);
      if (!writer->Write(m)) break;
    }
    return grpc::Status::OK;
  }

 private:
  policy_index& index_;
  gate& gate_;
  atomic_calls& calls_;
};

std::string host_of(const std::string& listen) {
  const auto colon = listen.rfind(':');
  return colon == std::string::npos ? listen : listen.substr(0, colon);
}

}  // namespace

struct policy_server::impl {
  server_options opt;
  policy_index index;
  gate g;
  atomic_calls calls;
  service svc{index, g, calls};

  mutable std::mutex mu;
  std::condition_variable stopped_cv;
  std::unique_ptr<grpc::Server> server;
  int port = 0;

  // The periodic TTL sweep, running while the server does.
  std::mutex sweep_mu;
  std::condition_variable sweep_cv;
  bool sweeping = false;
  std::thread sweeper;

  explicit impl(server_options o) : opt(std::move(o)), index(opt.index) {
    if (opt.sweep_interval_us < 0) opt.sweep_interval_us = default_sweep_interval_us;
  }

  void start_sweeper() {
    if (opt.sweep_interval_us == 0) return;
    {
      std::lock_guard<std::mutex> lock(sweep_mu);
      sweeping = true;
    }
    sweeper = std::thread([this] {
      const auto period = std::chrono::microseconds(opt.sweep_interval_us);
      std::unique_lock<std::mutex> lock(sweep_mu);
      while (!sweep_cv.wait_for(lock, period, [this] { return !sweeping; })) {
        lock.unlock();
        index.sweep();
        lock.lock();
      }
    });
  }
  void stop_sweeper() {
    {
      std::lock_guard<std::mutex> lock(sweep_mu);
      sweeping = false;
    }
    sweep_cv.notify_all();
    if (sweeper.joinable()) sweeper.join();
  }

  std::shared_ptr<grpc::ServerCredentials> credentials() const {
    if (!opt.tls) return grpc::InsecureServerCredentials();
    grpc::SslServerCredentialsOptions ssl(
        opt.tls->client_ca_pem.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : (opt.tls->require_client_cert
                   ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                   : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY));
    ssl.pem_root_certs = opt.tls->client_ca_pem;
    ssl.pem_key_cert_pairs.push_back({opt.tls->key_pem, opt.tls->cert_pem});
    return grpc::SslServerCredentials(ssl);
  }
};

policy_server::policy_server(server_options opt)
    : impl_(std::make_unique<impl>(std::move(opt))) {}

policy_server::~policy_server() { stop(); }

bool policy_server::start() {
  auto& d = *impl_;
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.server) return false;
  // After a first start on port 0, a restart reuses the port clients already dial.
  const std::string address =
      d.port > 0 ? host_of(d.opt.listen) + ":" + std::to_string(d.port) : d.opt.listen;
  d.g.set_stopping(false);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(address, d.credentials(), &bound);
  builder.RegisterService(&d.svc);
  // kvrelay pings an idle connection (server.keepalive_time, 20 s by default, shorter in tests);
  // gRPC's default server policy calls that "too_many_pings" and drops the connection. Accept
  // pings without calls, at any rate, as a server configured for kvrelay would.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);  // 0 = never GOAWAY for pings
  auto server = builder.BuildAndStart();
  if (!server || bound == 0) return false;
  d.server = std::move(server);
  d.port = bound;
  d.start_sweeper();
  return true;
}

void policy_server::stop() {
  auto& d = *impl_;
  std::unique_ptr<grpc::Server> server;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    server = std::move(d.server);
  }
  if (!server) return;
  d.stop_sweeper();
  d.g.set_stopping(true);  // release held calls so Shutdown does not wait for them
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  d.stopped_cv.notify_all();
}

bool policy_server::restart(bool empty_index) {
  stop();
  if (empty_index) impl_->index.clear();
  return start();
}

bool policy_server::running() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->server != nullptr;
}

int policy_server::port() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->port;
}

std::string policy_server::target() const {
  std::string host = host_of(impl_->opt.listen);
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return host + ":" + std::to_string(port());
}

void policy_server::set_black_hole(bool on) { impl_->g.set_closed(on); }

void policy_server::set_ingest_delay(std::chrono::milliseconds d) {
  impl_->calls.ingest_delay_ms.store(d.count());
}
size_t policy_server::held_calls() const { return impl_->g.held(); }
policy_index& policy_server::index() { return impl_->index; }

call_counters policy_server::calls() const {
  const auto& c = impl_->calls;
  return call_counters{c.report_streams.load(), c.report_messages.load(), c.publish.load(),
                       c.lookup.load(),         c.get_state.load(),       c.other.load(),
                       c.black_holed.load()};
}

void policy_server::wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->stopped_cv.wait(lock, [this] { return impl_->server == nullptr; });
}

}  // namespace kvrelay::policy
