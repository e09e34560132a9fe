#include "actors/debouncer/debouncer_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "actors/debouncer/pending_set.hpp"
#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"

namespace kvrelay {

namespace {


struct debouncer_state {
  static inline constexpr const char* name = "debouncer";

  pipeline_context ctx;
  debouncer_options opts;
  std::optional<bool> told_server_ok;  // what ctx.health last heard
  pending_set pending;
  emitter_actor emitter;
  decoder_actor decoder;

  uint64_t epoch = 1;  // the decoder's first epoch
  uint64_t timer_gen = 0;
  bool timer_armed = false;
  uint64_t next_unit = 1;
  std::set<uint64_t> in_flight;

  // Server health: a failed unit makes it unhealthy; recovery goes through a resync.
  bool healthy = true;
  uint64_t resync_unit = 0;  // the unit carrying the resync's ALL_CLEARED (0 = none)
  std::chrono::milliseconds resync_backoff{500};
  bool resync_timer_armed = false;

  std::vector<caf::typed_response_promise<bool>> drains;
  bool draining = false;  // shutdown: send what is pending whatever the server's health

  // Metrics, looked up once.
  gauge_series* pending_gauge = nullptr;
  counter_series* units_sent = nullptr;
  counter_series* units_failed = nullptr;
  counter_series* stale_ops = nullptr;
  counter_series* overflows = nullptr;
  counter_series* resyncs = nullptr;
  counter_series* entries_sent = nullptr;
};

using debouncer_self = debouncer_actor::stateful_pointer<debouncer_state>;

bool merged(const debouncer_state& st) { return st.opts.merged_rank && st.opts.holders; }

void arm_timer(debouncer_self self) {
  auto& st = self->state;
  if (st.timer_armed) return;
  st.timer_armed = true;
  self->delayed_send(self, st.opts.window, atom::flush_v, ++st.timer_gen);
}

void update_gauge(debouncer_state& st) {
  st.pending_gauge->set(static_cast<double>(st.pending.size()));
}

void check_drains(debouncer_self self) {
  auto& st = self->state;
  if (st.drains.empty() || !st.in_flight.empty() || !st.pending.empty()) return;
  for (auto& p : st.drains) p.deliver(true);
  st.drains.clear();
}

// Seals what is pending into a unit and hands it to the emitter, if credits allow.
void flush(debouncer_self self) {
  auto& st = self->state;
  if (st.pending.empty() || st.in_flight.size() >= st.opts.max_units_in_flight) return;
  // While the server is away, hold final state; the resync brings it back (see on_result).
  if (!st.healthy && st.resync_unit == 0 && !st.draining) return;
  auto unit = st.pending.take(st.next_unit++);
  if (!unit) return;
  st.in_flight.insert(unit->id);
  st.units_sent->inc();
  st.entries_sent->inc(unit->entries());
  self->send(st.emitter, std::make_shared<const emit_unit>(std::move(*unit)));
  update_gauge(st);
  if (st.pending.pending_adds() > 0) arm_timer(self);
}

void start_resync(debouncer_self self, const char* why) {
  auto& st = self->state;
  if (st.resync_unit != 0) return;
  st.resyncs->inc();
  log::info("resyncing the policy server: ALL_CLEARED, then every resident block",
            {{"replica", st.ctx.name}, {"reason", why}, {"merged_dp", merged(st)}});
  if (merged(st)) {
    // Other ranks share the replica: no ALL_CLEARED. Pending evictions are kept (they are the
    // outage's removals); the re-report after the next success restores everything held.
    st.healthy = true;
    if (st.decoder) self->send(st.decoder, atom::resync_v);
    flush(self);
    return;
  }
  // The re-report supersedes whatever is pending; the clear makes sure nothing stale survives.
  st.pending.reset();
  st.pending.clear(st.ctx.wall_us());
  st.pending.reset_overflow();
  st.resync_unit = st.next_unit;  // the next unit taken carries the clear
  flush(self);
  if (st.in_flight.count(st.resync_unit) == 0) st.resync_unit = 0;  // no credit: retry later
}

void schedule_resync(debouncer_self self) {
  auto& st = self->state;
  if (st.resync_timer_armed) return;
  st.resync_timer_armed = true;
  self->delayed_send(self, st.resync_backoff, atom::resync_v);
  st.resync_backoff = std::min(st.resync_backoff * 2, st.opts.resync_backoff_max);
}

void mark_unhealthy(debouncer_self self, const std::string& why) {
  auto& st = self->state;
  if (st.healthy)
    log::warn("policy server unreachable; holding final state until it is back",
              {{"replica", st.ctx.name}, {"err", why}});
  st.healthy = false;
  schedule_resync(self);
}

// Merged DP mode: keeps an eviction only when this rank was the prefix's last holder.
shard_ops filter_merged(debouncer_state& st, const shard_ops& in) {
  shard_ops out = in;
  out.ops.clear();
  const unsigned rank = *st.opts.merged_rank;
  for (const auto& op : in.ops) {
    if (op.op == prefix_op::kind::upsert) {
      st.opts.holders->add(in.adapter, op.fingerprint, rank);
      out.ops.push_back(op);
    } else if (st.opts.holders->remove(in.adapter, op.fingerprint, rank)) {
      out.ops.push_back(op);
    }
  }
  return out;
}

// A clear of this pipeline. Merged DP mode: evict only what no other rank holds.
void clear_replica(debouncer_self self, int64_t ts_us) {
  auto& st = self->state;
  if (!merged(st)) {
    st.pending.clear(ts_us);
    return;
  }
  shard_ops evicts;
  evicts.ts_us = ts_us;
  std::map<std::string, shard_ops> by_adapter;
  st.opts.holders->clear_rank(*st.opts.merged_rank, [&](const std::string& adapter, uint64_t fp) {
    auto& o = by_adapter[adapter];
    o.adapter = adapter;
    o.ts_us = ts_us;
    o.ops.push_back(prefix_op{prefix_op::kind::evict, fp, 0, tier::t1});
  });
  for (auto& [adapter, o] : by_adapter) st.pending.apply(o);
}

void on_ops(debouncer_self self, const shard_ops& raw) {
  auto& st = self->state;
  const shard_ops filtered = merged(st) ? filter_merged(st, raw) : shard_ops{};
  const shard_ops& ops = merged(st) ? filtered : raw;
  if (ops.epoch < st.epoch) {  // stored before a clear: must never reach the server after it
    st.stale_ops->inc(ops.ops.size());
    return;
  }
  if (ops.epoch > st.epoch) {  // the clear notice is behind this op: clear now
    st.epoch = ops.epoch;
    clear_replica(self, ops.ts_us);
  }
  bool evicts = std::any_of(ops.ops.begin(), ops.ops.end(),
                            [](const prefix_op& o) { return o.op == prefix_op::kind::evict; });
  // Adds go out before the evictions that follow them (R03, L08).
  if (evicts && st.pending.pending_adds() > 0) flush(self);
  if (!st.pending.apply(ops)) {
    st.overflows->inc();
    log::error("pending updates over their bound; will clear and resync",
               {{"replica", st.ctx.name}, {"max_pending", st.opts.max_pending}});
    if (st.healthy) start_resync(self, "pending overflow");
    return;
  }
  update_gauge(st);
  if (evicts || st.pending.pending_adds() >= st.opts.flush_threshold || st.pending.clear_pending())
    flush(self);
  else if (st.pending.pending_adds() > 0)
    arm_timer(self);
}

void on_result(debouncer_self self, const emit_result& r) {
  auto& st = self->state;
  if (st.in_flight.erase(r.id) == 0) return;  // from before an emitter restart
  if (st.told_server_ok != r.ok && st.ctx.health) {
    st.told_server_ok = r.ok;
    self->send(st.ctx.health, r.ok ? health_fact::server_ok : health_fact::server_failed);
  }
  if (!r.ok) {
    st.units_failed->inc();
    if (r.id == st.resync_unit) st.resync_unit = 0;
    mark_unhealthy(self, r.last_error);
  } else if (r.id == st.resync_unit) {
    st.resync_unit = 0;
    if (!st.healthy) log::info("policy server reachable again", {{"replica", st.ctx.name}});
    st.healthy = true;
    st.resync_backoff = std::chrono::milliseconds{500};
    if (st.decoder) self->send(st.decoder, atom::resync_v);  // shards re-report everything
  }
  flush(self);
  check_drains(self);
}

debouncer_actor::behavior_type debouncer_fn(debouncer_self self, pipeline_context ctx,
                                            debouncer_options opts, emitter_actor emitter) {
  auto& st = self->state;
  st.opts = opts;
  st.pending = pending_set(pending_set::options{opts.l2_mode, opts.max_pending, 16384});
  st.emitter = std::move(emitter);
  st.ctx = std::move(ctx);
  const auto& m = st.ctx;
  st.pending_gauge = &m.gauge("kvrelay_pending_entries", "Coalesced updates not yet sent");
  st.units_sent = &m.counter("kvrelay_units_sent_total", "Ordered units handed to the emitter");
  st.units_failed = &m.counter("kvrelay_units_failed_total", "Units with a failed RPC");
  st.stale_ops = &m.counter("kvrelay_stale_epoch_ops_total",
                            "Ops dropped because a clear superseded them");
  st.overflows = &m.counter("kvrelay_pending_overflows_total",
                            "Times pending updates crossed their bound (clear + resync)");
  st.resyncs = &m.counter("kvrelay_resyncs_total", "ALL_CLEARED + full re-reports");
  st.entries_sent = &m.counter("kvrelay_entries_sent_total",
                               "Adds, downgrades, evictions and clears sent");
  if (opts.refresh_interval.count() > 0)
    self->delayed_send(self, opts.refresh_interval, atom::refresh_v);
  if (opts.start_with_clear) clear_replica(self, st.ctx.wall_us());
  return {
      [=](shard_ops_ptr ops) { on_ops(self, *ops); },
      [=](atom::clear, uint64_t epoch, int64_t ts_us) {
        auto& s = self->state;
        if (epoch <= s.epoch && epoch != 0) return;  // already cleared by a newer-epoch op
        s.epoch = std::max(s.epoch, epoch);
        clear_replica(self, ts_us);
        flush(self);
      },
      [=](emit_result& r) { on_result(self, r); },
      [=](atom::flush, uint64_t gen) {
        auto& s = self->state;
        if (gen != s.timer_gen) return;
        s.timer_armed = false;
        flush(self);
      },
      [=](atom::update, emitter_actor e) {
        auto& s = self->state;
        s.emitter = std::move(e);
        if (!s.in_flight.empty()) {
          // Whatever the old emitter had not finished is unknown to the server: resync.
          s.in_flight.clear();
          s.resync_unit = 0;
          mark_unhealthy(self, "emitter restarted with units in flight");
        }
        flush(self);
      },
      [=](atom::update, decoder_actor d) { self->state.decoder = std::move(d); },
      [=](atom::reconnected) {},  // handled by the reconnect work (issue 12 item 3)
      [=](atom::resync) {
        auto& s = self->state;
        s.resync_timer_armed = false;
        if (s.healthy) return;
        start_resync(self, "server unreachable earlier");
        if (s.resync_unit == 0) schedule_resync(self);
      },
      [=](atom::refresh) {  // periodic refresh so long-lived prefixes never age out server-side
        auto& s = self->state;
        if (s.healthy && s.decoder) self->send(s.decoder, atom::resync_v);
        self->delayed_send(self, s.opts.refresh_interval, atom::refresh_v);
      },
      [=](atom::drain) -> caf::result<bool> {
        auto& s = self->state;
        s.draining = true;
        flush(self);
        if (s.in_flight.empty() && s.pending.empty()) return true;
        auto p = self->make_response_promise<bool>();
        s.drains.push_back(p);
        return p;
      },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) {
        auto& s = self->state;
        actor_status j("debouncer", self->mailbox().size());
        j.add("pending", s.pending.size());
        j.add("pending_adds", s.pending.pending_adds());
        j.add("units_in_flight", s.in_flight.size());
        j.add("epoch", s.epoch);
        j.add("server_healthy", s.healthy);
        j.add("resync_in_progress", s.resync_unit != 0);
        return j;
      },
  };
}

}  // namespace

debouncer_actor spawn_debouncer(caf::actor_system& sys, const pipeline_context& ctx,
                                const debouncer_options& opts, emitter_actor emitter) {
  return sys.spawn(debouncer_fn, ctx, opts, std::move(emitter));
}

}  // namespace kvrelay
