// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The pipeline supervisor's shell (rules: supervision/supervision_protocol.hpp for restarts,
// supervision/pipeline_health.hpp for health and readiness, durable/durable_state.hpp for the
// durable index). It executes the protocol's actions, feeds the health facts, answers status and
// runs the shutdown drain, all on the one state; each part is short.
#include "supervision/pipeline_supervisor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <utility>

#include "actors/emitter/policy_client.hpp"
#include "base/log.hpp"
#include "base/tsan.hpp"
#include "base/metrics_registry.hpp"
#include "messages/fan_out.hpp"
#include "durable/durable_state.hpp"
#include "supervision/pipeline_health.hpp"
#include "supervision/supervision_protocol.hpp"

namespace kvrelay {

namespace {

using clock = std::chrono::steady_clock;
using action = supervision_protocol::action;

struct child_ref {
  actor_kind kind;
  uint64_t incarnation;
};

struct pipeline_state {
  static inline constexpr const char* name = "pipeline";

  pipeline_context ctx;
  pipeline_options opts;
  pipeline_children make;
  std::optional<supervision_protocol> policy;
  // Health: facts told by the children (health_fact), owned here and nowhere else (PH1-PH6).
  pipeline_health health;

  emitter_actor emitter;
  scraper_actor scraper;
  debouncer_actor debouncer;
  decoder_actor decoder;
  ingress_actor ingress;
  // Every monitored child not yet DOWN: which kind and incarnation it is (SV2 needs both).
  std::map<caf::actor_addr, child_ref> monitored;
  caf::error exit_reason;

  // The durable index (state.dir): null without one. Its snapshot timer's generation is its
  // own (DS9); the shutdown's last write carries one here; `datapath_inc` tags a snapshot
  // request with the data path it went to.
  std::unique_ptr<durable_state> durable;
  // The replay ring's span as the ingress learns it (the snapshot interval, RD8).
  std::shared_ptr<ingress::ring_gauge> ring;
  uint64_t final_gen = 0;
  uint64_t datapath_inc = 0;
  std::function<void()> final_done;  // the shutdown's drain waits for its last write

  // Resolved once at spawn.
  counter_series* restarts[3] = {nullptr, nullptr, nullptr};
  gauge_series* unhealthy_gauge = nullptr;
  gauge_series* incomplete_gauge = nullptr;

  // Children die with their supervisor, whatever ended it (an orderly teardown has stopped them
  // already). In the destructor, not an attach_functor: attachables run after the state is gone.
  ~pipeline_state() {
    for (const auto& h : {caf::actor_cast<caf::actor>(ingress), caf::actor_cast<caf::actor>(decoder),
                          caf::actor_cast<caf::actor>(debouncer), caf::actor_cast<caf::actor>(scraper),
                          caf::actor_cast<caf::actor>(emitter)})
      if (h) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  }
};

using pipeline_self = pipeline_actor::stateful_pointer<pipeline_state>;

std::string reason_text(const caf::error& e) {
  return e ? caf::to_string(e) : std::string("normal");
}

caf::actor handle_of(const pipeline_state& st, actor_kind k) {
  switch (k) {
    case actor_kind::ingress: return caf::actor_cast<caf::actor>(st.ingress);
    case actor_kind::decoder: return caf::actor_cast<caf::actor>(st.decoder);
    case actor_kind::debouncer: return caf::actor_cast<caf::actor>(st.debouncer);
    case actor_kind::emitter: return caf::actor_cast<caf::actor>(st.emitter);
    case actor_kind::scraper: return caf::actor_cast<caf::actor>(st.scraper);
    case actor_kind::shard: break;
  }
  return {};
}

void forget(pipeline_state& st, actor_kind k) {
  switch (k) {
    case actor_kind::ingress: st.ingress = nullptr; break;
    case actor_kind::decoder: st.decoder = nullptr; break;
    case actor_kind::debouncer: st.debouncer = nullptr; break;
    case actor_kind::emitter: st.emitter = nullptr; break;
    case actor_kind::scraper: st.scraper = nullptr; break;
    case actor_kind::shard: break;
  }
}

template <class Handle>
void watch(pipeline_self self, const Handle& hdl, actor_kind k, uint64_t incarnation) {
  self->monitor(hdl);
  self->state.monitored[hdl.address()] = child_ref{k, incarnation};
}

void run(pipeline_self self, supervision_protocol::actions acts);

// The data path's three actors with `o` (the supervisor's options, or a copy that restores).
bool spawn_datapath(pipeline_self self, uint64_t inc, const pipeline_options& o) {
  auto& st = self->state;
  auto h = st.make.datapath(self->system(), st.ctx, o, st.emitter);
  if (!h.ingress || !h.decoder || !h.debouncer) {
    for (auto a : {caf::actor_cast<caf::actor>(h.ingress), caf::actor_cast<caf::actor>(h.decoder),
                   caf::actor_cast<caf::actor>(h.debouncer)})
      if (a) self->send_exit(a, caf::exit_reason::user_shutdown);
    return false;
  }
  st.ingress = h.ingress;
  st.decoder = h.decoder;
  st.debouncer = h.debouncer;
  st.datapath_inc = inc;
  watch(self, st.ingress, actor_kind::ingress, inc);
  watch(self, st.decoder, actor_kind::decoder, inc);
  watch(self, st.debouncer, actor_kind::debouncer, inc);
  return true;
}

// Spawns a unit (SV1); a factory that returns no actor is a failed spawn (SV10).
void spawn_unit(pipeline_self self, pipeline_unit u, uint64_t inc) {
  auto& st = self->state;
  auto& sys = self->system();
  std::string err;
  switch (u) {
    case pipeline_unit::emitter:
      st.emitter = st.make.emitter(sys, st.ctx, st.opts, err);
      if (!st.emitter) break;
      watch(self, st.emitter, actor_kind::emitter, inc);
      // Units in flight to the old emitter are treated as lost by the debouncer (it resyncs).
      if (st.debouncer) self->send(st.debouncer, atom::update_v, st.emitter);
      if (st.scraper) self->send(st.scraper, atom::update_v, st.emitter);
      return;
    case pipeline_unit::datapath: {
      if (st.durable) {
        // DS1: the restore step first (on the store's thread); the plan spawns the data path.
        const uint64_t gen = st.durable->begin_restore(inc);
        const auto me = caf::actor_cast<pipeline_actor>(self);
        st.durable->store().restore(
            gen, [me](restore_plan_ptr p) {
              tsan::handoff_publish();  // built on the store's thread (base/tsan.hpp)
              caf::anon_send(me, atom::restore_v, std::move(p));
            });
        return;
      }
      if (spawn_datapath(self, inc, st.opts)) return;
      err = "the data path could not be spawned";
      break;
    }
    case pipeline_unit::scraper:
      st.scraper = st.make.scraper(sys, st.ctx, st.opts, st.emitter);
      if (!st.scraper) {
        err = "the scraper could not be spawned";
        break;
      }
      watch(self, st.scraper, actor_kind::scraper, inc);
      return;
  }
  run(self, st.policy->spawn_failed(u, inc, err, clock::now()));
}

// The exit goes to the child's urgent queue: a child with a long mailbox (a decoder behind a
// burst, after a drain that timed out) stops now instead of after its backlog, which nobody
// will use. CAF treats an exit_msg as one by its content, whatever its priority.
void stop_child(pipeline_self self, actor_kind k, uint64_t inc, caf::exit_reason why) {
  auto& st = self->state;
  auto hdl = handle_of(st, k);
  if (!hdl) return;
  auto it = st.monitored.find(hdl.address());
  if (it == st.monitored.end() || it->second.incarnation != inc) return;
  caf::anon_send<caf::message_priority::high>(hdl, caf::exit_msg{self->address(), why});
}

void quit(pipeline_self self) {
  auto& st = self->state;
  for (auto k : {actor_kind::ingress, actor_kind::decoder, actor_kind::debouncer,
                 actor_kind::scraper, actor_kind::emitter})
    forget(st, k);
  self->quit(st.exit_reason);
}

// Executes the protocol's actions, in order.
void run(pipeline_self self, supervision_protocol::actions acts) {
  auto& st = self->state;
  for (auto& a : acts) {
    switch (a.what) {
      case action::type::spawn: spawn_unit(self, a.unit, a.number); break;
      case action::type::stop:
        stop_child(self, a.child, a.number, caf::exit_reason::user_shutdown);
        break;
      case action::type::kill: stop_child(self, a.child, a.number, caf::exit_reason::kill); break;
      case action::type::schedule_restart:
        if (auto* c = st.restarts[static_cast<size_t>(a.unit)]) c->inc();
        self->delayed_send(self, a.delay, atom::restart_v, a.unit, a.number);
        break;
      case action::type::schedule_stable:
        self->delayed_send(self, a.delay, atom::stable_v, a.unit, a.number);
        break;
      case action::type::schedule_deadline:
        self->delayed_send(self, a.delay, atom::teardown_v);
        break;
      case action::type::mark_unhealthy: st.unhealthy_gauge->set(1); break;
      case action::type::mark_healthy: st.unhealthy_gauge->set(0); break;
      case action::type::log: log::write(a.level, a.message, a.fields); break;
      case action::type::quit: quit(self); return;
    }
  }
}

void on_down(pipeline_self self, const caf::down_msg& m) {
  auto& st = self->state;
  auto it = st.monitored.find(m.source);
  if (it == st.monitored.end()) return;
  const auto ref = it->second;
  st.monitored.erase(it);
  const auto current = handle_of(st, ref.kind);
  if (current && current.address() == m.source) forget(st, ref.kind);
  run(self, st.policy->child_down(ref.kind, ref.incarnation, reason_text(m.reason), clock::now()));
}

std::vector<std::pair<std::string, actor_status::value>> supervision_of(
    const supervision_protocol::unit_record& r) {
  const int64_t uptime =
      std::chrono::duration_cast<std::chrono::seconds>(clock::now() - r.started).count();
  // `exit_reason`, not `last_error`: the child's own status has a last_error (its last RPC or
  // decode error) and would overwrite this one in /debug/tree.
  return {{"restarts", int64_t{r.restarts}}, {"exit_reason", r.last_error}, {"uptime_s", uptime}};
}

// The memory budget is spent and the ingress paused (every pipeline shares it): what the engine
// sends meanwhile is dropped at the socket, so the index lags until replay repairs it. /readyz
// says so (not ready); /readyz/self, the pod's probe, stays ready (fail open).
pipeline_health::context health_context(const pipeline_state& st) {
  pipeline_health::context c;
  c.unhealthy = st.policy->unhealthy();
  c.overloaded = st.ctx.budget && st.ctx.budget->paused_readers() > 0;
  if (st.durable) c.durable_line = st.durable->readyz_line();
  return c;
}

bool ready(const pipeline_state& st) { return st.health.ready(health_context(st)); }

std::vector<std::string> not_ready_reasons(const pipeline_state& st) {
  return st.health.not_ready_reasons(health_context(st));
}

void on_health(pipeline_state& st, health_fact f) {
  if (!st.health.on_fact(f)) return;  // PH6
  if (st.incomplete_gauge) st.incomplete_gauge->set(st.health.incomplete() ? 1 : 0);
  if (!st.health.incomplete())
    log::info("index complete again: it matches the engine's cache",
              {{"pipeline", st.ctx.name}, {"because", to_string(f)}});
}

// An engine with a URL may have moved when its stream stops (its SUB lost the engine, or the
// engine shows activity while no event arrives): discovery reads its sources again.
void tell_discovery(pipeline_self self, health_fact f) {
  const auto& o = self->state.opts;
  if (!o.discovery) return;
  if (f == health_fact::engine_disconnected)
    self->send(o.discovery, atom::stream_v, o.engine_index, o.dp_rank, false,
               std::string("disconnected"));
  else if (f == health_fact::events_silent)
    self->send(o.discovery, atom::stream_v, o.engine_index, o.dp_rank, false,
               std::string("no KV events while the engine's /metrics show activity"));
  else if (f == health_fact::engine_connected || f == health_fact::events_flowing)
    self->send(o.discovery, atom::stream_v, o.engine_index, o.dp_rank, true, std::string());
}

void status_of(pipeline_self self, caf::typed_response_promise<actor_status> p) {
  auto& s = self->state;
  actor_status j("pipeline", self->mailbox().size());
  j.add("pipeline", s.ctx.name);
  j.add("replica_id", s.ctx.identity.replica_id);
  j.add("ready", ready(s));
  j.add("not_ready", not_ready_reasons(s));
  j.add("unhealthy", s.policy->unhealthy());
  j.add("engine_connected", s.health.engine_connected());
  j.add("server_ok", s.health.server_ok());
  j.add("index_incomplete", s.health.index_incomplete());
  j.add("engine_asleep", s.health.engine_asleep());
  if (s.durable) s.durable->add_status(j);
  actor_status::string_map adapters;
  for (const auto& [id, name] : s.opts.decoder.router.adapters)
    adapters.emplace_back(std::to_string(id), name);
  j.add("adapters", std::move(adapters));
  const auto extra = [&](pipeline_unit u) { return supervision_of(s.policy->record(u)); };
  std::vector<status_child> kids{
      {"ingress", s.ingress, extra(pipeline_unit::datapath)},
      {"decoder", s.decoder, extra(pipeline_unit::datapath)},
      {"debouncer", s.debouncer, extra(pipeline_unit::datapath)},
      {"emitter", s.emitter, extra(pipeline_unit::emitter)},
  };
  if (s.opts.scraper) kids.push_back({"scraper", s.scraper, extra(pipeline_unit::scraper)});
  fan_out_status(self, std::move(j), std::move(kids), std::move(p));
}

// What the drain leaves behind, asked of the data path itself: the debouncer's pending updates
// and units in flight, the shards' resident blocks (the decoder's status children). A child that
// does not answer in `timeout` leaves its numbers unknown (-1).
void report_leftovers(pipeline_self self, std::shared_ptr<drain_report> report,
                      caf::typed_response_promise<drain_report> promise,
                      std::chrono::milliseconds timeout) {
  enum : size_t { debouncer_slot, decoder_slot };
  auto g = gather<actor_status>::make(
      2, [report, promise](std::vector<actor_status>& answers) mutable {
        const auto& deb = answers[debouncer_slot];
        report->pending = deb.integer("pending", -1);
        report->in_flight = deb.integer("units_in_flight", -1);
        const auto& dec = answers[decoder_slot];
        if (!dec.kind.empty()) {  // it answered
          int64_t resident = 0;
          for (const auto& shard : dec.children)
            resident += std::max<int64_t>(0, shard.integer("resident_blocks", 0));
          report->resident = resident;
        }
        deliver_answer(promise, *report);
      });
  auto ask = [&](const auto& who, size_t slot) {
    if (!who) return g->one();
    self->request(who, timeout, atom::status_v)
        .then(
            [g, slot](actor_status& s) {
              g->fill(slot, [&](actor_status& into) { into = std::move(s); });
            },
            [g](caf::error&) { g->one(); });
  };
  ask(self->state.debouncer, debouncer_slot);
  ask(self->state.decoder, decoder_slot);
}

// -- the durable index (rules DS1-DS9 in durable/durable_state.hpp) --------------------------

void arm_snapshot(pipeline_self self) {
  const auto t = self->state.durable->arm_timer();
  self->delayed_send(self, t.delay, atom::snapshot_v, t.generation);
}

// Asks the decoder for a cut (its mailbox order makes it consistent with the shard's), judges it
// (DS3, DS4) and hands it to the writer. `done` runs when nothing is left to wait for: at once
// when nothing is written, else (final only) when the write reports.
void take_snapshot(pipeline_self self, bool final, caf::timespan timeout,
                   std::function<void()> done) {
  auto& st = self->state;
  const uint64_t inc = st.datapath_inc;
  const auto finished = [done]() {
    if (done) done();
  };
  if (!st.decoder || !st.durable || !st.durable->may_cut()) return finished();
  st.durable->cut_requested();
  self->request(st.decoder, timeout, atom::snapshot_v)
      .then(
          [=](snapshot_ptr snap) mutable {
            tsan::handoff_consume();  // built by the decoder and the shard (base/tsan.hpp)
            auto& st = self->state;
            if (!snap || !st.durable || st.datapath_inc != inc) return finished();
            const auto mode = st.durable->submit(*snap, final);
            if (!mode) return finished();
            if (final) st.final_done = done;
            const auto me = caf::actor_cast<pipeline_actor>(self);
            st.durable->store().write(
                std::move(snap), st.durable->incarnation_evidence(), *mode, final,
                st.durable->writer(),
                [me](write_report r) { caf::anon_send(me, atom::saved_v, std::move(r)); });
          },
          [=](caf::error&) mutable { finished(); });
}

// DS1: the restore step's plan: the data path starts from the snapshot it names, or cold.
void on_restore_plan(pipeline_self self, const restore_plan& plan) {
  auto& st = self->state;
  if (!st.durable) return;
  const uint64_t inc = st.durable->pending_incarnation();
  bool current = false;
  auto snap = st.durable->on_plan(plan, current);
  if (!current || st.policy->tearing_down()) return;
  pipeline_options o = st.opts;
  if (snap) {
    // Runtime-added adapter names come back with it and stay for later data paths.
    for (const auto& [id, name] : snap->adapters) st.opts.decoder.router.adapters.emplace(id, name);
    o.decoder.router.adapters = st.opts.decoder.router.adapters;
    o.decoder.restore = snap;
  }
  // The delta log (LR5-LR7): the records to replay first, the ring from where they end, and
  // the writer that goes on from there (DS6).
  const auto me = caf::actor_cast<pipeline_actor>(self);
  o.ingress.source.delta_log = st.durable->start_writer(
      plan, [me] { caf::anon_send(me, atom::snapshot_v, uint64_t{0}); });
  o.ingress.source.replay_log = plan.log;
  o.ingress.source.ring = st.ring;
  const auto start = durable_state::start_of(plan);  // DS8
  o.ingress.source.tracker.resume = start.resume;
  if (start.history) on_health(st, *start.history);
  tsan::handoff_publish();  // the snapshot goes on to the decoder's and shard's threads
  if (!spawn_datapath(self, inc, o)) {
    run(self, st.policy->spawn_failed(pipeline_unit::datapath, inc,
                                      "the data path could not be spawned", clock::now()));
    return;
  }
  arm_snapshot(self);
}

void on_saved(pipeline_self self, const write_report& r) {
  auto& st = self->state;
  if (!st.durable) return;
  st.durable->on_report(r);
  if (r.final && st.final_done) std::exchange(st.final_done, nullptr)();
}

// The shutdown drain (the first half of stopping): stop reading, let the decoder and shards
// finish what was read, then the debouncer's final flush, all within `budget`; the report then
// says what was not delivered. With a state dir the last snapshot is written meanwhile.
void drain(pipeline_self self, caf::timespan budget,
           caf::typed_response_promise<drain_report> promise) {
  auto& st = self->state;
  run(self, st.policy->drain_begun());
  // The steps end early enough for the report to fit in the budget as well.
  const auto reserve = std::min<caf::timespan>(budget / 2, std::chrono::milliseconds(300));
  const auto deadline = clock::now() + (budget - reserve);
  auto report = std::make_shared<drain_report>();
  report->pipeline = st.ctx.name;
  report->final_clear = st.opts.final_clear;
  report->server_acknowledged = st.health.server_ever_ok();
  const auto left = [deadline] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                    std::chrono::milliseconds(1));
  };
  auto finish = [=](bool complete, const char* failed_step, bool timed_out = false) mutable {
    report->complete = complete;
    report->failed_step = failed_step;
    report->timed_out = timed_out;
    report_leftovers(self, report, promise,
                     std::chrono::duration_cast<std::chrono::milliseconds>(reserve * 3 / 4));
  };
  // The decoder's drain answers after its shards': everything read so far has become ops in the
  // debouncer's mailbox by then. Then the debouncer flushes and waits for acks.
  const auto late = [](const caf::error& e) { return e == caf::sec::request_timeout; };
  auto flush = [=]() mutable {
    // The drain ends when the debouncer's flush and the last snapshot (if any) both have.
    // Slot 0 is the debouncer's outcome; slot 1, when there is one, only the snapshot's end.
    using step_outcome = std::tuple<bool, const char*, bool>;
    auto g = gather<step_outcome>::make(self->state.durable ? 2 : 1,
                                        [=](std::vector<step_outcome>& o) mutable {
                                          const auto [ok, step, timed_out] = o[0];
                                          finish(ok, step, timed_out);
                                        });
    g->slot(0) = step_outcome{false, "debouncer", false};
    if (self->state.durable) {
      self->delayed_send(self, left(), atom::saved_v, ++self->state.final_gen);
      take_snapshot(self, true, left(), [g] { g->one(); });
    }
    auto debouncer = self->state.debouncer;
    if (!debouncer) return g->one();
    self->request(debouncer, left(), atom::drain_v)
        .then(
            [=](bool ok) mutable {
              g->fill(0, [&](step_outcome& o) { o = step_outcome{ok, ok ? "" : "debouncer", false}; });
            },
            [=](caf::error& e) mutable {
              g->slot(0) = step_outcome{false, "debouncer", late(e)};
              g->one();
            });
  };
  auto decode = [=]() mutable {
    auto decoder = self->state.decoder;
    if (!decoder) return finish(false, "decoder");
    self->request(decoder, left(), atom::drain_v)
        .then([=](bool) mutable { flush(); },
              [=](caf::error& e) mutable { finish(false, "decoder", late(e)); });
  };
  if (!st.ingress) return decode();
  // Stop reading first. The ingress still reads what the engine already sent and answers the
  // drain only once its source stopped: every batch it read is then in the decoder's mailbox,
  // ahead of our drain request to the decoder.
  self->request(st.ingress, left(), atom::drain_v)
      .then([=](bool) mutable { decode(); }, [=](caf::error&) mutable { decode(); });
}

pipeline_actor::behavior_type pipeline_fn(pipeline_self self, pipeline_context ctx,
                                          pipeline_options opts, pipeline_children make) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.ctx.health = caf::actor_cast<health_listener_actor>(self);
  st.opts = std::move(opts);
  st.make = std::move(make);
  supervision_protocol::options po;
  po.backoff_min = st.opts.backoff_min;
  po.backoff_max = st.opts.backoff_max;
  po.unhealthy_backoff = st.opts.unhealthy_backoff;
  po.max_restarts = st.opts.max_restarts;
  po.restart_window = st.opts.restart_window;
  po.teardown_deadline = st.opts.teardown_deadline;
  po.has_scraper = st.opts.scraper.has_value() && st.make.scraper;
  po.pipeline = st.ctx.name;
  st.policy.emplace(std::move(po));
  for (auto u : {pipeline_unit::datapath, pipeline_unit::emitter, pipeline_unit::scraper}) {
    if (u == pipeline_unit::scraper && !st.opts.scraper) continue;
    st.restarts[static_cast<size_t>(u)] = &st.ctx.counter(
        "kvrelay_actor_restarts_total", "Supervised restarts by replica and unit",
        {{"unit", std::string(to_string(u))}});
  }
  st.unhealthy_gauge =
      &st.ctx.gauge("kvrelay_pipeline_unhealthy",
                    "1 while a unit of the pipeline is over its restart intensity limit");
  st.incomplete_gauge = &st.ctx.gauge(
      "kvrelay_index_incomplete",
      "1 while the index cannot know all the engine holds (history skipped at start or lost)");
  self->set_down_handler([=](caf::down_msg& m) { on_down(self, m); });
  self->set_exit_handler([=](caf::exit_msg& m) {
    auto& s = self->state;
    if (!s.policy->tearing_down()) s.exit_reason = m.reason;
    run(self, s.policy->teardown_requested());
    if (s.durable && s.durable->restore_pending()) {
      // The data path was never spawned: its members' DOWNs will not come.
      const uint64_t inc = s.durable->pending_incarnation();
      s.durable->abandon_restore();
      for (auto k : {actor_kind::ingress, actor_kind::decoder, actor_kind::debouncer})
        run(self, s.policy->child_down(k, inc, "not started (restore step pending)", clock::now()));
    }
  });
  if (st.opts.state) {
    st.ring = std::make_shared<ingress::ring_gauge>();
    st.durable = std::make_unique<durable_state>(st.ctx, *st.opts.state, st.ring);
  }
  run(self, st.policy->start(clock::now()));
  return {
      [=](atom::status) -> caf::result<actor_status> {
        auto p = self->make_response_promise<actor_status>();
        status_of(self, p);
        return p;
      },
      [=](health_fact f) {
        auto& s = self->state;
        if (f == health_fact::snapshot_outside_ring && s.durable) s.durable->on_outside_ring();
        if (f == health_fact::incarnation_reset && s.durable) {
          // DS7: the new process' evidence, into the log, now.
          const auto me = caf::actor_cast<pipeline_actor>(self);
          s.durable->store().establish(
              s.durable->on_reset(), s.durable->writer(),
              [me](write_report r) { caf::anon_send(me, atom::saved_v, std::move(r)); });
        }
        on_health(s, f);
        tell_discovery(self, f);
        // A sleeping engine discarded its cache: clear like AllBlocksCleared (decoder's epoch).
        // Through the ingress, so the delta log has it in stream order.
        if (f == health_fact::engine_asleep) {
          auto n = std::make_shared<const ingress_notice>(
              ingress_notice{ingress_notice::kind::engine_asleep});
          if (s.ingress)
            self->send(s.ingress, std::move(n));
          else if (s.decoder)
            self->send(s.decoder, std::move(n));
        }
      },
      [=](atom::ready) {
        auto& s = self->state;
        return caf::make_result(ready(s), not_ready_reasons(s));
      },
      [=](atom::restart, pipeline_unit u, uint64_t generation) {
        run(self, self->state.policy->restart_timer(u, generation, clock::now()));
      },
      [=](atom::stable, pipeline_unit u, uint64_t incarnation) {
        run(self, self->state.policy->stable_timer(u, incarnation));
      },
      [=](atom::teardown) { run(self, self->state.policy->teardown_deadline()); },
      [=](atom::crash, actor_kind who) -> caf::result<bool> {
        auto& s = self->state;
        if (who == actor_kind::shard) {
          if (!s.decoder) return false;
          return self->delegate(s.decoder, atom::crash_v, std::string(to_string(who)));
        }
        auto hdl = caf::actor_cast<supervised_actor>(handle_of(s, who));
        if (!hdl) return false;
        self->send(hdl, atom::crash_v);
        return true;
      },
      [=](atom::drain, caf::timespan budget) -> caf::result<drain_report> {
        auto p = self->make_response_promise<drain_report>();
        drain(self, budget, p);
        return p;
      },
      [=](atom::snapshot, uint64_t gen) {
        auto& s = self->state;
        if (!s.durable || s.policy->restarting_stopped()) return;
        if (gen == 0) {
          // RD9: the delta log outgrew the last snapshot (its writer's call): compact (DS9).
          if (s.durable->on_compaction_due())
            take_snapshot(self, false, std::chrono::seconds(10), nullptr);
          return;
        }
        const auto t = s.durable->on_tick(gen);  // DS2, DS9
        if (t == durable_state::tick::stale) return;
        if (t == durable_state::tick::cut_and_rearm)
          take_snapshot(self, false, std::chrono::seconds(10), nullptr);
        arm_snapshot(self);
      },
      [=](atom::restore, restore_plan_ptr plan) {
        tsan::handoff_consume();  // the store thread's plan (base/tsan.hpp)
        if (plan) on_restore_plan(self, *plan);
      },
      [=](atom::saved, write_report& r) { on_saved(self, r); },
      [=](atom::saved, uint64_t gen) {
        // The shutdown's last write is overdue: the drain goes on without it (the file keeps
        // the previous snapshot, or gets this one a little later).
        auto& s = self->state;
        if (gen == s.final_gen && s.final_done) std::exchange(s.final_done, nullptr)();
      },
      [=](atom::adapter, int64_t id, std::string& name) -> caf::result<bool> {
        auto& s = self->state;
        s.opts.decoder.router.adapters[id] = name;  // survives data-path restarts
        // A decoder spawned later reads it from the options; the running one answers.
        if (s.decoder) return self->delegate(s.decoder, atom::adapter_v, id, std::move(name));
        return true;
      },
  };
}

}  // namespace

pipeline_children real_children() {
  pipeline_children c;
  c.emitter = [](caf::actor_system& sys, const pipeline_context& ctx,
                 const pipeline_options& o, std::string& error) {
    return spawn_emitter(sys, ctx, o.emitter, error);
  };
  c.datapath = [](caf::actor_system& sys, const pipeline_context& ctx,
                  const pipeline_options& o, const emitter_actor& emitter) {
    // A credit line per incarnation: an old ingress detaching on its way out must never cut
    // the new one's credits.
    auto credits = std::make_shared<credit_line>();
    datapath_handles h;
    h.debouncer = spawn_debouncer(sys, ctx, o.debouncer, emitter);
    h.decoder = spawn_decoder(sys, ctx, o.decoder, h.debouncer,
                              [credits](size_t n) { credits->credit(static_cast<uint32_t>(n)); });
    h.ingress = spawn_ingress(sys, ctx, o.ingress, h.decoder, credits);
    return h;
  };
  c.scraper = [](caf::actor_system& sys, const pipeline_context& ctx,
                 const pipeline_options& o, const emitter_actor& emitter) {
    return spawn_scraper(sys, ctx, *o.scraper, emitter);
  };
  return c;
}

pipeline_actor spawn_pipeline(caf::actor_system& sys, const pipeline_context& ctx,
                              const pipeline_options& opts, std::string& error) {
  error = policy_client::validate(opts.emitter.client);
  if (!error.empty()) return {};
  return spawn_pipeline(sys, ctx, opts, real_children());
}

pipeline_actor spawn_pipeline(caf::actor_system& sys, const pipeline_context& ctx,
                              const pipeline_options& opts, pipeline_children children) {
  return sys.spawn(pipeline_fn, ctx, opts, std::move(children));
}

}  // namespace kvrelay
