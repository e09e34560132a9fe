// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "daemon/pipeline_setup.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include <algorithm>

#include "base/memory_budget.hpp"
#include "base/metrics_registry.hpp"
#include "net/dns_resolver.hpp"

namespace kvrelay {

namespace {

index_options to_index_options(const config::engine_settings& e) {
  index_options o;
  o.unknown_parent = e.unknown_parent == config::unknown_parent::root
                         ? unknown_parent_policy::root
                         : unknown_parent_policy::drop;
  o.index_salted = e.index_salted;
  o.ignore_block_removed = false;  // L2 downgrades are the debouncer's job (own CSU, L03)
  o.max_resident = static_cast<size_t>(std::max<int64_t>(e.max_blocks_per_adapter, 0));
  o.max_t2_blocks = static_cast<size_t>(std::max<int64_t>(e.max_t2_blocks_per_adapter, 0));
  o.max_t3_blocks = static_cast<size_t>(std::max<int64_t>(e.max_t3_blocks_per_adapter, 0));
  return o;
}

std::string pipeline_name(const config::daemon_config& cfg, const config::pipeline_settings& ps) {
  const auto& e = cfg.engines.at(ps.engine_index);
  return e.dp_size > 1 && e.dp_mode == config::dp_mode::merged
             ? e.replica_id + "-dp" + std::to_string(ps.dp_rank)
             : ps.replica_id;
}

}  // namespace

pipeline_context to_context(const config::daemon_config& cfg,
                            const config::pipeline_settings& ps,
                            std::shared_ptr<metrics_registry> metrics,
                            std::shared_ptr<memory_budget> budget) {
  const auto& e = cfg.engines.at(ps.engine_index);
  pipeline_context ctx;
  ctx.budget = std::move(budget);
  ctx.name = pipeline_name(cfg, ps);
  ctx.identity = replica_identity{ps.replica_id, e.model_id, e.tenant_id, e.hash_scheme};
  ctx.metrics = std::move(metrics);
  return ctx;
}

pipeline_options to_pipeline_options(const config::daemon_config& cfg,
                                     const config::pipeline_settings& ps,
                                     replica_debouncer_actor replica,
                                     const std::shared_ptr<const memory_budget>& budget) {
  const auto& e = cfg.engines.at(ps.engine_index);
  pipeline_options p;
  p.ingress.source.endpoint = ps.endpoint;
  p.ingress.source.replay_endpoint = ps.replay_endpoint;
  p.ingress.source.topic = e.topic;
  p.ingress.source.reconnect_interval = e.reconnect_backoff;

  p.decoder.router.adapters = e.adapters;
  p.decoder.index = to_index_options(e);
  if (e.dp_size > 1) p.decoder.router.expected_dp_rank = ps.dp_rank;

  if (budget) {
    const auto b = derive_bounds(budget->total_bytes(), config::pipelines(cfg).size());
    p.ingress.source.rcvhwm = b.rcvhwm;
    p.ingress.source.replay_rcvhwm = b.rcvhwm;
    auto& t = p.ingress.source.tracker;
    t.max_buffered_bytes =
        std::min<size_t>(t.max_buffered_bytes, static_cast<size_t>(b.queue_bytes));
    p.debouncer.protocol.max_pending = b.max_pending;
  }

  p.debouncer.protocol.window = e.window;
  p.debouncer.protocol.l2_mode = e.l2_tier;
  p.debouncer.protocol.refresh_interval = cfg.server.refresh_interval;
  p.debouncer.protocol.walk_chunk = static_cast<uint32_t>(cfg.server.walk_chunk);
  p.debouncer.protocol.history_windows = static_cast<uint32_t>(cfg.server.replay_wait_windows);
  if (cfg.server.max_pending > 0)
    p.debouncer.protocol.max_pending = static_cast<size_t>(cfg.server.max_pending);
  p.debouncer.protocol.shutdown_clear = cfg.server.on_shutdown == config::shutdown_action::clear;
  // What the drain report says the server is left with.
  p.final_clear = p.debouncer.protocol.shutdown_clear;
  if (replica) {
    // One replica, several ranks: the replica debouncer clears it once at its start and owns
    // the holder set; this rank's data path reaches it through a port.
    p.debouncer.merged_rank = static_cast<unsigned>(ps.dp_rank);
    p.debouncer.replica = std::move(replica);
  }

  // HA: every server a target of its own; client.target names the first, for what
  // still speaks of one server.
  p.emitter.targets = config::policy_targets(cfg.server);
  p.emitter.client.target = p.emitter.targets.front();
  p.emitter.resolve_interval = cfg.server.resolve_interval;
  // DNS fan-out names: the emitter's resolver thread calls this; 5 s bounds one resolve (the
  // emitter keeps the last good set when it fails).
  p.emitter.resolve = [](const std::string& spec) {
    std::string why;
    auto t = parse_dns_target(spec, why);
    if (!t) return net::resolve_result{{}, "invalid DNS target \"" + spec + "\": " + why};
    return net::resolve(*t, std::chrono::seconds(5));
  };
  switch (cfg.server.readiness) {
    case config::readiness_policy::any:
      p.debouncer.protocol.readiness = debounce::readiness_policy::any;
      break;
    case config::readiness_policy::all:
      p.debouncer.protocol.readiness = debounce::readiness_policy::all;
      break;
    case config::readiness_policy::quorum:
      p.debouncer.protocol.readiness = debounce::readiness_policy::quorum;
      break;
  }
  p.debouncer.protocol.target.max_lag_bytes =
      static_cast<size_t>(std::max<int64_t>(cfg.server.max_target_lag, 1));
  p.emitter.client.rpc_timeout = cfg.server.rpc_timeout;
  p.emitter.client.keepalive_time = cfg.server.keepalive_time;
  p.emitter.client.keepalive_timeout = cfg.server.keepalive_timeout;
  const bool rpc = config::effective(cfg.server.eviction_mode) == config::eviction_mode::rpc;
  p.emitter.sequencer.mode = rpc ? emitter::eviction_mode::rpc : emitter::eviction_mode::expire;
  // rpc: a base-model PREFIX_EVICTED sweeps every adapter partition on a server that does not
  // read adapter_scoped; put back what LoRA adapters still hold (docs/operations.md).
  p.debouncer.protocol.repair_base_sweeps = rpc && !cfg.server.scoped_evictions;
  if (cfg.server.tls) {
    p.emitter.client.tls = true;
    p.emitter.client.ca_file = cfg.server.ca_file;
    p.emitter.client.cert_file = cfg.server.cert_file;
    p.emitter.client.key_file = cfg.server.key_file;
    p.emitter.client.server_name = cfg.server.server_name;
  }

  if (!cfg.state.dir.empty()) {
    // The durable index: a snapshot and a delta log per pipeline, named by what identifies it
    // (RD1).
    state_options so;
    so.who = snapshot::identity{ps.replica_id, e.model_id, e.tenant_id, e.hash_scheme,
                                ps.endpoint, e.topic, ps.dp_rank};
    so.pipeline = pipeline_name(cfg, ps);
    so.file = snapshot_file(cfg.state.dir, so.pipeline, so.who);
    so.interval = cfg.state.interval;
    so.ring_batches = static_cast<uint64_t>(std::max<int64_t>(cfg.state.ring_batches, 1));
    so.evidence = metrics_evidence(e.metrics.url, std::chrono::seconds(2));
    p.state = std::move(so);
  }

  const bool scrape = !e.metrics.url.empty() &&
                      (e.dp_mode == config::dp_mode::separate || ps.dp_rank == 0);
  if (scrape) {
    scraper_options s;
    s.url = e.metrics.url;
    s.interval = e.metrics.interval;
    s.http_timeout = e.metrics.timeout;
    s.rpc_timeout = cfg.server.rpc_timeout;
    s.profile.hash_scheme = e.hash_scheme;
    s.profile.cache_tier = config::to_string(e.metrics.tier);
    s.profile.model_name = e.metrics.model_label;
    s.profile.cache_size_bytes = e.metrics.cache_size_bytes;
    s.profile.max_concurrency_ceiling = e.metrics.max_concurrency;
    if (e.dp_size > 1) s.profile.engine_label = std::to_string(ps.dp_rank);  // vLLM `engine`
    p.scraper = s;
  }
  return p;
}

outcome<engine_pipelines> spawn_engine(caf::actor_system& sys, const config::daemon_config& cfg,
                                       const std::vector<config::pipeline_settings>& ranks,
                                       const std::shared_ptr<metrics_registry>& metrics,
                                       const discovery_actor& discovery,
                                       std::shared_ptr<memory_budget> budget) {
  engine_pipelines out;
  if (ranks.empty()) return out;
  const auto& e = cfg.engines.at(ranks.front().engine_index);
  replica_debouncer_actor replica;
  if (e.dp_size > 1 && e.dp_mode == config::dp_mode::merged) {
    auto rctx = to_context(cfg, ranks.front(), metrics, budget);
    rctx.name = e.replica_id;
    replica =
        spawn_replica_debouncer(sys, rctx,
                                to_pipeline_options(cfg, ranks.front(), {}, budget).debouncer);
    out.replica = caf::actor_cast<caf::actor>(replica);
  }
  for (const auto& ps : ranks) {
    auto opts = to_pipeline_options(cfg, ps, replica, budget);
    if (!e.url.empty()) {
      opts.discovery = discovery;
      opts.engine_index = ps.engine_index;
      opts.dp_rank = ps.dp_rank;
    }
    const auto ctx = to_context(cfg, ps, metrics, budget);
    daemon_pipeline p;
    p.engine = ps.engine_index;
    p.facts.name = ctx.name;
    p.facts.replica_id = ps.replica_id;
    p.facts.endpoint = opts.ingress.source.endpoint;
    p.facts.replay_endpoint = opts.ingress.source.replay_endpoint;
    p.facts.topic = opts.ingress.source.topic;
    std::string error;
    p.hdl = spawn_pipeline(sys, ctx, opts, error);
    if (!p.hdl) {
      stop_engine(out);
      return failure{ec::invalid_config, p.facts.name + ": " + error, {}};
    }
    out.pipelines.push_back(std::move(p));
  }
  return out;
}

void stop_engine(engine_pipelines& e) {
  for (auto& p : e.pipelines)
    if (p.hdl) caf::anon_send_exit(p.hdl, caf::exit_reason::user_shutdown);
  e.pipelines.clear();
  if (e.replica) caf::anon_send_exit(e.replica, caf::exit_reason::user_shutdown);
  e.replica = nullptr;
}

}  // namespace kvrelay
