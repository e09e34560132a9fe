// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The end-to-end harness (harness.hpp): fake engines, the demo policy server and an in-process
// daemon on loopback. ~500 lines: binding retries, config, publishing, the server's view and the
// metric readers are what every e2e test shares; keeping them in one place is the point.
#include "tests/support/harness.hpp"

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "base/fingerprint.hpp"
#include "config/loader.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "daemon/daemon.hpp"
#include "base/metrics_registry.hpp"
#include "tools/fake-engine/publisher.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::e2e {

namespace ic = inferencecache::v1alpha1;

namespace {

// Port of a "tcp://host:port" endpoint; 0 when there is none.
int port_of(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) return 0;
  try {
    return std::stoi(endpoint.substr(colon + 1));
  } catch (const std::exception&) {
    return 0;
  }
}

std::string loopback(int port, bool ipv6 = false) {
  return std::string(ipv6 ? "tcp://[::1]:" : "tcp://127.0.0.1:") +
         (port > 0 ? std::to_string(port) : std::string("*"));
}

// One engine rank: the PUB the daemon subscribes to and, with replay, a twin whose ring answers
// the daemon's replay requests (see harness.hpp for why two).
struct rank_engine {
  std::unique_ptr<fake::publisher> live;
  std::unique_ptr<fake::publisher> ring;
};

// Parses one exposition line `name{a="x",b="y"} value` into its name and labels; false for
// comments and anything it does not understand.
bool parse_series(const std::string& line, std::string& name, label_list& labels, double& value) {
  if (line.empty() || line[0] == '#') return false;
  const auto brace = line.find('{');
  const auto space = line.rfind(' ');
  if (space == std::string::npos) return false;
  labels.clear();
  if (brace != std::string::npos && brace < space) {
    name = line.substr(0, brace);
    const auto close = line.rfind('}');
    if (close == std::string::npos || close < brace) return false;
    std::string body = line.substr(brace + 1, close - brace - 1);
    size_t pos = 0;
    while (pos < body.size()) {
      const auto eq = body.find("=\"", pos);
      if (eq == std::string::npos) break;
      std::string key = body.substr(pos, eq - pos);
      std::string val;
      size_t i = eq + 2;
      for (; i < body.size() && body[i] != '"'; ++i) {
        if (body[i] == '\\' && i + 1 < body.size()) ++i;
        val += body[i];
      }
      labels.emplace_back(std::move(key), std::move(val));
      pos = i + 1;
      if (pos < body.size() && body[pos] == ',') ++pos;
    }
  } else {
    name = line.substr(0, line.find(' '));
  }
  try {
    value = std::stod(line.substr(space + 1));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// The pipelines whose ingress is live, from the daemon's /debug/tree (asked of the actors now,
// unlike the metrics they publish): a live batch arrived, which alone proves the subscription is
// in effect, and no replay or tail probe is pending, so what is published next arrives live.
std::set<std::string> live_pipelines(kvrelay::daemon& d) {
  std::set<std::string> out;
  const auto tree = nlohmann::json::parse(d.tree_json(std::chrono::seconds(1)), nullptr, false);
  if (!tree.is_object() || !tree.contains("pipelines")) return out;
  for (const auto& p : tree["pipelines"]) {
    if (!p.contains("pipeline") || !p.contains("children")) continue;
    for (const auto& c : p["children"]) {
      if (c.value("name", "") == "ingress" && c.value("live", false) &&
          !c.value("catching_up", true))
        out.insert(p["pipeline"].get<std::string>());
    }
  }
  return out;
}

}  // namespace

config::engine_settings default_engine() {
  config::engine_settings e;
  e.replica_id = "vllm-0";
  e.model_id = "e2e-model";
  e.hash_scheme = "vllm";
  e.topic = "kv-events";
  e.window = milliseconds(10);
  e.reconnect_backoff = milliseconds(50);
  e.metrics.url.clear();
  return e;
}

int64_t route::matched(const std::string& replica) const {
  for (const auto& s : scores)
    if (s.replica_id == replica) return s.matched_tokens;
  return -1;
}

struct harness::impl {
  harness_options opt;
  std::unique_ptr<policy::policy_server> server;
  std::vector<rank_engine> engines;
  config::daemon_config cfg;
  std::unique_ptr<kvrelay::daemon> daemon;
  std::unique_ptr<ic::InferenceCache::Stub> stub;
  std::string error;

  int ranks() const { return static_cast<int>(engines.size()); }

  rank_engine& engine(int rank) {
    if (rank < 0 || rank >= ranks()) throw std::out_of_range("no engine rank " + std::to_string(rank));
    return engines[static_cast<size_t>(rank)];
  }

  fake::publisher_options publisher_opts(int rank) const {
    fake::publisher_options p;
    p.topic = opt.engine.topic;
    p.dp_rank = rank;
    p.linger_ms = 0;
    p.unsequenced = opt.unsequenced;
    return p;
  }

  // One rank on the given ports (0 = ephemeral).
  rank_engine bind_rank(int r, int live_port, int replay_port) const {
    rank_engine e;
    auto lo = publisher_opts(r);
    lo.bind = loopback(live_port, opt.ipv6);
    lo.sndhwm = opt.live_sndhwm;
    e.live = std::make_unique<fake::publisher>(lo);
    if (opt.replay) {
      auto ro = publisher_opts(r);
      ro.bind = loopback(0, opt.ipv6);  // nobody subscribes to the twin's PUB
      ro.replay_bind = loopback(replay_port, opt.ipv6);
      ro.buffer_steps = opt.ring_size;
      ro.replay_topic_frames = opt.replay_topic_frames;
      e.ring = std::make_unique<fake::publisher>(ro);
    }
    return e;
  }

  // Binds every rank. A rank r > 0 must sit at base port + r (spec §1), which another socket may
  // hold: then everything is rebound on fresh ephemeral ports. Failed attempts stay bound until
  // the end, or the kernel would hand out the same base port again. With any_ports, every rank
  // takes ports of its own.
  void bind_engines() {
    const int n = static_cast<int>(std::max<int64_t>(opt.engine.dp_size, 1));
    std::string last_error;
    std::vector<rank_engine> failed;
    for (int attempt = 0; attempt < 20; ++attempt) {
      for (auto& e : engines) failed.push_back(std::move(e));
      engines.clear();
      try {
        int live_port = 0, replay_port = 0;
        for (int r = 0; r < n; ++r) {
          rank_engine e = opt.any_ports ? bind_rank(r, 0, 0) : bind_rank(r, live_port, replay_port);
          if (r == 0 && !opt.any_ports) {
            live_port = port_of(e.live->live_endpoint());
            if (e.ring) replay_port = port_of(e.ring->replay_endpoint());
          }
          engines.push_back(std::move(e));
        }
        return;
      } catch (const std::exception& ex) {
        last_error = ex.what();
      }
    }
    throw std::runtime_error("cannot bind the fake engines: " + last_error);
  }

  config::daemon_config make_config() {
    config::daemon_config c;
    c.server.address = server->target();
    c.server.rpc_timeout = milliseconds(2000);
    // These tests look at the server after the drain; the default (clear) has its own tests.
    c.server.on_shutdown = config::shutdown_action::keep;
    c.admin.listen.clear();
    c.log.format = config::log_format::text;
    c.log.level = config::log_level::warn;
    config::engine_settings e = opt.engine;
    e.tenant_id = opt.tenant_id;
    e.endpoint = engines.front().live->live_endpoint();
    e.replay_endpoint = opt.replay ? engines.front().ring->replay_endpoint() : std::string();
    c.engines.push_back(std::move(e));
    if (opt.tweak) opt.tweak(c);
    return c;
  }

  uint64_t publish_payload(const std::string& payload, int rank) {
    auto& e = engine(rank);
    // The ring first: a replay the live batch provokes must find it.
    if (e.ring) e.ring->publish(payload);
    return e.live->publish(payload);
  }

  ic::InferenceCache::Stub& rpc() {
    if (!stub) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
      stub = ic::InferenceCache::NewStub(
          grpc::CreateCustomChannel(server->target(), grpc::InsecureChannelCredentials(), args));
    }
    return *stub;
  }
};

harness::harness(harness_options opt) : impl_(std::make_unique<impl>()) {
  auto& d = *impl_;
  d.opt = std::move(opt);
  policy::server_options so;
  so.index.adapter_scoped = d.opt.server_adapter_scoped;
  d.server = std::make_unique<policy::policy_server>(so);
  if (!d.server->start()) throw std::runtime_error("the policy server cannot bind 127.0.0.1:0");
  d.bind_engines();
  d.cfg = d.make_config();
}

harness::~harness() { stop(); }

bool harness::start_daemon(bool sync_first) {
  auto& d = *impl_;
  if (d.daemon) return true;
  d.cfg = d.make_config();
  if (auto st = config::validate(d.cfg); !st) {
    d.error = "invalid config: " + st.error().context;
    return false;
  }
  d.daemon = std::make_unique<kvrelay::daemon>(d.cfg);
  if (!d.daemon->start(d.error)) return false;
  if (sync_first && !sync()) {
    d.error = "the daemon never decoded a batch (slow joiner not over after 10 s)";
    return false;
  }
  return true;
}

bool harness::sync(milliseconds timeout) {
  auto& d = *impl_;
  if (!d.daemon) return false;
  const auto names = d.daemon->pipeline_names();
  std::vector<double> before;
  for (const auto& n : names)
    before.push_back(std::max(0.0, metric("kvrelay_batches_total", {{"replica", n}})));
  // A decoded batch is not enough: the cold-start replay may have delivered it while the SUB
  // socket is still not subscribed. Only a live batch proves the subscription took.
  const auto moved = [&] {
    for (size_t i = 0; i < names.size(); ++i)
      if (metric("kvrelay_batches_total", {{"replica", names[i]}}) <= before[i]) return false;
    const auto live = live_pipelines(*d.daemon);
    return std::all_of(names.begin(), names.end(),
                       [&](const std::string& n) { return live.count(n) != 0; });
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    // An empty batch indexes nothing and evicts nothing: harmless to every test.
    for (int r = 0; r < d.ranks(); ++r) publish({}, {}, r);
    if (wait_until(moved, milliseconds(200))) return true;
  }
  return moved();
}

void harness::stop_daemon(milliseconds drain) {
  auto& d = *impl_;
  if (!d.daemon) return;
  d.daemon->drain(drain);
  d.daemon->stop();
  d.daemon.reset();
}

void harness::stop() {
  auto& d = *impl_;
  stop_daemon();
  for (auto& e : d.engines) {
    if (e.live) e.live->stop();
    if (e.ring) e.ring->stop();
  }
  d.stub.reset();
  if (d.server) d.server->stop();
}

const std::string& harness::error() const noexcept { return impl_->error; }

kvrelay::daemon& harness::daemon() {
  if (!impl_->daemon) throw std::logic_error("the daemon is not running");
  return *impl_->daemon;
}
policy::policy_server& harness::server() { return *impl_->server; }
fake::publisher& harness::live(int rank) { return *impl_->engine(rank).live; }
fake::publisher& harness::ring(int rank) {
  auto& e = impl_->engine(rank);
  if (!e.ring) throw std::logic_error("this harness has no replay ring");
  return *e.ring;
}
const config::daemon_config& harness::config() const { return impl_->cfg; }
const harness_options& harness::options() const noexcept { return impl_->opt; }
int harness::ranks() const noexcept { return impl_->ranks(); }

std::string harness::replica(int rank) const {
  const auto& e = impl_->opt.engine;
  if (e.dp_size > 1 && e.dp_mode == config::dp_mode::separate)
    return e.replica_id + "-dp" + std::to_string(rank);
  return e.replica_id;
}

uint64_t harness::publish(const std::vector<fake::fake_event>& events, fake::encode_options opt,
                          int rank) {
  opt.dp_rank = rank;
  return impl_->publish_payload(fake::encode_batch(events, opt), rank);
}

uint64_t harness::publish_raw(const std::string& payload, int rank) {
  return impl_->publish_payload(payload, rank);
}

uint64_t harness::publish_replay_only(const std::string& payload, int rank) {
  auto& e = impl_->engine(rank);
  const uint64_t seq = e.live->next_seq();
  if (e.ring) e.ring->publish(payload);
  e.live->skip(1);
  return seq;
}

void harness::lose(uint64_t n, int rank) {
  auto& e = impl_->engine(rank);
  e.live->skip(n);
  if (e.ring) e.ring->skip(n);
}

void harness::restart_engine(int rank) {
  auto& e = impl_->engine(rank);
  if (e.ring) e.ring->restart_incarnation();
  e.live->restart_incarnation();
}

void harness::rebind_engine(int rank) {
  auto& e = impl_->engine(rank);
  e.live->stop();
  if (e.ring) e.ring->stop();
  e = impl_->bind_rank(rank, 0, 0);
}

std::optional<policy::replica_entry> harness::entry_of(const std::string& replica,
                                                       uint64_t prefix,
                                                       const std::string& adapter) const {
  const auto& d = *impl_;
  const auto& e = d.opt.engine;
  // Fresh entries only, as a lookup sees them (an expire-mode eviction stays stored until swept).
  auto holders = d.server->index().holders(d.opt.tenant_id, e.model_id, e.hash_scheme, adapter,
                                           fingerprint::to_be8(prefix), policy::view::fresh);
  auto it = holders.find(replica);
  if (it == holders.end()) return std::nullopt;
  return it->second;
}

std::optional<policy::replica_entry> harness::entry(uint64_t prefix, const std::string& adapter,
                                                    int rank) const {
  return entry_of(replica(rank), prefix, adapter);
}

size_t harness::total_prefixes() const {
  const auto& d = *impl_;
  return d.server->index().total_prefixes(d.opt.tenant_id, d.opt.engine.model_id,
                                          policy::view::fresh);
}

int64_t harness::cache_state_prefixes() {
  auto& d = *impl_;
  ic::GetCacheStateRequest r;
  r.set_model_id(d.opt.engine.model_id);
  r.set_tenant_id(d.opt.tenant_id);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ic::GetCacheStateResponse resp;
  if (!d.rpc().GetCacheState(&ctx, r, &resp).ok()) return -1;
  return resp.summary().total_prefixes();
}

route harness::lookup(const std::vector<uint32_t>& tokens, int64_t block_size,
                      const std::string& adapter) {
  const auto q = fingerprint::query(tokens, block_size);
  return lookup_hashes(q.block_hashes, q.block_token_counts, adapter);
}

route harness::lookup_hashes(const std::vector<std::string>& block_hashes,
                             const std::vector<int32_t>& block_token_counts,
                             const std::string& adapter) {
  auto& d = *impl_;
  ic::LookupRouteRequest r;
  r.set_model_id(d.opt.engine.model_id);
  r.set_tenant_id(d.opt.tenant_id);
  r.set_hash_scheme(d.opt.engine.hash_scheme);
  r.set_adapter_id(adapter);
  for (const auto& h : block_hashes) r.add_block_hashes(h);
  for (int32_t c : block_token_counts) r.add_block_token_counts(c);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ic::LookupRouteResponse resp;
  route out;
  out.ok = d.rpc().LookupRoute(&ctx, r, &resp).ok();
  out.reason = resp.reason_code();
  for (const auto& s : resp.replica_scores())
    out.scores.push_back(route_score{s.replica_id(), s.matched_tokens()});
  return out;
}

std::string harness::dump() const { return impl_->server->index().dump_json(); }

std::string harness::diagnose() {
  auto& d = *impl_;
  std::string out;
  if (d.daemon) {
    out += "daemon tree: " + d.daemon->tree_json(std::chrono::seconds(1)) + "\n";
    out += "daemon metrics:\n" + d.daemon->metrics().render();
  } else {
    out += "daemon: stopped\n";
  }
  return out + "server index: " + dump();
}

double harness::metric(const std::string& name, const label_list& labels) const {
  if (!impl_->daemon) return -1;
  return impl_->daemon->metrics().value(name, labels);
}

double harness::metric_sum(const std::string& name, const label_list& match) const {
  if (!impl_->daemon) return 0;
  std::istringstream in(impl_->daemon->metrics().render());
  std::string line, series;
  label_list labels;
  double value = 0, sum = 0;
  while (std::getline(in, line)) {
    if (!parse_series(line, series, labels, value) || series != name) continue;
    const bool all = std::all_of(match.begin(), match.end(), [&](const auto& want) {
      return std::find(labels.begin(), labels.end(), want) != labels.end();
    });
    if (all) sum += value;
  }
  return sum;
}

bool harness::wait_until(const std::function<bool()>& cond, milliseconds timeout,
                         milliseconds every) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(every);
  }
  return true;
}

std::vector<uint32_t> token_range(uint32_t first, uint32_t n) {
  std::vector<uint32_t> out(n);
  for (uint32_t i = 0; i < n; ++i) out[i] = first + i;
  return out;
}

fake::fake_event stored(std::vector<fake::fake_hash> hashes, std::vector<uint32_t> tokens,
                        int64_t block_size, std::optional<fake::fake_hash> parent) {
  fake::fake_event e;
  e.t = fake::fake_event::type::stored;
  e.block_hashes = std::move(hashes);
  e.token_ids = std::move(tokens);
  e.block_size = block_size;
  e.parent = std::move(parent);
  return e;
}

fake::fake_event removed(std::vector<fake::fake_hash> hashes) {
  fake::fake_event e;
  e.t = fake::fake_event::type::removed;
  e.block_hashes = std::move(hashes);
  return e;
}

fake::fake_event cleared() {
  fake::fake_event e;
  e.t = fake::fake_event::type::cleared;
  return e;
}

std::vector<fake::fake_hash> u_hashes(std::initializer_list<uint64_t> v) {
  std::vector<fake::fake_hash> out;
  for (uint64_t h : v) out.push_back(fake::fake_hash::u(h));
  return out;
}

}  // namespace kvrelay::e2e
