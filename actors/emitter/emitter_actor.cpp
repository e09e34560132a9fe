// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter's shell: one link per target (port, inbox, unit_sequencer, answers), units routed to
// their target's link, stats fanned out to every link, DNS fan-out names resolved off the actor's
// thread and turned into links. Every decision about what goes on the wire to one target is that
// link's sequencer's; which targets there are is target_membership's (TM rules).
#include "actors/emitter/emitter_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "base/rate_limiter.hpp"
#include "base/tsan.hpp"
#include "base/worker_bridge.hpp"
#include "actors/emitter/target_membership.hpp"

namespace kvrelay {

namespace {

using emitter::call_kind;
using emitter::channel_state;
using emitter::emit_action;
using emitter::port_event;

constexpr int n_methods = 2;  // ReportCacheState, PublishEvent
constexpr int n_codes = 17;   // grpc::StatusCode 0-16; anything else counts as UNKNOWN (2)

// A port the emitter talks through, built but not started yet.
struct prepared_link {
  std::string name;
  std::shared_ptr<emitter::port_inbox> inbox;
  std::shared_ptr<emitter::policy_port> port;
};

// One target: its port, its protocol, its answers and its metric series.
struct link {
  link() = default;
  link(const link&) = delete;
  link& operator=(const link&) = delete;
  ~link() {
    // Completions of calls the port cancels now must not wake the actor for a link that is gone.
    if (inbox) inbox->bind({});
    port.reset();
  }

  std::string name;
  std::shared_ptr<emitter::port_inbox> inbox;
  std::shared_ptr<emitter::policy_port> port;  // the link is its last owner
  emitter::unit_sequencer seq;
  uint64_t next_ticket = 1;
  absl::flat_hash_map<uint64_t, caf::strong_actor_ptr> unit_reply;
  absl::flat_hash_map<uint64_t, uint64_t> stats_reply;  // link ticket → stats request

  // Series resolved once: per (method, code) on first use, the rest when the link is made.
  std::array<std::array<counter_series*, n_codes>, n_methods> rpc_total{};
  std::array<std::array<histogram_series*, n_codes>, n_methods> rpc_duration{};
  gauge_series* connected = nullptr;
};

// DNS fan-out names resolved on a worker thread (base/worker_bridge.hpp), one at a time; each
// answer goes to the emitter as (resolve, index, addresses, error). Joined at close (WB4): a
// resolve is bounded by its timeout. The owner is weak: the thread must not keep its actor alive.
using resolve_answer = std::pair<size_t, resolve_result>;
using resolver_bridge = worker_bridge<resolve_answer>;

std::unique_ptr<resolver_bridge> make_resolver(caf::weak_actor_ptr owner) {
  return std::make_unique<resolver_bridge>(
      worker_options{"kvr.resolve", worker_options::threads::serial,
                     worker_options::on_close::join, false},
      [owner = std::move(owner)](resolve_answer a) {
        if (auto hdl = caf::actor_cast<emitter_actor>(owner))
          caf::anon_send(hdl, atom::resolve_v, static_cast<uint64_t>(a.first),
                         std::move(a.second.addresses), std::move(a.second.error));
      });
}

// A stats request fanned out to every link: answered once all of them answered.
struct stats_request {
  caf::typed_response_promise<bool> promise;
  size_t waiting = 0;
  bool any_ok = false;
};

struct emitter_state {
  static inline constexpr const char* name = "emitter";

  ~emitter_state() {
    links.clear();
    resolver.reset();  // joins its thread
  }

  pipeline_context ctx;
  emitter_options opts;
  std::map<std::string, std::unique_ptr<link>> links;  // by name: sorted
  std::optional<emitter::target_membership> membership;  // TM1-TM7
  emitter::target_membership::actions membership_actions;
  std::unique_ptr<resolver_bridge> resolver;  // only with DNS fan-out names
  rate_limiter resolve_log{1, 30'000};
  counter_series* resolve_failures = nullptr;

  // Reused between messages: no allocation per completion batch in steady state.
  emitter::emit_actions actions;
  std::vector<port_event> events;

  uint64_t next_stats = 1;
  absl::flat_hash_map<uint64_t, stats_request> stats;
  reconnect_listener_actor listener;
  histogram_series* event_age = nullptr;
  std::shared_ptr<emitter::unit_encodings> encodings;  // every link's port shares it
};

using emitter_self = emitter_actor::stateful_pointer<emitter_state>;

int method_index(call_kind kind) { return emitter::method_of(kind)[0] == 'P' ? 1 : 0; }

void observe_rpc(emitter_state& st, link& l, call_kind kind, int code, int64_t latency_us) {
  const int m = method_index(kind);
  const int c = code >= 0 && code < n_codes ? code : 2;
  auto& total = l.rpc_total[m][c];
  if (!total) {
    const label_set labels{{"target", l.name},
                           {"method", emitter::method_of(kind)},
                           {"code", emitter::status_code_name(c)}};
    total = &st.ctx.counter("kvrelay_rpc_total",
                            "RPCs to the policy servers by target, method and gRPC code", labels);
    l.rpc_duration[m][c] = &st.ctx.histogram(
        "kvrelay_rpc_duration_seconds",
        "RPC duration (issue to completion) to the policy servers by target, method and gRPC code",
        metrics_registry::latency_buckets(), labels);
  }
  total->inc();
  const double seconds = static_cast<double>(latency_us) / 1e6;
  l.rpc_duration[m][c]->observe(seconds);
}

std::vector<std::string> target_names(const emitter_state& st) {
  std::vector<std::string> names;
  names.reserve(st.links.size());
  for (const auto& [name, l] : st.links) names.push_back(name);
  return names;
}

void tell_targets(emitter_self self) {
  auto& st = self->state;
  if (st.listener) self->send(st.listener, atom::targets_v, target_names(st));
}

// One link's answer to a fanned-out stats request.
void stats_answered(emitter_state& st, uint64_t request, bool ok) {
  auto it = st.stats.find(request);
  if (it == st.stats.end()) return;
  it->second.any_ok = it->second.any_ok || ok;
  if (--it->second.waiting > 0) return;
  it->second.promise.deliver(it->second.any_ok);
  st.stats.erase(it);
}

void run_membership(emitter_self self, const std::string& resolve_error = {});

// A link of a DNS name left READY: that name is resolved again soon (TM3).
void trigger_resolve(emitter_self self, const link& l) {
  auto& st = self->state;
  st.membership->on_link_lost(l.name, rate_limiter::steady_ms(), st.membership_actions);
  run_membership(self);
}

// Executes one link's actions of its sequencer, in order.
void execute(emitter_self self, link& l) {
  auto& st = self->state;
  for (auto& a : st.actions) {
    switch (a.what) {
      case emit_action::kind::start_clear:
        l.port->clear(a.call, a.unit->clear_ts_us);
        break;
      case emit_action::kind::start_stream:
        l.port->stream(a.call, std::move(a.unit), a.with_expirations);
        break;
      case emit_action::kind::start_evict:
        l.port->evict(a.call, a.unit->evicts[a.index]);
        break;
      case emit_action::kind::start_stats:
        break;  // issued by the stats handler, which holds the sample
      case emit_action::kind::answer_unit: {
        auto it = l.unit_reply.find(a.ticket);
        if (it == l.unit_reply.end()) break;
        auto to = caf::actor_cast<debouncer_actor>(std::move(it->second));
        l.unit_reply.erase(it);
        a.result.target = l.name;
        if (to) self->send(to, std::move(a.result));
        break;
      }
      case emit_action::kind::answer_stats: {
        auto it = l.stats_reply.find(a.ticket);
        if (it == l.stats_reply.end()) break;
        const uint64_t request = it->second;
        l.stats_reply.erase(it);
        stats_answered(st, request, a.ok);
        break;
      }
      case emit_action::kind::reconnected:  // counted by the listener (kvrelay_reconnects_total)
        log::info("policy server connection is back after it was lost; asking for a resync",
                  {{"replica", st.ctx.name}, {"target", l.name}});
        if (st.listener) self->send(st.listener, atom::reconnected_v, l.name);
        break;
      case emit_action::kind::log:
        log::write(a.log, {{"replica", st.ctx.name}, {"target", l.name}});
        break;
      case emit_action::kind::set_deadline: {
        l.port->set_deadline(a.deadline_ms);
        const auto configured = static_cast<int64_t>(st.opts.client.rpc_timeout.count());
        const log::fields f{{"replica", st.ctx.name},
                            {"target", l.name},
                            {"deadline_ms", a.deadline_ms},
                            {"configured_ms", configured}};
        if (a.deadline_ms > configured)
          log::warn("policy server slower than the RPC deadline; later calls wait longer", f);
        else
          log::info("policy server answers in time again; RPC deadline back to the configured one",
                    f);
        break;
      }
    }
  }
  st.actions.clear();
}

void on_events(emitter_self self, link& l) {
  auto& st = self->state;
  l.inbox->take(st.events);
  if (st.events.empty()) return;
  const int64_t now_ms = rate_limiter::steady_ms();
  bool lost = false;
  for (auto& e : st.events) {
    if (e.what == port_event::kind::channel) {
      const bool was_ready = l.seq.channel() == channel_state::ready;
      l.seq.on_channel(e.state, st.actions);
      const bool ready = l.seq.channel() == channel_state::ready;
      if (was_ready && !ready) lost = true;
      l.connected->set(ready ? 1.0 : 0.0);
      continue;
    }
    const auto info = l.seq.on_completed(e.call, e.code, e.message, e.accepted, now_ms,
                                         st.actions, e.latency_us);
    if (!info.known) continue;
    observe_rpc(st, l, info.kind, e.code, e.latency_us);
    if (e.code == 0 && info.adds_ts_us > 0) {
      const double age = static_cast<double>(st.ctx.wall_us() - info.adds_ts_us) / 1e6;
      if (age >= 0) st.event_age->observe(age);
    }
  }
  execute(self, l);
  if (lost) trigger_resolve(self, l);
}

// Makes a link of a prepared port: its sequencer, its series, its wake-up. Not started.
std::unique_ptr<link> make_link(emitter_self self, prepared_link p) {
  auto& st = self->state;
  auto l = std::make_unique<link>();
  l->name = std::move(p.name);
  l->inbox = std::move(p.inbox);
  l->port = std::move(p.port);
  emitter::sequencer_options so = st.opts.sequencer;
  so.deadline_ms = static_cast<int64_t>(st.opts.client.rpc_timeout.count());
  l->seq = emitter::unit_sequencer(so);
  l->connected = &st.ctx.gauge("kvrelay_target_connected",
                               "1 while the channel to the policy-server target is READY",
                               {{"target", l->name}});
  l->connected->set(0);
  // The wake-up holds a weak reference: the inbox must not keep its actor alive.
  caf::weak_actor_ptr weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  l->inbox->bind([weak] {
    if (auto hdl = caf::actor_cast<emitter_actor>(weak)) caf::anon_send(hdl, atom::completed_v);
  });
  return l;
}

emitter::port_config port_config_for(const pipeline_context& ctx, const emitter_options& opts,
                                     const std::string& target,
                                     std::shared_ptr<emitter::unit_encodings> encodings) {
  emitter::port_config cfg;
  cfg.client = opts.client;
  cfg.client.target = target;
  cfg.identity = ctx.identity;
  cfg.max_entries_per_message = opts.max_entries_per_message;
  cfg.evict_wake_batch = std::max<size_t>(1, opts.sequencer.max_evictions_in_flight / 4);
  cfg.encodings = std::move(encodings);
  return cfg;
}

// Builds a target's port; nullptr with `error` set when it cannot.
std::shared_ptr<emitter::policy_port> build_port(const pipeline_context& ctx,
                                                 const emitter_options& opts,
                                                 const std::string& target,
                                                 const std::shared_ptr<emitter::port_inbox>& inbox,
                                                 std::shared_ptr<emitter::unit_encodings> encodings,
                                                 std::string& error) {
  const auto cfg = port_config_for(ctx, opts, target, std::move(encodings));
  if (opts.make_port) return opts.make_port(cfg, inbox, error);
  return emitter::make_grpc_port(cfg, inbox, error);
}

// Drops a link: its port is destroyed (calls cancelled), its pending units are dropped, its
// share of pending stats requests answers false.
void drop_link(emitter_self self, const std::string& name) {
  auto& st = self->state;
  auto it = st.links.find(name);
  if (it == st.links.end()) return;
  auto l = std::move(it->second);
  st.links.erase(it);
  l->connected = nullptr;  // the series goes: a target that left is not "disconnected"
  st.ctx.metrics->remove("kvrelay_target_connected", st.ctx.labels({{"target", l->name}}));
  for (const auto& [ticket, request] : l->stats_reply) stats_answered(st, request, false);
  log::info("policy-server target dropped: its name no longer resolves to it",
            {{"replica", st.ctx.name},
             {"target", l->name},
             {"units_dropped", static_cast<uint64_t>(l->unit_reply.size())}});
}

// Makes, starts and keeps a link to an address a DNS name resolves to (TM6); false when its
// port cannot be built.
bool add_dns_link(emitter_self self, const std::string& name, const std::string& target) {
  auto& st = self->state;
  std::string err;
  auto inbox = std::make_shared<emitter::port_inbox>();
  auto port = build_port(st.ctx, st.opts, target, inbox, st.encodings, err);
  if (!port) {
    log::error("cannot make a link to a resolved policy-server address",
               {{"replica", st.ctx.name}, {"name", name}, {"target", target}, {"err", err}});
    return false;
  }
  st.links.emplace(target, make_link(self, {target, std::move(inbox), port}));
  port->start();  // on the actor's thread, after the link exists
  log::info("policy-server target added: the DNS name resolves to it",
            {{"replica", st.ctx.name}, {"name", name}, {"target", target}});
  return true;
}

// Executes the membership's actions, in order. `resolve_error` is the failed answer's error.
void run_membership(emitter_self self, const std::string& resolve_error) {
  auto& st = self->state;
  auto& m = *st.membership;
  // Executing an action adds none (only the handlers feed the membership), so the list is
  // taken whole and handed back empty, its capacity kept.
  auto acts = std::exchange(st.membership_actions, {});
  for (const auto& a : acts) {
    using k = emitter::target_membership::action::kind;
    switch (a.what) {
      case k::resolve:
        if (st.resolver)
          st.resolver->submit([resolve = st.opts.resolve, i = a.name_index,
                               spec = m.name(a.name_index)]() -> resolve_answer {
            try {
              return {i, resolve(spec)};
            } catch (const std::exception& e) {
              return {i, resolve_result{{}, e.what()}};
            }
          });
        break;
      case k::resolve_later:
        self->delayed_send(self, std::chrono::milliseconds(a.wait_ms), atom::resolve_v,
                           static_cast<uint64_t>(a.name_index + 1));
        break;
      case k::resolve_failed: {
        st.resolve_failures->inc();
        uint64_t suppressed = 0;
        if (st.resolve_log.allow(suppressed))
          log::warn("cannot resolve the policy-server DNS name; keeping its last good addresses",
                    {{"replica", st.ctx.name},
                     {"name", m.name(a.name_index)},
                     {"err", resolve_error.empty() ? std::string("no address") : resolve_error},
                     {"addresses", static_cast<uint64_t>(m.addresses(a.name_index).size())},
                     {"suppressed", suppressed}});
        break;
      }
      case k::add_target:
        if (!add_dns_link(self, m.name(a.name_index), a.target)) m.on_add_failed(a.target);
        break;
      case k::drop_target: drop_link(self, a.target); break;
      case k::targets_changed: tell_targets(self); break;
    }
  }
  acts.clear();
  st.membership_actions = std::move(acts);
}

void add_status(actor_status& j, const emitter_state& st) {
  uint64_t in_flight = 0, queued = 0, done = 0, failed = 0, unsent = 0, reconnects = 0,
           raised = 0;
  int64_t deadline = 0;
  bool holding_back = false;
  std::string last_error;
  for (const auto& [name, l] : st.links) {
    const auto& c = l->seq.counters();
    in_flight += l->port->in_flight();
    queued += l->seq.queued_units();
    done += c.units_ok;
    failed += c.units_failed;
    unsent += c.units_unsent;
    reconnects += c.reconnects;
    raised += c.deadline_raised;
    deadline = std::max(deadline, l->seq.deadline_ms());
    holding_back = holding_back || l->seq.holding_back();
    if (last_error.empty()) last_error = l->seq.last_error();
  }
  // Totals over every target first (one target: exactly its values), then each target.
  j.add("targets", st.links.size());
  j.add("channel", st.links.empty() ? std::string("none")
                                    : emitter::to_string(st.links.begin()->second->seq.channel()));
  j.add("in_flight", in_flight);
  j.add("queued_units", queued);
  j.add("holding_back", holding_back);
  j.add("units_done", done);
  j.add("units_failed", failed);
  j.add("units_unsent", unsent);
  j.add("reconnects", reconnects);
  j.add("deadline_ms", deadline);
  j.add("deadline_raised", raised);
  j.add("last_error", last_error);
  for (const auto& [name, l] : st.links) {
    const auto& c = l->seq.counters();
    actor_status::string_map m{
        {"channel", emitter::to_string(l->seq.channel())},
        {"in_flight", std::to_string(l->port->in_flight())},
        {"queued_units", std::to_string(l->seq.queued_units())},
        {"holding_back", l->seq.holding_back() ? "true" : "false"},
        {"units_done", std::to_string(c.units_ok)},
        {"units_failed", std::to_string(c.units_failed + c.units_unsent)},
        {"reconnects", std::to_string(c.reconnects)},
        {"deadline_ms", std::to_string(l->seq.deadline_ms())},
        {"last_error", l->seq.last_error()},
    };
    j.add("target[" + name + "]", std::move(m));
  }
}

emitter_actor::behavior_type emitter_fn(emitter_self self, pipeline_context ctx,
                                        emitter_options opts, std::vector<prepared_link> ready,
                                        std::vector<std::string> dns_names,
                                        std::shared_ptr<emitter::unit_encodings> encodings) {
  auto& st = self->state;
  st.encodings = std::move(encodings);
  st.ctx = std::move(ctx);
  st.opts = std::move(opts);
  st.event_age = &st.ctx.histogram("kvrelay_event_age_seconds",
                                   "Engine batch time to policy-server acknowledgement of the adds",
                                   metrics_registry::latency_buckets());
  st.resolve_failures = &st.ctx.counter(
      "kvrelay_target_resolve_failures_total",
      "Resolves of a DNS fan-out policy-server name that failed (the last good set is kept)");
  std::vector<std::string> static_targets;
  for (auto& p : ready) {
    auto l = make_link(self, std::move(p));
    static_targets.push_back(l->name);
    auto name = l->name;
    st.links.emplace(std::move(name), std::move(l));
  }
  const bool any_dns = !dns_names.empty();
  st.membership.emplace(std::move(static_targets), std::move(dns_names));
  if (any_dns) {
    // Created on the actor's thread: what the thread reads happens-before it by its creation.
    st.resolver = make_resolver(caf::actor_cast<caf::weak_actor_ptr>(self));
    st.membership->start(rate_limiter::steady_ms(), st.membership_actions);  // TM1
    run_membership(self);
    self->delayed_send(self, st.opts.resolve_interval, atom::resolve_v, uint64_t{0});
  }
  return {
      [=](std::string& target, emit_unit_ptr unit) {
        auto& s = self->state;
        auto it = s.links.find(target);
        if (it == s.links.end() || !unit) {
          emit_result r;
          r.target = std::move(target);
          r.id = unit ? unit->id : 0;
          r.ok = false;
          r.sent = false;
          r.last_error = "unknown target";
          if (auto to = caf::actor_cast<debouncer_actor>(self->current_sender()))
            self->send(to, std::move(r));
          return;
        }
        auto& l = *it->second;
        const uint64_t ticket = l.next_ticket++;
        l.unit_reply.emplace(ticket, self->current_sender());
        l.seq.on_unit(ticket, std::move(unit), s.actions);
        execute(self, l);
      },
      [=](stats_sample_ptr stats) -> caf::result<bool> {
        auto& s = self->state;
        if (!stats || s.links.empty()) return false;
        const uint64_t request = s.next_stats++;
        auto promise = self->make_response_promise<bool>();
        s.stats.emplace(request, stats_request{promise, s.links.size(), false});
        const int64_t now_us = s.ctx.wall_us();  // stats carry the daemon's clock (S13)
        for (auto& [name, lp] : s.links) {
          auto& l = *lp;
          const uint64_t ticket = l.next_ticket++;
          l.stats_reply.emplace(ticket, request);
          l.seq.on_stats(ticket, s.actions);
          for (const auto& a : s.actions)
            if (a.what == emit_action::kind::start_stats) l.port->stats(a.call, *stats, now_us);
          execute(self, l);
        }
        return promise;
      },
      [=](atom::completed) {
        // Any link's inbox may have woken the actor: look at every one.
        auto& s = self->state;
        for (auto& [name, l] : s.links) on_events(self, *l);
      },
      [=](atom::resolve, uint64_t which) {
        auto& s = self->state;
        const int64_t now = rate_limiter::steady_ms();
        if (which == 0) {
          s.membership->on_interval(now, s.membership_actions);  // TM1
          run_membership(self);
          self->delayed_send(self, s.opts.resolve_interval, atom::resolve_v, uint64_t{0});
          return;
        }
        s.membership->on_deferred_due(which - 1, now, s.membership_actions);  // TM3
        run_membership(self);
      },
      [=](atom::resolve, uint64_t which, std::vector<std::string>& addresses,
          std::string& error) {
        tsan::handoff_consume();  // the resolver thread's answer
        auto& s = self->state;
        s.membership->on_resolved(which, std::move(addresses), error, s.membership_actions);
        run_membership(self, error);
      },
      [=](atom::update, reconnect_listener_actor l) {
        self->state.listener = std::move(l);
        tell_targets(self);
      },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) {
        auto& s = self->state;
        actor_status j("emitter", self->mailbox().size());
        std::string specs;
        for (const auto& t : s.opts.targets) specs += (specs.empty() ? "" : ",") + t;
        j.add("target", specs);
        j.add("eviction_mode", emitter::to_string(s.opts.sequencer.mode));
        add_status(j, s);
        tsan::handoff_publish();  // read on the asker's thread
        return j;
      },
  };
}

}  // namespace

emitter_actor spawn_emitter(caf::actor_system& sys, const pipeline_context& ctx,
                            const emitter_options& opts, std::string& error) {
  emitter_options o = opts;
  if (o.targets.empty()) o.targets.push_back(o.client.target);
  std::sort(o.targets.begin(), o.targets.end());
  o.targets.erase(std::unique(o.targets.begin(), o.targets.end()), o.targets.end());
  // Static targets' ports are built here, not in the actor, so a bad TLS file is an error for the
  // caller instead of an actor that dies on start. DNS names get theirs once resolved (the
  // shared client options are checked here all the same).
  std::vector<prepared_link> ready;
  std::vector<std::string> dns_names;
  auto encodings = emitter::make_unit_encodings();
  for (const auto& t : o.targets) {
    if (is_dns_target(t) && o.resolve) {
      if (!o.make_port) {
        client_options c = o.client;
        c.target = t;
        error = policy_client::validate(c);
        if (!error.empty()) return {};
      }
      dns_names.push_back(t);
      continue;
    }
    auto inbox = std::make_shared<emitter::port_inbox>();
    auto port = build_port(ctx, o, t, inbox, encodings, error);
    if (!port) {
      if (error.empty()) error = "cannot make a port for " + t;
      return {};
    }
    ready.push_back({t, std::move(inbox), std::move(port)});
  }
  // Alive across start() whatever the actor does.
  std::vector<std::shared_ptr<emitter::policy_port>> keep;
  for (const auto& p : ready) keep.push_back(p.port);
  auto hdl = sys.spawn(emitter_fn, ctx, o, std::move(ready), std::move(dns_names),
                       std::move(encodings));
  // The ports' connectivity threads start here, on the spawning thread, after the actor exists:
  // what they read (the port, the actor) then happens-before them by the thread's creation,
  // which ThreadSanitizer can see (CAF's own hand-offs it cannot). Their first events wait in
  // the inbox until the actor has bound it.
  for (auto& p : keep) p->start();
  return hdl;
}

}  // namespace kvrelay
