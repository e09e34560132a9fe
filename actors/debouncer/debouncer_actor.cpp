// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/debouncer/debouncer_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "base/counter_table.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "base/tsan.hpp"

namespace kvrelay {

namespace {

// Every counter the debouncer publishes, declared once: one row per series
// (base/counter_table.hpp).
constexpr const char* dropped_help =
    "Updates never sent because the server's state is known without them";

constexpr counter_row<debounce::counters> counter_rows[] = {
    {"kvrelay_units_sent_total", "Ordered units handed to the emitter", nullptr, nullptr,
     &debounce::counters::units_sent},
    {"kvrelay_entries_sent_total", "Adds, downgrades, evictions and clears sent", nullptr, nullptr,
     &debounce::counters::entries_sent},
    {"kvrelay_units_failed_total", "Units with a failed RPC", nullptr, nullptr,
     &debounce::counters::units_failed},
    {"kvrelay_stale_epoch_ops_total", "Ops dropped because a clear superseded them", nullptr,
     nullptr, &debounce::counters::stale_ops},
    {"kvrelay_resyncs_total", "ALL_CLEARED + full re-reports", nullptr, nullptr,
     &debounce::counters::resyncs},
    {"kvrelay_resync_probes_failed_total",
     "Resync probes (ALL_CLEARED) the server did not acknowledge", nullptr, nullptr,
     &debounce::counters::probes_failed},
    {"kvrelay_reconnects_total", "Times the transport to the policy server came back after a loss",
     nullptr, nullptr, &debounce::counters::reconnects},
    {"kvrelay_updates_dropped_total", dropped_help, "reason", "superseded",
     &debounce::counters::superseded},
    {"kvrelay_updates_dropped_total", dropped_help, "reason", "after_final_clear",
     &debounce::counters::after_final_clear},
    {"kvrelay_sweep_restores_total",
     "rpc mode: LoRA entries re-reported after a base-model PREFIX_EVICTED swept them", nullptr,
     nullptr, &debounce::counters::sweep_restores},
    {"kvrelay_walks_total", "Walks of the index to a target, by why they ran (WK4, WK5)", "kind",
     "resync", &debounce::counters::walks_resync},
    {"kvrelay_walks_total", "Walks of the index to a target, by why they ran (WK4, WK5)", "kind",
     "catchup", &debounce::counters::walks_catchup},
    {"kvrelay_walks_total", "Walks of the index to a target, by why they ran (WK4, WK5)", "kind",
     "start", &debounce::counters::walks_start},
    {"kvrelay_walks_total", "Walks of the index to a target, by why they ran (WK4, WK5)", "kind",
     "refresh", &debounce::counters::walks_refresh},
    {"kvrelay_walks_completed_total", "Walks of the index that reached their end", nullptr, nullptr,
     &debounce::counters::walks_done},
    {"kvrelay_walk_restarts_total",
     "Running walks started over from the first block (pending shed adds behind the cursor)",
     nullptr, nullptr, &debounce::counters::walk_restarts},
    {"kvrelay_walk_blocks_total", "Blocks sent by walks of the index (re-reports)", nullptr,
     nullptr, &debounce::counters::walk_blocks},
    {"kvrelay_pending_holds_total",
     "Times pending evictions reached their bound and paused reading from the engine",
     nullptr, nullptr, &debounce::counters::holds},
    {"kvrelay_pending_sheds_total",
     "Times pending updates crossed their bound and shed their adds (a walk re-reports them)",
     nullptr, nullptr, &debounce::counters::sheds},
    {"kvrelay_sweep_repair_overflows_total",
     "rpc mode: times the mirror of LoRA entries passed its bound (repair off until a clear)",
     nullptr, nullptr, &debounce::counters::sweep_repair_overflows},
};

constexpr counter_row<pending_set::drop_stats> drop_rows[] = {
    {"kvrelay_updates_dropped_total", dropped_help, "reason", "unsent_pair",
     &pending_set::drop_stats::unsent_pairs},
    {"kvrelay_updates_dropped_total", dropped_help, "reason", "not_reported",
     &pending_set::drop_stats::unreported},
};

// The shell's state, shared by the pipeline debouncer and the replica debouncer: the protocol,
// the handles its actions need, and the metric series (resolved once, here).
struct debouncer_state {
  static inline constexpr const char* name = "debouncer";

  pipeline_context ctx;
  std::optional<debounce::protocol> proto;
  emitter_actor emitter;
  std::map<uint32_t, decoder_actor> decoders;
  std::vector<health_listener_actor> listeners;
  std::optional<bool> told_ok;
  std::vector<caf::typed_response_promise<bool>> drains;

  // DB11, memory_budget MG6: released with the state, so a debouncer that dies holding the
  // readers never leaves them paused.
  struct reader_hold {
    std::shared_ptr<memory_budget> budget;
    void set(std::shared_ptr<memory_budget> b) {
      if (budget) budget->unhold();
      budget = std::move(b);
      if (budget) budget->hold();
    }
    reader_hold() = default;
    reader_hold(const reader_hold&) = delete;
    reader_hold& operator=(const reader_hold&) = delete;
    ~reader_hold() { set(nullptr); }
  } hold;

  standing_charge pending_charge;

  std::optional<counter_table<debounce::counters>> counters;
  std::optional<counter_table<pending_set::drop_stats>> drops;
  gauge_series* pending_gauge = nullptr;

  void init(pipeline_context c, const debounce::options& o) {
    ctx = std::move(c);
    proto.emplace(o);
    pending_charge = standing_charge(ctx.budget, standing_charge::on::debouncer_queue);
    counters.emplace(counter_rows, ctx.metrics, ctx.labels());
    drops.emplace(drop_rows, ctx.metrics, ctx.labels());
    pending_gauge = &ctx.gauge("kvrelay_pending_entries", "Coalesced updates not yet sent");
  }

  // Each target's series, created when it joins and removed when it leaves.
  struct target_series {
    gauge_series* up = nullptr;
    gauge_series* lag = nullptr;
    counter_series* resyncs = nullptr;
    uint64_t resyncs_published = 0;
  };
  std::map<std::string, target_series> target_metrics;

  static constexpr const char* target_metric_names[] = {
      "kvrelay_target_up", "kvrelay_target_lag_bytes", "kvrelay_target_resyncs_total"};

  void sync_targets() {
    const auto& targets = proto->targets();
    for (auto it = target_metrics.begin(); it != target_metrics.end();) {
      if (targets.count(it->first) != 0) {
        ++it;
        continue;
      }
      for (const char* m : target_metric_names)
        ctx.metrics->remove(m, ctx.labels({{"target", it->first}}));
      it = target_metrics.erase(it);
    }
    for (const auto& [name, t] : targets) {
      auto& m = target_metrics[name];
      if (!m.up) {
        const label_set l{{"target", name}};
        m.up = &ctx.gauge("kvrelay_target_up",
                          "1 while the policy server target answers units (TD9), else 0", l);
        m.lag = &ctx.gauge("kvrelay_target_lag_bytes",
                           "Bytes of units waiting for this target beyond its credits (TD2)", l);
        m.resyncs = &ctx.counter("kvrelay_target_resyncs_total",
                                 "ALL_CLEARED + full re-reports of this target", l);
      }
      m.up->set(t.up() ? 1.0 : 0.0);
      m.lag->set(static_cast<double>(t.queued_bytes()));
      const uint64_t r = t.stats().resyncs;
      if (r > m.resyncs_published) m.resyncs->inc(r - m.resyncs_published);
      m.resyncs_published = r;
    }
  }

  // Publishes what the protocol counted since the last call.
  void sync() {
    pending_charge.set(proto->pending().heap_bytes());  // DB11: pending is on the budget
    counters->publish(proto->stats());
    drops->publish(proto->pending().drops());
    pending_gauge->set(static_cast<double>(proto->pending().size()));
    sync_targets();
  }
};

template <class Self>
debounce::moment now_of(Self self) {
  const auto steady = self->clock().now().time_since_epoch();
  return {std::chrono::duration_cast<std::chrono::milliseconds>(steady).count(),
          self->state.ctx.wall_us()};
}

template <class Self>
void execute(Self self, debounce::actions& out);

// Calls the protocol with the current moment and executes what it returns.
template <class Self, class F>
void run(Self self, F&& f) {
  debounce::actions out;
  f(*self->state.proto, now_of(self), out);
  execute(self, out);
}

// WK1: the decoder passes the request to its shard after every batch before it.
template <class Self>
void ask_walk(Self self, uint32_t rank, const debounce::walk_ask& a) {
  auto it = self->state.decoders.find(rank);
  if (it == self->state.decoders.end()) return;
  self->send(it->second, atom::walk_v, a.id, a.partition, a.key, a.max);
}

template <class Self>
void execute(Self self, debounce::actions& out) {
  auto& st = self->state;
  for (auto& a : out) {
    switch (a.kind) {
      case debounce::action_kind::send_unit:
        self->send(st.emitter, std::move(a.target), std::move(a.unit));
        break;
      case debounce::action_kind::arm_flush:
        self->delayed_send(self, a.delay, atom::flush_v, a.gen);
        break;
      case debounce::action_kind::arm_resync:
        self->delayed_send(self, a.delay, atom::resync_v, a.gen);
        break;
      case debounce::action_kind::arm_refresh:
        self->delayed_send(self, a.delay, atom::refresh_v);
        break;
      case debounce::action_kind::walk:
        ask_walk(self, a.rank, a.ask);
        break;
      case debounce::action_kind::answer_drains:
        for (auto& p : st.drains) p.deliver(a.ok);
        st.drains.clear();
        break;
      case debounce::action_kind::health:
        st.told_ok = a.ok;
        for (auto& l : st.listeners)
          if (l) self->send(l, a.ok ? health_fact::server_ok : health_fact::server_failed);
        break;
      case debounce::action_kind::listen:
        if (st.emitter)
          self->send(st.emitter, atom::update_v, caf::actor_cast<reconnect_listener_actor>(self));
        break;
      case debounce::action_kind::log:
        log::write(a.line, {{"replica", st.ctx.name}});
        break;
      case debounce::action_kind::trim_heap:
#if defined(__GLIBC__)
        malloc_trim(0);  // a burst's pending set was freed: give its pages back
#endif
        break;
      case debounce::action_kind::hold:
        st.hold.set(a.ok ? st.ctx.budget : nullptr);
        break;
    }
  }
  st.sync();
}

template <class Self>
actor_status status_of(Self self) {
  const auto& p = *self->state.proto;
  actor_status j("debouncer", self->mailbox().size());
  j.add("pending", p.pending().size());
  j.add("pending_adds", p.pending().pending_adds());
  j.add("units_in_flight", p.units_in_flight());
  j.add("epoch", p.epoch(0));
  j.add("server_healthy", p.healthy());
  j.add("resync_in_progress", p.resync_in_progress());
  j.add("walks", p.walks().size());
  j.add("tracked_keys", p.pending().tracked());
  j.add("draining", p.draining());
  j.add("targets", p.targets().size());
  for (const auto& [name, t] : p.targets()) {  // one child per policy server target
    actor_status c("target", 0);
    c.name = "target[" + name + "]";
    c.state = !t.healthy() ? "unhealthy" : t.resync_in_progress() ? "resyncing" : "healthy";
    c.add("target", name);
    c.add("up", t.up());
    c.add("in_flight", t.in_flight());
    c.add("queued_units", t.queued_units());
    c.add("lag_bytes", t.queued_bytes());
    c.add("units_sent", t.stats().units_sent);
    c.add("units_failed", t.stats().units_failed);
    c.add("units_superseded", t.stats().units_superseded);
    c.add("resyncs", t.stats().resyncs);
    c.add("lag_overflows", t.stats().lag_overflows);
    c.add("last_error", t.last_error());
    if (auto w = p.walks().find(name); w != p.walks().end()) {  // WK1: where its walk stands
      c.add("walk", debounce::to_string(w->second.kind()));
      c.add("walk_blocks", w->second.blocks_sent());
    }
    j.children.push_back(std::move(c));
  }
  return j;
}

template <class Self>
caf::result<bool> drain(Self self) {
  auto p = self->template make_response_promise<bool>();
  self->state.drains.push_back(p);
  run(self, [](auto& pr, auto now, auto& out) { pr.on_drain(now, out); });
  return p;
}

// The handlers both debouncers share: answers, timers, emitter, reconnects, drain, crash.
template <class Self>
auto common_handlers(Self self) {
  return std::make_tuple(
      [=](emit_result& r) {
        run(self, [&](auto& p, auto now, auto& out) { p.on_result(r, now, out); });
      },
      [=](atom::flush, uint64_t gen) {
        run(self, [&](auto& p, auto now, auto& out) { p.on_flush_timer(gen, now, out); });
      },
      [=](atom::update, emitter_actor e) {
        self->state.emitter = std::move(e);
        run(self, [&](auto& p, auto now, auto& out) { p.on_emitter(now, out); });
      },
      [=](atom::resync, uint64_t gen) {
        run(self, [&](auto& p, auto now, auto& out) { p.on_resync_timer(gen, now, out); });
      },
      [=](atom::refresh) {
        run(self, [&](auto& p, auto now, auto& out) { p.on_refresh_timer(now, out); });
      },
      [=](atom::reconnected, const std::string& target) {
        run(self, [&](auto& p, auto now, auto& out) { p.on_reconnected(target, now, out); });
      },
      [=](atom::targets, const std::vector<std::string>& names) {
        run(self, [&](auto& p, auto now, auto& out) { p.on_targets(names, now, out); });
      },
      [=](atom::drain) -> caf::result<bool> { return drain(self); },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); });
}

// ---- one pipeline ------------------------------------------------------------------------------

using debouncer_self = debouncer_actor::stateful_pointer<debouncer_state>;

debouncer_actor::behavior_type debouncer_fn(debouncer_self self, pipeline_context ctx,
                                            debouncer_options opts, emitter_actor emitter) {
  auto& st = self->state;
  st.init(std::move(ctx), opts.protocol);
  st.emitter = std::move(emitter);
  if (st.ctx.health) st.listeners.push_back(st.ctx.health);
  run(self, [](auto& p, auto now, auto& out) {
    p.start(now, out);
    p.on_emitter(now, out);
  });
  return std::apply(
      [=](auto... common) -> debouncer_actor::behavior_type {
        return {
            [=](shard_ops_ptr ops) {
              run(self, [&](auto& p, auto now, auto& out) { p.on_ops(0, *ops, now, out); });
            },
            [=](atom::clear, uint64_t epoch, int64_t ts_us) {
              run(self,
                  [&](auto& p, auto now, auto& out) { p.on_clear(0, epoch, ts_us, now, out); });
            },
            [=](atom::update, decoder_actor d) {
              self->state.decoders[0] = std::move(d);
              run(self, [&](auto& p, auto now, auto& out) { p.on_decoder(0, now, out); });
            },
            [=](atom::status) { return tsan::published(status_of(self)); },
            common...,
        };
      },
      common_handlers(self));
}

// ---- merged DP mode: the replica's debouncer and each rank's port ------------------------------

using replica_self = replica_debouncer_actor::stateful_pointer<debouncer_state>;

replica_debouncer_actor::behavior_type replica_fn(replica_self self, pipeline_context ctx,
                                                  debouncer_options opts) {
  auto o = opts.protocol;
  o.merged = true;
  self->state.init(std::move(ctx), o);
  run(self, [](auto& p, auto now, auto& out) { p.start(now, out); });
  return std::apply(
      [=](auto... common) -> replica_debouncer_actor::behavior_type {
        return {
            [=](atom::join, uint32_t rank, health_listener_actor l) {
              auto& s = self->state;
              if (l) {
                if (s.told_ok)
                  self->send(l, *s.told_ok ? health_fact::server_ok : health_fact::server_failed);
                s.listeners.push_back(std::move(l));
              }
              s.decoders.erase(rank);
              run(self, [&](auto& p, auto now, auto& out) { p.on_rank_started(rank, now, out); });
            },
            [=](uint32_t rank, shard_ops_ptr ops) {
              run(self, [&](auto& p, auto now, auto& out) { p.on_ops(rank, *ops, now, out); });
            },
            [=](atom::clear, uint32_t rank, uint64_t epoch, int64_t ts_us) {
              run(self, [&](auto& p, auto now, auto& out) {
                p.on_clear(rank, epoch, ts_us, now, out);
              });
            },
            [=](atom::update, uint32_t rank, decoder_actor d) {
              self->state.decoders[rank] = std::move(d);
              run(self, [&](auto& p, auto now, auto& out) { p.on_decoder(rank, now, out); });
            },
            [=](atom::status) {
              auto j = status_of(self);
              j.add("merged_dp", true);
              j.add("held_keys", self->state.proto->held_keys());
              tsan::handoff_publish();  // read on the asker's thread
              return j;
            },
            common...,
        };
      },
      common_handlers(self));
}

struct port_state {
  static inline constexpr const char* name = "debouncer-port";
};
using port_self = debouncer_actor::stateful_pointer<port_state>;

// Forwards, in the order received, what one rank's data path sends its debouncer. The units,
// timers and health are the replica debouncer's; its status stands for the port's.
debouncer_actor::behavior_type port_fn(port_self self, pipeline_context ctx, uint32_t rank,
                                       replica_debouncer_actor owner, emitter_actor emitter) {
  self->monitor(owner);
  self->set_down_handler([=](const caf::down_msg& m) {
    if (m.source == owner.address())
      self->quit(caf::make_error(caf::sec::runtime_error, "the replica debouncer is gone"));
  });
  self->send(owner, atom::join_v, rank, ctx.health);
  if (rank == 0 && emitter) self->send(owner, atom::update_v, std::move(emitter));
  return {
      [=](shard_ops_ptr ops) { self->send(owner, rank, std::move(ops)); },
      [=](atom::clear, uint64_t epoch, int64_t ts_us) {
        self->send(owner, atom::clear_v, rank, epoch, ts_us);
      },
      [=](emit_result&) {},  // units are the replica debouncer's
      [=](atom::flush, uint64_t) {},
      [=](atom::update, emitter_actor e) {
        if (rank == 0) self->send(owner, atom::update_v, std::move(e));  // the replica's stream
      },
      [=](atom::update, decoder_actor d) { self->send(owner, atom::update_v, rank, std::move(d)); },
      [=](atom::resync, uint64_t) {},
      [=](atom::refresh) {},
      [=](atom::reconnected, const std::string&) {},
      [=](atom::targets, const std::vector<std::string>&) {},
      [=](atom::drain) { return self->delegate(owner, atom::drain_v); },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) { return self->delegate(owner, atom::status_v); },
  };
}

}  // namespace

debouncer_actor spawn_debouncer(caf::actor_system& sys, const pipeline_context& ctx,
                                const debouncer_options& opts, emitter_actor emitter) {
  if (opts.replica)
    return sys.spawn(port_fn, ctx, static_cast<uint32_t>(opts.merged_rank.value_or(0)),
                     opts.replica, std::move(emitter));
  return sys.spawn(debouncer_fn, ctx, opts, std::move(emitter));
}

replica_debouncer_actor spawn_replica_debouncer(caf::actor_system& sys, const pipeline_context& ctx,
                                                const debouncer_options& opts) {
  return sys.spawn(replica_fn, ctx, opts);
}

}  // namespace kvrelay
