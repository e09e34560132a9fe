// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "daemon/daemon.hpp"

#include "base/build_info.hpp"
#include "durable/format/state_dir.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <algorithm>

#include <caf/send.hpp>

#include <map>
#include <optional>
#include <utility>

#include "actors/emitter/policy_client.hpp"
#include "config/loader.hpp"
#include "messages/system_setup.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "daemon/memory_setup.hpp"
#include "admin/admin_server.hpp"
#include "supervision/daemon_actor.hpp"
#include "daemon/discovered_engines.hpp"
#include "daemon/pipeline_setup.hpp"
#include "supervision/pipeline_supervisor.hpp"
#include "admin/status_render.hpp"
#include "daemon/version.hpp"

namespace kvrelay {

namespace {

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
  // The process-wide log level before start(): a daemon run inside another program (the tests)
  // gives it back when it stops.
  std::optional<log::level> level_before;
  std::shared_ptr<metrics_registry> metrics = std::make_shared<metrics_registry>();
  std::shared_ptr<memory_budget> budget;  // the process' (daemon/memory_setup.hpp)
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  daemon_actor root;  // owns the pipeline handles; everything after start() asks it
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
  if (!d.level_before) d.level_before = log::current_level();
  log::set_level(to_log_level(d.cfg.log.level));
  // An explicit state dir that cannot be written stops the start, with its path and why
  // (--check says the same without creating it).
  if (!d.cfg.state.dir.empty()) {
    if (auto s = check_state_dir(d.cfg.state.dir, /*create=*/true); !s) {
      error = "state.dir " + s.error().context;
      return false;
    }
  }
  // One memory budget for every pipeline, resolved once here: the pipelines' bounds derive from
  // this object (to_pipeline_options), never from memory.budget, which stays as configured.
  const auto choice = choose_budget(d.cfg);
  d.budget = memory_budget::make(choice.bytes, choice.source);
  if (choice.source == budget_source::cgroup_v1 || choice.source == budget_source::cgroup_v2) {
    const auto slash = choice.cgroup_file.rfind('/');  // MG7: the limit file's cgroup
    d.budget->set_process_limit(
        choice.cgroup_limit,
        slash == std::string::npos ? std::string() : choice.cgroup_file.substr(0, slash),
        choice.source == budget_source::cgroup_v2);
  }
  add_budget_metrics(*d.metrics, d.budget);
  log::info("memory budget", {{"budget", describe(choice)},
                              {"queue_limit_bytes", d.budget->limit_bytes()}});
  d.sys_cfg = std::make_unique<caf::actor_system_config>();
  setup_actor_system(*d.sys_cfg);
  tune_scheduler(*d.sys_cfg);
  d.sys = std::make_unique<caf::actor_system>(*d.sys_cfg);
  std::vector<daemon_pipeline> pipelines;
  const auto stop_spawned = [&] {
    for (auto& p : pipelines) caf::anon_send_exit(p.hdl, caf::exit_reason::user_shutdown);
    for (auto& r : d.replica_debouncers) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    d.replica_debouncers.clear();
  };
  // The configured engines now; those with a URL when discovery answers (the root spawns them).
  std::map<size_t, std::vector<config::pipeline_settings>> by_engine;
  for (const auto& ps : config::pipelines(d.cfg))
    if (d.cfg.engines.at(ps.engine_index).url.empty()) by_engine[ps.engine_index].push_back(ps);
  for (const auto& [engine, ranks] : by_engine) {
    auto spawned = spawn_engine(*d.sys, d.cfg, ranks, d.metrics, {}, d.budget);
    if (!spawned) {
      error = spawned.error().context;
      stop_spawned();
      return false;
    }
    if (spawned.value().replica) d.replica_debouncers.push_back(spawned.value().replica);
    for (auto& p : spawned.value().pipelines) pipelines.push_back(std::move(p));
  }
  daemon_discovery discovery;
  discovery.options = discovery_options_for(d.cfg);
  if (!discovery.options.engines.empty()) {
    // The server settings are the same for every pipeline: a bad TLS file is refused now, not
    // when the engine first answers.
    config::pipeline_settings any;
    any.engine_index = discovery.options.engines.front().index;
    if (auto err = policy_client::validate(to_pipeline_options(d.cfg, any, {}).emitter.client);
        !err.empty()) {
      error = err;
      stop_spawned();
      return false;
    }
    for (const auto& e : discovery.options.engines)
      discovery.replica_ids[e.index] = d.cfg.engines[e.index].replica_id;
    discovery.spawn = [sys = d.sys.get(), cfg = d.cfg, metrics = d.metrics, budget = d.budget](
                          size_t engine, const discovered_target& t, const discovery_actor& disc) {
      const auto [target_cfg, ranks] = apply_target(cfg, engine, t);
      return spawn_engine(*sys, target_cfg, ranks, metrics, disc, budget);
    };
  }
  const size_t count = pipelines.size();
  const size_t discovery_count = discovery.options.engines.size();
  d.root = spawn_daemon_actor(*d.sys, std::move(pipelines), std::move(discovery));
  if (!d.cfg.admin.listen.empty()) {
    d.admin = std::make_unique<admin_server>(
        admin_server::backend{d.client(), d.metrics, d.started, d.budget});
    if (!d.admin->start(d.cfg.admin, admin_limits_from(d.cfg.admin), error)) return false;
  }
  // Pipelines of engines with a URL start when their engine answers (or, for a URL derived from
  // the metrics URL, when it does not): "pipelines 0" alone would read as a daemon doing nothing.
  log::info("kvrelay starting",
            {{"version", build::describe()}, {"engines", d.cfg.engines.size()},
             {"pipelines_started", count},
             {"engines_awaiting_discovery", discovery_count},
             {"server", config::policy_targets_text(d.cfg.server)},
             {"admin", d.admin ? d.admin->listening() : std::string("off")}});
  return true;
}

namespace {

void log_outcome(const drain_report& r) {
  std::vector<log::field> f{{"pipeline", r.pipeline},
                            {"final_clear", r.final_clear},
                            {"left_on_server", r.left_on_server()}};
  if (!r.server_acknowledged) f.emplace_back("server_reached", false);
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
  if (!d.sys || !d.root) return {};
  auto reports = d.client().drain(deadline);
  if (reports.empty() && !d.client().pipeline_names().empty()) {  // the root did not answer
    drain_report r;
    r.pipeline = "daemon";
    r.timed_out = true;
    r.failed_step = "daemon";
    reports.push_back(std::move(r));
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
  if (d.sys) {
    if (d.root) caf::anon_send_exit(d.root, caf::exit_reason::user_shutdown);
    d.root = nullptr;
    for (auto& r : d.replica_debouncers) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    d.replica_debouncers.clear();
    d.sys->await_all_actors_done();
    d.sys.reset();
    d.sys_cfg.reset();
  }
  if (d.level_before) log::set_level(*std::exchange(d.level_before, std::nullopt));
}

std::string daemon::tree_json(std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (!d.sys) return {};
  auto v = d.client().status(timeout + std::chrono::seconds(1));
  const std::string memory = d.budget ? budget_json(*d.budget) : std::string();
  return v ? render_tree(v->pipelines, d.uptime_s(), v->discovery, memory)
           : render_tree({}, d.uptime_s(), {}, memory);
}

std::string daemon::engines_json() const {
  const auto& d = *impl_;
  if (!d.sys) return "[]";
  auto v = d.client().status();
  return render_engines(v ? v->pipelines : std::vector<pipeline_view>{});
}

bool daemon::ready(std::vector<std::string>* reasons) const {
  const auto& d = *impl_;
  if (!d.sys) {
    if (reasons) reasons->push_back("not started");
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
std::shared_ptr<memory_budget> daemon::budget() const { return impl_->budget; }
const config::daemon_config& daemon::config() const { return impl_->cfg; }
uint16_t daemon::admin_port() const { return impl_->admin ? impl_->admin->port() : 0; }
std::vector<std::string> daemon::pipeline_names() const {
  const auto& d = *impl_;
  return d.sys && d.root ? d.client().pipeline_names() : std::vector<std::string>{};
}

}  // namespace kvrelay
