#include "runtime/daemon.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <mutex>
#include <thread>

#include "config/loader.hpp"
#include "messages/system_setup.hpp"
#include "runtime/admin_server.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
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
  // server.on_shutdown (default clear) is for the lead to wire here; until then keep, as before
  // (tests that assert the server after stop_daemon then need the harness to pin keep).
  p.debouncer.shutdown_clear = false;
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

}  // namespace

struct daemon::impl {
  config::daemon_config cfg;
  std::shared_ptr<metrics_registry> metrics = std::make_shared<metrics_registry>();
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  // Fixed at start: what the daemon knows of a pipeline without asking it. Everything that
  // changes (health, adapters, counters) lives in the pipeline's actors and is asked for.
  struct pipeline {
    std::string name;
    std::string replica_id;
    pipeline_actor hdl;
    std::string endpoint, replay_endpoint, topic;
  };
  std::vector<pipeline> pipelines;
  std::vector<caf::actor> replica_debouncers;  // merged DP engines: stopped after the pipelines
  std::unique_ptr<admin_server> admin;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
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
  // CAF defaults to at least 4 workers; more workers than cores only adds idle wake-ups
  // (each idle worker polls every few ms) on the small machines kvrelay shares with engines.
  d.sys_cfg->set("scheduler.max-threads",
                 static_cast<size_t>(std::max(2u, std::thread::hardware_concurrency())));
  d.sys = std::make_unique<caf::actor_system>(*d.sys_cfg);
  std::map<size_t, replica_debouncer_actor> replicas;  // per merged engine
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
    impl::pipeline p;
    const auto opts = to_pipeline_options(d.cfg, ps, std::move(replica));
    const auto ctx = to_context(d.cfg, ps, d.metrics);
    p.name = ctx.name;
    p.replica_id = ps.replica_id;
    p.endpoint = opts.ingress.source.endpoint;
    p.replay_endpoint = opts.ingress.source.replay_endpoint;
    p.topic = opts.ingress.source.topic;
    p.hdl = spawn_pipeline(*d.sys, ctx, opts, error);
    if (!p.hdl) {
      error = p.name + ": " + error;
      return false;
    }
    d.pipelines.push_back(std::move(p));
  }
  if (!d.cfg.admin.listen.empty()) {
    d.admin = std::make_unique<admin_server>(*this);
    if (!d.admin->start(d.cfg.admin, error)) return false;
  }
  log::info("kvrelay starting",
            {{"version", KVRELAY_VERSION}, {"pipelines", d.pipelines.size()},
             {"server", d.cfg.server.address}, {"admin", d.cfg.admin.listen}});
  return true;
}

bool daemon::drain(std::chrono::milliseconds deadline) {
  auto& d = *impl_;
  if (!d.sys || d.pipelines.empty()) return true;
  caf::scoped_actor self{*d.sys};
  bool all = true;
  // Ask every pipeline at once so they drain in parallel within one deadline.
  using handle_t = decltype(self->request(d.pipelines.front().hdl, deadline, atom::drain_v));
  std::vector<std::pair<std::string, handle_t>> pending;
  for (auto& p : d.pipelines)
    pending.emplace_back(p.name, self->request(p.hdl, deadline, atom::drain_v));
  for (auto& [name, h] : pending) {
    h.receive([&](bool ok) { all = all && ok; },
              [&, n = name](caf::error& err) {
                all = false;
                log::warn("reporter drain timed out",
                          {{"pipeline", n}, {"err", caf::to_string(err)}});
              });
  }
  return all;
}

void daemon::stop() {
  auto& d = *impl_;
  if (d.admin) {
    d.admin->stop();
    d.admin.reset();
  }
  if (!d.sys) return;
  for (auto& p : d.pipelines) caf::anon_send_exit(p.hdl, caf::exit_reason::user_shutdown);
  d.pipelines.clear();
  for (auto& r : d.replica_debouncers) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  d.replica_debouncers.clear();
  d.sys->await_all_actors_done();
  d.sys.reset();
  d.sys_cfg.reset();
}

namespace {

// Every pipeline's status, asked of all at once; one that does not answer is reported as such.
template <class Pipelines>
std::vector<actor_status> pipeline_statuses(caf::actor_system& sys, const Pipelines& ps,
                                            std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys};
  std::vector<actor_status> out(ps.size());
  using handle_t = decltype(self->request(ps.front().hdl, timeout, atom::status_v));
  std::vector<handle_t> pending;
  pending.reserve(ps.size());
  for (const auto& p : ps) pending.push_back(self->request(p.hdl, timeout, atom::status_v));
  for (size_t i = 0; i < ps.size(); ++i) {
    pending[i].receive([&](actor_status& s) { out[i] = std::move(s); },
                       [&](caf::error& err) {
                         out[i].kind = "pipeline";
                         out[i].state = "no answer: " + caf::to_string(err);
                         out[i].add("pipeline", ps[i].name);
                       });
  }
  return out;
}

}  // namespace

std::string daemon::tree_json(std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (!d.sys) return {};
  nlohmann::ordered_json doc;
  doc["kvrelay"] = KVRELAY_VERSION;
  doc["uptime_s"] = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::steady_clock::now() - d.started)
                        .count();
  auto& arr = doc["pipelines"] = nlohmann::ordered_json::array();
  if (!d.pipelines.empty())
    for (const auto& s : pipeline_statuses(*d.sys, d.pipelines, timeout))
      arr.push_back(nlohmann::ordered_json::parse(render_json(s)));
  return doc.dump();
}

std::string daemon::engines_json() const {
  const auto& d = *impl_;
  auto out = nlohmann::ordered_json::array();
  if (!d.sys || d.pipelines.empty()) return out.dump();
  const auto statuses = pipeline_statuses(*d.sys, d.pipelines, std::chrono::seconds(2));
  for (size_t i = 0; i < d.pipelines.size(); ++i) {
    const auto& p = d.pipelines[i];
    const auto& s = statuses[i];
    const actor_status* dec = s.child("decoder");
    nlohmann::ordered_json j;
    j["pipeline"] = p.name;
    j["replica_id"] = p.replica_id;
    j["endpoint"] = p.endpoint;
    j["replay_endpoint"] = p.replay_endpoint;
    j["topic"] = p.topic;
    j["connected"] = s.flag("engine_connected");
    j["last_seq"] = dec ? dec->integer("last_seq", 0) : 0;
    j["batches"] = dec ? dec->integer("batches", 0) : 0;
    j["events"] = dec ? dec->integer("events", 0) : 0;
    j["ready"] = s.flag("ready");
    j["unhealthy"] = s.flag("unhealthy");
    if (const auto* v = s.find("not_ready"))
      if (const auto* l = std::get_if<actor_status::string_list>(v)) j["not_ready"] = *l;
    if (const auto* v = s.find("index_incomplete"))
      if (const auto* t = std::get_if<std::string>(v)) j["index_incomplete"] = *t;
    j["engine_asleep"] = s.flag("engine_asleep");
    auto adapters = nlohmann::ordered_json::object();
    if (const auto* v = s.find("adapters"))
      if (const auto* m = std::get_if<actor_status::string_map>(v))
        for (const auto& [id, name] : *m) adapters[id] = name;
    j["adapters"] = std::move(adapters);
    out.push_back(std::move(j));
  }
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

bool daemon::ready(std::vector<std::string>* reasons) const {
  const auto& d = *impl_;
  if (!d.sys || d.pipelines.empty()) return false;
  caf::scoped_actor self{*d.sys};
  bool all = true;
  for (const auto& p : d.pipelines)
    self->request(p.hdl, std::chrono::seconds(1), atom::ready_v)
        .receive(
            [&](bool ok, std::vector<std::string>& why) {
              all = all && ok;
              if (reasons)
                for (auto& w : why) reasons->push_back(p.name + ": " + w);
            },
            [&](caf::error& err) {
              all = false;
              if (reasons) reasons->push_back(p.name + ": no answer: " + caf::to_string(err));
            });
  return all;
}

bool daemon::crash(const std::string& pipeline, const std::string& unit) {
  auto& d = *impl_;
  if (!d.sys) return false;
  for (auto& p : d.pipelines) {
    if (p.name != pipeline) continue;
    caf::scoped_actor self{*d.sys};
    bool ok = false;
    self->request(p.hdl, std::chrono::seconds(2), atom::crash_v, unit)
        .receive([&](bool r) { ok = r; }, [&](caf::error&) { ok = false; });
    return ok;
  }
  return false;
}

bool daemon::add_adapter(const std::string& replica_id, int64_t id, const std::string& name) {
  auto& d = *impl_;
  bool any = false;
  for (auto& p : d.pipelines) {
    if (!replica_id.empty() && p.replica_id != replica_id) continue;
    caf::anon_send(p.hdl, atom::adapter_v, id, name);  // the pipeline keeps it for restarts
    any = true;
  }
  return any;
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

std::vector<std::string> daemon::pipeline_names() const {
  std::vector<std::string> out;
  for (const auto& p : impl_->pipelines) out.push_back(p.name);
  return out;
}

}  // namespace kvrelay
