#include "runtime/daemon.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>

#include <caf/send.hpp>

#include <map>
#include <thread>

#include "config/loader.hpp"
#include "messages/system_setup.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "runtime/admin_server.hpp"
#include "runtime/daemon_actor.hpp"
#include "runtime/pipeline_supervisor.hpp"
#include "runtime/status_render.hpp"
#include "runtime/version.hpp"

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
  return o;
}

pipeline_context to_context(const config::daemon_config& cfg,
                            const config::pipeline_settings& ps,
                            std::shared_ptr<metrics_registry> metrics) {
  const auto& e = cfg.engines.at(ps.engine_index);
  pipeline_context ctx;
  ctx.name = e.dp_size > 1 && e.dp_mode == config::dp_mode::merged
                 ? e.replica_id + "-dp" + std::to_string(ps.dp_rank)
                 : ps.replica_id;
  ctx.identity = replica_identity{ps.replica_id, e.model_id, e.tenant_id, e.hash_scheme};
  ctx.metrics = std::move(metrics);
  return ctx;
}

pipeline_options to_pipeline_options(const config::daemon_config& cfg,
                                     const config::pipeline_settings& ps,
                                     replica_debouncer_actor replica) {
  const auto& e = cfg.engines.at(ps.engine_index);
  pipeline_options p;
  p.ingress.source.endpoint = ps.endpoint;
  p.ingress.source.replay_endpoint = ps.replay_endpoint;
  p.ingress.source.topic = e.topic;
  p.ingress.source.reconnect_interval = e.reconnect_backoff;

  p.decoder.adapters = e.adapters;
  p.decoder.index = to_index_options(e);
  if (e.dp_size > 1) p.decoder.expected_dp_rank = ps.dp_rank;

  p.debouncer.window = e.window;
  p.debouncer.l2_mode = e.l2_tier;
  p.debouncer.refresh_interval = cfg.server.refresh_interval;
  p.debouncer.shutdown_clear = cfg.server.on_shutdown == config::shutdown_action::clear;
  p.final_clear = p.debouncer.shutdown_clear;  // what the drain report says the server is left with
  if (replica) {
    // One replica, several ranks: the replica debouncer clears it once at its start and owns
    // the holder set; this rank's data path reaches it through a port.
    p.debouncer.merged_rank = static_cast<unsigned>(ps.dp_rank);
    p.debouncer.replica = std::move(replica);
  }

  p.emitter.client.target = cfg.server.address;
  p.emitter.client.rpc_timeout = cfg.server.rpc_timeout;
  p.emitter.client.keepalive_time = cfg.server.keepalive_time;
  p.emitter.client.keepalive_timeout = cfg.server.keepalive_timeout;
  p.emitter.eviction_mode = config::effective(cfg.server.eviction_mode) == config::eviction_mode::rpc
                                ? emitter::eviction_mode::rpc
                                : emitter::eviction_mode::expire;
  if (cfg.server.tls) {
    p.emitter.client.tls = true;
    p.emitter.client.ca_file = cfg.server.ca_file;
    p.emitter.client.cert_file = cfg.server.cert_file;
    p.emitter.client.key_file = cfg.server.key_file;
    p.emitter.client.server_name = cfg.server.server_name;
  }

  const bool scrape = !e.metrics.url.empty() &&
                      (e.dp_mode == config::dp_mode::separate || ps.dp_rank == 0);
  if (scrape) {
    scraper_options s;
    s.url = e.metrics.url;
    s.interval = e.metrics.interval;
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

log::level to_log_level(config::log_level l) {
  switch (l) {
    case config::log_level::debug: return log::level::debug;
    case config::log_level::info: return log::level::info;
    case config::log_level::warn: return log::level::warn;
    case config::log_level::error: return log::level::error;
  }
  return log::level::info;
}

// CAF's scheduler on the small machines kvrelay shares with engines (issue 13: its polling was
// ~95 % of an idle daemon's CPU).
void tune_scheduler(caf::actor_system_config& cfg) {
  // CAF defaults to at least 4 workers; more workers than cores only adds idle wake-ups.
  cfg.set("scheduler.max-threads",
          static_cast<size_t>(std::max(2u, std::thread::hardware_concurrency())));
  // After each job a worker polls its queue: 100 times at once (CAF's default, ~µs), then
  // `moderate` times with a 50 µs sleep each, then it waits on its condition variable, woken by
  // any job enqueued from outside (a ZMQ, gRPC or timer thread) and by the relaxed timeout,
  // which only serves stealing from a busy worker. CAF's 500 moderate polls (25 ms awake per
  // timer tick) and 10 ms timeouts were most of an idle daemon's wake-ups; 10 and 1 s cut an
  // idle 4-pipeline daemon from ~230 to ~30 scheduler wake-ups/s (BENCHMARKS.md, idle CPU).
  cfg.set("work-stealing.moderate-poll-attempts", size_t{10});
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::seconds(1)});
}

}  // namespace

struct daemon::impl {
  config::daemon_config cfg;
  std::shared_ptr<metrics_registry> metrics = std::make_shared<metrics_registry>();
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  daemon_actor root;  // owns the pipeline handles; everything after start() asks it
  std::vector<std::string> names;  // fixed at start
  std::vector<caf::actor> replica_debouncers;  // merged DP engines: stopped after the pipelines
  std::unique_ptr<admin_server> admin;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  daemon_client client() const { return daemon_client(*sys, root); }
  int64_t uptime_s() const {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                            started)
        .count();
  }
};

daemon::daemon(config::daemon_config cfg) : impl_(std::make_unique<impl>()) {
  impl_->cfg = std::move(cfg);
  add_exporter_metrics(*impl_->metrics);
}

daemon::~daemon() { stop(); }

bool daemon::start(std::string& error) {
  auto& d = *impl_;
  log::set_json(d.cfg.log.format == config::log_format::json);
  log::set_level(to_log_level(d.cfg.log.level));
  d.sys_cfg = std::make_unique<caf::actor_system_config>();
  setup_actor_system(*d.sys_cfg);
  tune_scheduler(*d.sys_cfg);
  d.sys = std::make_unique<caf::actor_system>(*d.sys_cfg);
  std::map<size_t, replica_debouncer_actor> replicas;  // per merged engine
  std::vector<daemon_pipeline> pipelines;
  const auto stop_spawned = [&] {
    for (auto& p : pipelines) caf::anon_send_exit(p.hdl, caf::exit_reason::user_shutdown);
    for (auto& r : d.replica_debouncers) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    d.replica_debouncers.clear();
  };
  for (const auto& ps : config::pipelines(d.cfg)) {
    const auto& e = d.cfg.engines.at(ps.engine_index);
    replica_debouncer_actor replica;
    if (e.dp_size > 1 && e.dp_mode == config::dp_mode::merged) {
      auto& slot = replicas[ps.engine_index];
      if (!slot) {
        auto rctx = to_context(d.cfg, ps, d.metrics);
        rctx.name = ps.replica_id;
        slot = spawn_replica_debouncer(*d.sys, rctx, to_pipeline_options(d.cfg, ps, {}).debouncer);
        d.replica_debouncers.push_back(caf::actor_cast<caf::actor>(slot));
      }
      replica = slot;
    }
    const auto opts = to_pipeline_options(d.cfg, ps, std::move(replica));
    const auto ctx = to_context(d.cfg, ps, d.metrics);
    daemon_pipeline p;
    p.facts.name = ctx.name;
    p.facts.replica_id = ps.replica_id;
    p.facts.endpoint = opts.ingress.source.endpoint;
    p.facts.replay_endpoint = opts.ingress.source.replay_endpoint;
    p.facts.topic = opts.ingress.source.topic;
    p.hdl = spawn_pipeline(*d.sys, ctx, opts, error);
    if (!p.hdl) {
      error = p.facts.name + ": " + error;
      stop_spawned();
      return false;
    }
    d.names.push_back(p.facts.name);
    pipelines.push_back(std::move(p));
  }
  const size_t count = pipelines.size();
  d.root = spawn_daemon_actor(*d.sys, std::move(pipelines));
  if (!d.cfg.admin.listen.empty()) {
    d.admin = std::make_unique<admin_server>(
        admin_server::backend{d.client(), d.metrics, d.started});
    if (!d.admin->start(d.cfg.admin, admin_limits_from(d.cfg.admin), error)) return false;
  }
  log::info("kvrelay starting",
            {{"version", KVRELAY_VERSION}, {"pipelines", count},
             {"server", d.cfg.server.address}, {"admin", d.cfg.admin.listen}});
  return true;
}

namespace {

void log_outcome(const drain_report& r) {
  std::vector<log::field> f{{"pipeline", r.pipeline},
                            {"final_clear", r.final_clear},
                            {"left_on_server", r.left_on_server()}};
  if (r.complete) {
    log::write(log::level::info,
               r.final_clear ? "drain finished; the server was cleared"
                             : "drain finished; the server keeps this replica's entries until its "
                               "TTL expires them",
               f);
    return;
  }
  f.emplace_back("step", r.failed_step);
  f.emplace_back("undelivered_updates", r.pending);
  f.emplace_back("units_unacknowledged", r.in_flight);
  log::write(log::level::warn,
             r.timed_out ? "drain timed out; the server may hold stale entries and miss the "
                           "undelivered updates until the next start clears and catches up"
                         : "drain incomplete; the server may hold stale entries and miss the "
                           "undelivered updates until the next start clears and catches up",
             f);
}

}  // namespace

std::vector<drain_report> daemon::drain(std::chrono::milliseconds deadline) {
  auto& d = *impl_;
  if (!d.sys || d.names.empty()) return {};
  auto reports = d.client().drain(deadline);
  if (reports.empty()) {  // the root did not answer at all
    for (const auto& n : d.names) {
      drain_report r;
      r.pipeline = n;
      r.timed_out = true;
      r.failed_step = "daemon";
      reports.push_back(std::move(r));
    }
  }
  for (const auto& r : reports) log_outcome(r);
  return reports;
}

bool daemon::all_complete(const std::vector<drain_report>& reports) {
  return std::all_of(reports.begin(), reports.end(),
                     [](const drain_report& r) { return r.complete; });
}

void daemon::stop() {
  auto& d = *impl_;
  if (d.admin) {
    d.admin->stop();
    d.admin.reset();
  }
  if (!d.sys) return;
  if (d.root) caf::anon_send_exit(d.root, caf::exit_reason::user_shutdown);
  d.root = nullptr;
  for (auto& r : d.replica_debouncers) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  d.replica_debouncers.clear();
  d.sys->await_all_actors_done();
  d.sys.reset();
  d.sys_cfg.reset();
}

std::string daemon::tree_json(std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (!d.sys) return {};
  auto views = d.client().status(timeout + std::chrono::seconds(1));
  return render_tree(views ? *views : std::vector<pipeline_view>{}, d.uptime_s());
}

std::string daemon::engines_json() const {
  const auto& d = *impl_;
  if (!d.sys) return "[]";
  auto views = d.client().status();
  return render_engines(views ? *views : std::vector<pipeline_view>{});
}

bool daemon::ready(std::vector<std::string>* reasons) const {
  const auto& d = *impl_;
  if (!d.sys || d.names.empty()) {
    if (reasons) reasons->push_back(d.sys ? "no pipeline configured" : "not started");
    return false;
  }
  auto [ok, why] = d.client().ready();
  if (reasons) *reasons = std::move(why);
  return ok;
}

std::vector<std::string> daemon::not_ready_reasons() const {
  const auto& d = *impl_;
  if (!d.sys) return {"not started"};
  return d.client().ready().second;
}

bool daemon::crash(const std::string& pipeline, actor_kind who) {
  auto& d = *impl_;
  return d.sys && d.client().crash(pipeline, who);
}

bool daemon::crash(const std::string& pipeline, const std::string& actor) {
  const auto who = parse_actor_kind(actor);
  return who && crash(pipeline, *who);
}

bool daemon::add_adapter(const std::string& replica_id, int64_t id, const std::string& name) {
  auto& d = *impl_;
  return d.sys && d.client().add_adapter(replica_id, id, name);
}

std::vector<std::string> daemon::reload(const config::daemon_config& next) {
  auto& d = *impl_;
  auto diff = config::diff_for_reload(d.cfg, next);
  if (diff.log_level_changed) {
    log::set_level(to_log_level(next.log.level));
    d.cfg.log.level = next.log.level;
  }
  for (const auto& rid : diff.adapters_changed) {
    for (const auto& e : next.engines) {
      if (e.replica_id != rid) continue;
      for (const auto& [id, name] : e.adapters) add_adapter(rid, id, name);
      for (auto& mine : d.cfg.engines)
        if (mine.replica_id == rid) mine.adapters = e.adapters;
    }
  }
  return diff.restart_required;
}

metrics_registry& daemon::metrics() { return *impl_->metrics; }
const config::daemon_config& daemon::config() const { return impl_->cfg; }
uint16_t daemon::admin_port() const { return impl_->admin ? impl_->admin->port() : 0; }
std::vector<std::string> daemon::pipeline_names() const { return impl_->names; }

}  // namespace kvrelay
