// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "supervision/daemon_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <functional>
#include <iterator>
#include <memory>
#include <set>

#include "base/log.hpp"
#include "base/tsan.hpp"
#include "messages/fan_out.hpp"


namespace kvrelay {

namespace {

using std::chrono::milliseconds;

// A pipeline's status tree waits up to 1 s for its slowest child; the root waits a little longer.
constexpr milliseconds pipeline_status_timeout{2000};
constexpr milliseconds pipeline_ready_timeout{1000};
// After its budget a pipeline still reads its own status for the drain report (≤ 0.5 s).
constexpr milliseconds drain_report_slack{1000};

struct daemon_state {
  static inline constexpr const char* name = "daemon";
  std::vector<daemon_pipeline> pipelines;  // by engine index: configured and discovered ones

  // -- engines with a URL ------------------------------------------------------------------------
  daemon_discovery setup;
  discovery_actor discovery;
  std::map<size_t, std::shared_ptr<const discovered_target>> targets;  // what each runs on
  std::map<size_t, caf::actor> replicas;   // merged DP: each discovered engine's debouncer
  std::map<size_t, std::string> waiting;   // engine → "<replica>: waiting for engine <url>: ..."
  struct added_adapter {
    std::string replica;
    int64_t id;
    std::string name;
  };
  std::vector<added_adapter> adapters;  // POST /debug/adapters: re-applied to respawned pipelines
  // Engines whose old pipelines are stopping: the actors not yet DOWN, and the target to start
  // once they are. The new pipelines wait for the old ones: an old emitter still sending its
  // queued units after the new pipeline's ALL_CLEARED would leave hints of the old process.
  struct retiring {
    std::set<caf::actor_addr> left;
    std::shared_ptr<const discovered_target> next;
    std::string url;
  };
  std::map<size_t, retiring> retiring_engines;

  // Stopping the root stops the daemon: every pipeline tears down its children in order.
  ~daemon_state() {
    for (auto& p : pipelines)
      if (p.hdl) caf::anon_send_exit(p.hdl, caf::exit_reason::user_shutdown);
    for (auto& [e, r] : replicas) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    if (discovery) caf::anon_send_exit(discovery, caf::exit_reason::user_shutdown);
  }
};

using daemon_self = daemon_actor::stateful_pointer<daemon_state>;

// The origins shown by /debug/engines, from the target a discovered rank runs on.
std::vector<std::pair<std::string, std::string>> origins_of(const discovered_target& t,
                                                            const discovered_rank& r) {
  return {{"endpoint", r.endpoint.origin},   {"replay_endpoint", r.replay_endpoint.origin},
          {"topic", r.topic.origin},         {"model_id", t.model_id.origin},
          {"hash_scheme", t.hash_scheme.origin}, {"metrics_url", t.metrics_url.origin},
          {"dp_size", t.dp_size.origin}};
}

void set_origins(daemon_state& st, size_t engine, const discovered_target& t) {
  for (auto& p : st.pipelines) {
    if (p.engine != engine) continue;
    for (const auto& r : t.ranks)
      if (r.replica_id == p.facts.replica_id && r.endpoint.value == p.facts.endpoint)
        p.facts.origins = origins_of(t, r);
  }
}

void spawn_discovery_actor(daemon_self self) {
  auto& st = self->state;
  pipeline_context ctx;
  ctx.name = "discovery";
  st.discovery = spawn_discovery(self->system(), ctx, st.setup.options,
                                 caf::actor_cast<discovery_listener_actor>(self));
  self->monitor(st.discovery);
}

void start_engine(daemon_self self, size_t engine);

// Discovery's word on one engine: wait, keep the pipelines (same subscriptions), or replace them.
void on_discovery(daemon_self self, const discovery_update& u) {
  auto& st = self->state;
  const auto rid = st.setup.replica_ids.count(u.engine) ? st.setup.replica_ids[u.engine] : u.url;
  if (!u.target) {
    st.waiting[u.engine] = rid + ": " + u.waiting;
    return;
  }
  auto& current = st.targets[u.engine];
  const bool running = std::any_of(st.pipelines.begin(), st.pipelines.end(),
                                   [&](const daemon_pipeline& p) { return p.engine == u.engine; });
  if (running && current && current->same_pipelines(*u.target)) {
    current = u.target;
    set_origins(st, u.engine, *u.target);
    return;
  }
  // Replaced, not patched: the old streams are gone, and a fresh data path starts with
  // ALL_CLEARED and a catch-up from the new replay endpoint (stale hints go with the old one).
  engine_pipelines old;
  auto keep = std::stable_partition(st.pipelines.begin(), st.pipelines.end(),
                                    [&](const daemon_pipeline& p) { return p.engine != u.engine; });
  std::move(keep, st.pipelines.end(), std::back_inserter(old.pipelines));
  st.pipelines.erase(keep, st.pipelines.end());
  if (auto r = st.replicas.find(u.engine); r != st.replicas.end()) {
    old.replica = r->second;
    st.replicas.erase(r);
  }
  auto& r = st.retiring_engines[u.engine];
  r.next = u.target;
  r.url = u.url;
  current = nullptr;  // nothing runs for the engine until the new pipelines start
  const auto retire = [&](const caf::actor& a) {
    if (!a) return;
    r.left.insert(a.address());
    self->monitor(a);
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  };
  for (auto& p : old.pipelines) retire(caf::actor_cast<caf::actor>(p.hdl));
  retire(old.replica);
  if (r.left.empty()) return start_engine(self, u.engine);
  st.waiting[u.engine] = rid + ": the engine moved to new endpoints; its old pipelines are stopping";
}

// Starts an engine's pipelines on the target it is retiring towards, once nothing old is left.
void start_engine(daemon_self self, size_t engine) {
  auto& st = self->state;
  auto it = st.retiring_engines.find(engine);
  if (it == st.retiring_engines.end() || !it->second.left.empty()) return;
  const auto target = it->second.next;
  const auto url = it->second.url;
  st.retiring_engines.erase(it);
  const auto rid = st.setup.replica_ids.count(engine) ? st.setup.replica_ids[engine] : url;
  auto& current = st.targets[engine];
  auto spawned = st.setup.spawn(engine, *target, st.discovery);
  if (!spawned) {
    log::error("cannot start the discovered engine's pipelines",
               {{"replica", rid}, {"engine_url", url}, {"err", spawned.error().context}});
    st.waiting[engine] = rid + ": " + spawned.error().context;
    current = nullptr;
    return;
  }
  st.waiting.erase(engine);
  current = target;
  auto& fresh = spawned.value();
  if (fresh.replica) st.replicas[engine] = fresh.replica;
  const auto at = std::find_if(st.pipelines.begin(), st.pipelines.end(),
                               [&](const daemon_pipeline& p) { return p.engine > engine; });
  const auto first = st.pipelines.insert(at, fresh.pipelines.begin(), fresh.pipelines.end());
  set_origins(st, engine, *target);
  for (auto it = first; it != first + static_cast<std::ptrdiff_t>(fresh.pipelines.size()); ++it)
    for (const auto& a : st.adapters)
      if (a.replica.empty() || a.replica == it->facts.replica_id)
        self->request(it->hdl, pipeline_ready_timeout, atom::adapter_v, a.id, a.name)
            .then([](bool) {}, [](caf::error&) {});
}

using status_promise = caf::typed_response_promise<std::vector<pipeline_view>, actor_status>;

// Every pipeline's tree and discovery's, asked at once; answered when the last one is in.
void status_of(daemon_self self, status_promise rp) {
  auto& st = self->state;
  const auto& ps = st.pipelines;
  auto views = std::make_shared<std::vector<pipeline_view>>();
  for (const auto& p : ps) views->push_back(p.facts);
  // Engines discovery has no answer for yet: a view without a pipeline behind it.
  std::vector<pipeline_view> waiting;
  for (const auto& [engine, why] : st.waiting) {
    pipeline_view v;
    v.replica_id = st.setup.replica_ids[engine];
    v.name = v.replica_id;
    v.waiting = why;
    v.status.kind = "engine";
    v.status.state = "waiting";
    waiting.push_back(std::move(v));
  }
  const bool with_discovery = !st.setup.options.engines.empty();
  const size_t disc = ps.size();  // discovery's slot, after the pipelines'
  auto g = gather<actor_status>::make(
      ps.size() + (with_discovery ? 1 : 0),
      [views, rp, waiting, with_discovery, disc](std::vector<actor_status>& items) mutable {
        for (size_t i = 0; i < disc; ++i) (*views)[i].status = std::move(items[i]);
        for (auto& w : waiting) views->push_back(std::move(w));
        actor_status d = with_discovery ? std::move(items[disc]) : actor_status{};
        deliver_answer(rp, std::move(*views), std::move(d));
      });
  for (size_t i = 0; i < ps.size(); ++i) {
    self->request(ps[i].hdl, pipeline_status_timeout, atom::status_v)
        .then(
            [g, i](actor_status& s) {
              g->fill(i, [&](actor_status& slot) { slot = std::move(s); });
            },
            [g, i, name = ps[i].facts.name](caf::error& err) {
              auto& s = g->slot(i);
              s.kind = "pipeline";
              s.state = "no answer: " + caf::to_string(err);
              s.add("pipeline", name);
              g->one();
            });
  }
  if (!with_discovery) return;
  auto& d = g->slot(disc);
  d.name = "discovery";
  d.kind = "discovery";
  if (!st.discovery) {
    d.state = "down (restarting)";  // the down handler's restart is pending
    return g->one();
  }
  self->request(st.discovery, pipeline_status_timeout, atom::status_v)
      .then(
          [g, disc](actor_status& s) {
            g->fill(disc, [&](actor_status& slot) {
              s.name = "discovery";
              slot = std::move(s);
            });
          },
          [g, disc](caf::error& err) {
            g->slot(disc).state = "no answer: " + caf::to_string(err);
            g->one();
          });
}

using ready_promise = caf::typed_response_promise<bool, std::vector<std::string>>;

// Ready when every pipeline is and no engine is still waited for; the reasons of all that are not.
ready_promise ready_of(daemon_self self) {
  auto& st = self->state;
  const auto& ps = st.pipelines;
  auto rp = self->make_response_promise<bool, std::vector<std::string>>();
  std::vector<std::string> waiting;
  for (const auto& [e, why] : st.waiting) waiting.push_back(why);
  if (ps.empty()) {
    if (waiting.empty()) waiting.push_back("no pipeline configured");
    deliver_answer(rp, false, std::move(waiting));
    return rp;
  }
  struct answer {
    bool ok = false;
    std::vector<std::string> reasons;
  };
  auto g = gather<answer>::make(
      ps.size(), [rp, waiting](std::vector<answer>& items) mutable {
        bool all = waiting.empty();
        std::vector<std::string> reasons = std::move(waiting);
        for (auto& a : items) {
          all = all && a.ok;
          for (auto& r : a.reasons) reasons.push_back(std::move(r));
        }
        deliver_answer(rp, all, std::move(reasons));
      });
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto name = ps[i].facts.name;
    self->request(ps[i].hdl, pipeline_ready_timeout, atom::ready_v)
        .then(
            [g, i, name](bool ok, std::vector<std::string>& why) {
              g->fill(i, [&](answer& a) {
                a.ok = ok;
                for (auto& r : why) a.reasons.push_back(name + ": " + r);
              });
            },
            [g, i, name](caf::error& err) {
              g->slot(i).reasons.push_back(name + ": no answer (" + caf::to_string(err) +
                                           ")");
              g->one();
            });
  }
  return rp;
}

// Tells every pipeline of `replica` (all: empty) about an adapter; answers once each applied it.
caf::result<bool> add_adapter(daemon_self self, const std::string& replica, int64_t id,
                              const std::string& name) {
  auto& st = self->state;
  std::vector<pipeline_actor> targets;
  if (!st.setup.options.engines.empty())
    st.adapters.push_back({replica, id, name});
  for (auto& p : st.pipelines)
    if (replica.empty() || p.facts.replica_id == replica) targets.push_back(p.hdl);
  if (targets.empty()) return false;
  // Answers after every matching decoder applied it (or did not answer in time: the
  // pipeline has kept the mapping for its next decoder either way).
  auto rp = self->make_response_promise<bool>();
  auto g = gather<bool>::make(targets.size(),
                              [rp](std::vector<bool>&) mutable { deliver_answer(rp, true); });
  for (auto& t : targets)
    self->request(t, pipeline_ready_timeout, atom::adapter_v, id, name)
        .then([g](bool) { g->one(); }, [g](caf::error&) { g->one(); });
  return rp;
}

// Every pipeline drains at once, within one budget; one report each.
caf::typed_response_promise<std::vector<drain_report>> drain_all(daemon_self self,
                                                                 caf::timespan budget) {
  auto& st = self->state;
  const auto& ps = st.pipelines;
  auto rp = self->make_response_promise<std::vector<drain_report>>();
  if (ps.empty()) {
    deliver_answer(rp, std::vector<drain_report>{});
    return rp;
  }
  auto g = gather<drain_report>::make(
      ps.size(),
      [rp](std::vector<drain_report>& items) mutable { deliver_answer(rp, std::move(items)); });
  // Every pipeline at once, so they drain in parallel within one budget.
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto name = ps[i].facts.name;
    self->request(ps[i].hdl, budget + drain_report_slack, atom::drain_v, budget)
        .then(
            [g, i](drain_report& r) {
              g->fill(i, [&](drain_report& slot) { slot = std::move(r); });
            },
            [g, i, name](caf::error& err) {
              auto& r = g->slot(i);
              r.pipeline = name;
              r.timed_out = true;
              r.failed_step = "pipeline: " + caf::to_string(err);
              g->one();
            });
  }
  return rp;
}

daemon_actor::behavior_type daemon_fn(daemon_self self, std::vector<daemon_pipeline> ps,
                                      daemon_discovery setup) {
  auto& st = self->state;
  st.pipelines = std::move(ps);
  st.setup = std::move(setup);
  if (!st.setup.options.engines.empty()) {
    for (const auto& e : st.setup.options.engines)
      st.waiting[e.index] = st.setup.replica_ids[e.index] + ": waiting for engine " +
                            e.request.url + ": not answered yet";
    spawn_discovery_actor(self);
  }
  self->set_down_handler([=](caf::down_msg& m) {
    auto& s = self->state;
    for (auto& [engine, r] : s.retiring_engines)
      if (r.left.erase(m.source) != 0) {
        if (r.left.empty()) start_engine(self, engine);
        return;
      }
    if (m.source != s.discovery.address()) return;
    // Discovery restarts alone; its first answers match what runs, so nothing is respawned.
    log::error("engine discovery stopped; restarting it",
               {{"err", caf::to_string(m.reason)}});
    s.discovery = nullptr;
    self->delayed_send(self, std::chrono::seconds(1), atom::restart_v);
  });
  return {
      [=](const discovery_update_ptr& u) {
        tsan::handoff_consume();
        if (u) on_discovery(self, *u);
      },
      [=](atom::restart) {
        if (!self->state.discovery) spawn_discovery_actor(self);
      },
      [=](atom::pipelines) {
        std::vector<std::string> names;
        for (const auto& p : self->state.pipelines) names.push_back(p.facts.name);
        tsan::handoff_publish();
        return names;
      },
      [=](atom::status) -> caf::result<std::vector<pipeline_view>, actor_status> {
        auto rp = self->make_response_promise<std::vector<pipeline_view>, actor_status>();
        status_of(self, rp);
        return rp;
      },
      [=](atom::ready) -> caf::result<bool, std::vector<std::string>> { return ready_of(self); },
      [=](atom::crash, const std::string& pipeline, actor_kind who) -> caf::result<bool> {
        for (auto& p : self->state.pipelines)
          if (p.facts.name == pipeline) return self->delegate(p.hdl, atom::crash_v, who);
        return false;
      },
      [=](atom::adapter, const std::string& replica, int64_t id,
          const std::string& name) -> caf::result<bool> {
        return add_adapter(self, replica, id, name);
      },
      [=](atom::drain, caf::timespan budget) -> caf::result<std::vector<drain_report>> {
        return drain_all(self, budget);
      },
  };
}

}  // namespace

daemon_actor spawn_daemon_actor(caf::actor_system& sys, std::vector<daemon_pipeline> pipelines,
                                daemon_discovery discovery) {
  return sys.spawn(daemon_fn, std::move(pipelines), std::move(discovery));
}

// -- daemon_client: blocking calls from threads outside CAF -----------------------------------

std::optional<daemon_view> daemon_client::status(ms timeout) const {
  caf::scoped_actor self{sys_};
  std::optional<daemon_view> out;
  self->request(root_, timeout, atom::status_v)
      .receive(
          [&](std::vector<pipeline_view>& v, actor_status& discovery) {
            tsan::handoff_consume();
            out = daemon_view{std::move(v), std::move(discovery)};
          },
          [](caf::error&) {});
  return out;
}

std::pair<bool, std::vector<std::string>> daemon_client::ready(ms timeout) const {
  caf::scoped_actor self{sys_};
  std::pair<bool, std::vector<std::string>> out{false, {}};
  self->request(root_, timeout, atom::ready_v)
      .receive(
          [&](bool ok, std::vector<std::string>& why) {
            tsan::handoff_consume();
            out = {ok, std::move(why)};
          },
               [&](caf::error& err) { out.second.push_back("no answer: " + caf::to_string(err)); });
  return out;
}

bool daemon_client::crash(const std::string& pipeline, actor_kind who) const {
  caf::scoped_actor self{sys_};
  bool ok = false;
  self->request(root_, ms(2000), atom::crash_v, pipeline, who)
      .receive([&](bool r) { ok = r; }, [](caf::error&) {});
  return ok;
}

bool daemon_client::add_adapter(const std::string& replica_id, int64_t id,
                                const std::string& name) const {
  caf::scoped_actor self{sys_};
  bool ok = false;
  self->request(root_, ms(2000), atom::adapter_v, replica_id, id, name)
      .receive([&](bool r) { ok = r; }, [](caf::error&) {});
  return ok;
}

std::vector<std::string> daemon_client::pipeline_names(ms timeout) const {
  caf::scoped_actor self{sys_};
  std::vector<std::string> out;
  self->request(root_, timeout, atom::pipelines_v)
      .receive(
          [&](std::vector<std::string>& v) {
            tsan::handoff_consume();
            out = std::move(v);
          },
          [](caf::error&) {});
  return out;
}

std::vector<drain_report> daemon_client::drain(ms budget) const {
  caf::scoped_actor self{sys_};
  std::vector<drain_report> out;
  const caf::timespan b = budget;
  self->request(root_, budget + 2 * drain_report_slack, atom::drain_v, b)
      .receive(
          [&](std::vector<drain_report>& r) {
            tsan::handoff_consume();
            out = std::move(r);
          },
          [](caf::error&) {});
  return out;
}

}  // namespace kvrelay
