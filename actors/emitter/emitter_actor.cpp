// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter's shell: unpacks messages, feeds unit_sequencer, executes its actions on the port,
// records the RPC metrics. Every decision about what goes on the wire is the sequencer's.
#include "actors/emitter/emitter_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "base/rate_limiter.hpp"
#include "base/tsan.hpp"

namespace kvrelay {

namespace {

using emitter::call_kind;
using emitter::emit_action;
using emitter::port_event;

constexpr int n_methods = 2;  // ReportCacheState, PublishEvent
constexpr int n_codes = 17;   // grpc::StatusCode 0-16; anything else counts as UNKNOWN (2)

struct emitter_state {
  static inline constexpr const char* name = "emitter";

  ~emitter_state() {
    // Completions of calls the port cancels now must not wake an actor that is going away.
    if (inbox) inbox->bind({});
    port.reset();
  }

  pipeline_context ctx;
  emitter_options opts;
  std::shared_ptr<emitter::port_inbox> inbox;
  std::shared_ptr<emitter::policy_port> port;  // the state is its last owner
  emitter::unit_sequencer seq;

  // Reused between messages: no allocation per completion batch in steady state.
  emitter::emit_actions actions;
  std::vector<port_event> events;

  uint64_t next_ticket = 1;
  absl::flat_hash_map<uint64_t, caf::strong_actor_ptr> unit_reply;
  absl::flat_hash_map<uint64_t, caf::typed_response_promise<bool>> stats_reply;
  reconnect_listener_actor listener;

  // Series resolved once: per (method, code) on first use, the rest at spawn.
  std::array<std::array<counter_series*, n_codes>, n_methods> rpc_total{};
  std::array<std::array<histogram_series*, n_codes>, n_methods> rpc_duration{};
  histogram_series* event_age = nullptr;
  // Kept beside the duration histogram: dashboards and rules built on it keep working.
  std::array<histogram_series*, n_methods> rpc_latency{};
};

using emitter_self = emitter_actor::stateful_pointer<emitter_state>;

void observe_rpc(emitter_state& st, call_kind kind, int code, int64_t latency_us) {
  const int m = emitter::method_of(kind)[0] == 'P' ? 1 : 0;
  const int c = code >= 0 && code < n_codes ? code : 2;
  auto& total = st.rpc_total[m][c];
  if (!total) {
    const label_set l{{"method", emitter::method_of(kind)},
                      {"code", emitter::status_code_name(c)}};
    total = &st.ctx.counter("kvrelay_rpc_total",
                            "RPCs to the policy server by method and gRPC code", l);
    st.rpc_duration[m][c] = &st.ctx.histogram(
        "kvrelay_rpc_duration_seconds",
        "RPC duration (issue to completion) to the policy server by method and gRPC code",
        metrics_registry::latency_buckets(), l);
  }
  total->inc();
  const double seconds = static_cast<double>(latency_us) / 1e6;
  st.rpc_duration[m][c]->observe(seconds);
  st.rpc_latency[m]->observe(seconds);
}

// Executes the sequencer's actions, in order.
void execute(emitter_self self) {
  auto& st = self->state;
  for (auto& a : st.actions) {
    switch (a.what) {
      case emit_action::kind::start_clear:
        st.port->clear(a.call, a.unit->clear_ts_us);
        break;
      case emit_action::kind::start_stream:
        st.port->stream(a.call, std::move(a.unit), a.with_expirations);
        break;
      case emit_action::kind::start_evict:
        st.port->evict(a.call, a.unit->evicts[a.index]);
        break;
      case emit_action::kind::start_stats:
        break;  // issued by the stats handler, which holds the sample
      case emit_action::kind::answer_unit: {
        auto it = st.unit_reply.find(a.ticket);
        if (it == st.unit_reply.end()) break;
        auto to = caf::actor_cast<debouncer_actor>(std::move(it->second));
        st.unit_reply.erase(it);
        if (to) self->send(to, std::move(a.result));
        break;
      }
      case emit_action::kind::answer_stats: {
        auto it = st.stats_reply.find(a.ticket);
        if (it == st.stats_reply.end()) break;
        it->second.deliver(a.ok);
        st.stats_reply.erase(it);
        break;
      }
      case emit_action::kind::reconnected:  // counted by the listener (kvrelay_reconnects_total)
        log::info("policy server connection is back after it was lost; asking for a resync",
                  {{"replica", st.ctx.name}, {"target", st.opts.client.target}});
        if (st.listener) self->send(st.listener, atom::reconnected_v);
        break;
      case emit_action::kind::log:
        log::write(a.log, {{"replica", st.ctx.name}});
        break;
      case emit_action::kind::set_deadline: {
        st.port->set_deadline(a.deadline_ms);
        const auto configured = static_cast<int64_t>(st.opts.client.rpc_timeout.count());
        const log::fields f{{"replica", st.ctx.name},
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

void on_events(emitter_self self) {
  auto& st = self->state;
  st.inbox->take(st.events);
  const int64_t now_ms = rate_limiter::steady_ms();
  for (auto& e : st.events) {
    if (e.what == port_event::kind::channel) {
      st.seq.on_channel(e.state, st.actions);
      continue;
    }
    const auto info = st.seq.on_completed(e.call, e.code, e.message, e.accepted, now_ms,
                                          st.actions, e.latency_us);
    if (!info.known) continue;
    observe_rpc(st, info.kind, e.code, e.latency_us);
    if (e.code == 0 && info.adds_ts_us > 0) {
      const double age = static_cast<double>(st.ctx.wall_us() - info.adds_ts_us) / 1e6;
      if (age >= 0) st.event_age->observe(age);
    }
  }
  execute(self);
}

emitter_actor::behavior_type emitter_fn(emitter_self self, pipeline_context ctx,
                                        emitter_options opts,
                                        std::shared_ptr<emitter::port_inbox> inbox,
                                        std::shared_ptr<emitter::policy_port> port) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.opts = std::move(opts);
  st.inbox = std::move(inbox);
  st.port = std::move(port);
  emitter::sequencer_options so = st.opts.sequencer;
  so.deadline_ms = static_cast<int64_t>(st.opts.client.rpc_timeout.count());
  st.seq = emitter::unit_sequencer(so);
  const auto& m = st.ctx;
  st.event_age = &m.histogram("kvrelay_event_age_seconds",
                              "Engine batch time to policy-server acknowledgement of the adds",
                              metrics_registry::latency_buckets());
  for (const call_kind k : {call_kind::stream, call_kind::evict}) {
    const int i = emitter::method_of(k)[0] == 'P' ? 1 : 0;
    st.rpc_latency[i] = &m.histogram("kvrelay_rpc_latency_seconds",
                                     "RPC latency to the policy server",
                                     metrics_registry::latency_buckets(),
                                     {{"method", emitter::method_of(k)}});
  }
  // The wake-up holds a weak reference: the inbox must not keep its actor alive.
  caf::weak_actor_ptr weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  st.inbox->bind([weak] {
    if (auto hdl = caf::actor_cast<emitter_actor>(weak)) caf::anon_send(hdl, atom::completed_v);
  });
  return {
      [=](emit_unit_ptr unit) {
        auto& s = self->state;
        const uint64_t ticket = s.next_ticket++;
        s.unit_reply.emplace(ticket, self->current_sender());
        s.seq.on_unit(ticket, std::move(unit), s.actions);
        execute(self);
      },
      [=](stats_sample_ptr stats) -> caf::result<bool> {
        auto& s = self->state;
        if (!stats) return false;
        const uint64_t ticket = s.next_ticket++;
        auto promise = self->make_response_promise<bool>();
        s.stats_reply.emplace(ticket, promise);
        s.seq.on_stats(ticket, s.actions);
        for (const auto& a : s.actions)
          if (a.what == emit_action::kind::start_stats)
            s.port->stats(a.call, *stats, s.ctx.wall_us());  // stats carry the daemon's clock (S13)
        execute(self);
        return promise;
      },
      [=](atom::completed) { on_events(self); },
      [=](atom::update, reconnect_listener_actor l) { self->state.listener = std::move(l); },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) {
        auto& s = self->state;
        const auto& c = s.seq.counters();
        actor_status j("emitter", self->mailbox().size());
        j.add("target", s.opts.client.target);
        j.add("eviction_mode", emitter::to_string(s.opts.sequencer.mode));
        j.add("channel", emitter::to_string(s.seq.channel()));  // as the emitter last heard it
        j.add("in_flight", s.port->in_flight());
        j.add("queued_units", s.seq.queued_units());
        j.add("holding_back", s.seq.holding_back());
        j.add("units_done", c.units_ok);
        j.add("units_failed", c.units_failed);
        j.add("units_unsent", c.units_unsent);
        j.add("reconnects", c.reconnects);
        j.add("deadline_ms", s.seq.deadline_ms());
        j.add("deadline_raised", c.deadline_raised);
        j.add("last_error", s.seq.last_error());
        tsan::handoff_publish();  // read on the asker's thread
        return j;
      },
  };
}

}  // namespace

emitter_actor spawn_emitter(caf::actor_system& sys, const pipeline_context& ctx,
                            const emitter_options& opts, std::string& error) {
  // The port is built here, not in the actor, so a bad TLS file is an error for the caller
  // instead of an actor that dies on start.
  emitter::port_config cfg;
  cfg.client = opts.client;
  cfg.identity = ctx.identity;
  cfg.max_entries_per_message = opts.max_entries_per_message;
  cfg.evict_wake_batch = std::max<size_t>(1, opts.sequencer.max_evictions_in_flight / 4);
  auto inbox = std::make_shared<emitter::port_inbox>();
  std::shared_ptr<emitter::policy_port> port =
      opts.make_port ? opts.make_port(cfg, inbox, error)
                     : emitter::make_grpc_port(cfg, inbox, error);
  if (!port) return {};
  std::shared_ptr<emitter::policy_port> keep = port;  // alive across start() whatever the actor does
  auto hdl = sys.spawn(emitter_fn, ctx, opts, std::move(inbox), std::move(port));
  // The port's connectivity thread starts here, on the spawning thread, after the actor exists:
  // what it reads (the port, the actor) then happens-before it by the thread's creation, which
  // ThreadSanitizer can see (CAF's own hand-offs it cannot). Its first events wait in the inbox
  // until the actor has bound it.
  keep->start();
  return hdl;
}

}  // namespace kvrelay
