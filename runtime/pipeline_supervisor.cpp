#include "runtime/pipeline_supervisor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <deque>
#include <utility>
#include <random>

#include "actors/emitter/policy_client.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "messages/status_fanout.hpp"

namespace kvrelay {

namespace {

using clock = std::chrono::steady_clock;

// Restart bookkeeping of one supervised unit ("emitter", "scraper" or "datapath").
struct restart_record {
  int restarts = 0;
  std::deque<clock::time_point> recent;
  std::string last_error;
  clock::time_point started = clock::now();
  bool pending = false;  // a restart is scheduled
};

struct pipeline_state {
  static inline constexpr const char* name = "pipeline";

  pipeline_context ctx;
  pipeline_options opts;
  // Health: facts told by the children (health_fact), owned here and nowhere else.
  bool first_batch = false;
  bool catchup_done = false;
  bool engine_connected = false;
  bool server_ok = false;
  bool unhealthy = false;  // restarts over the intensity limit; retried slowly
  // What the index knows of the engine's cache: why it is incomplete (nullptr: it matches), and
  // whether the engine sleeps. Degraded, not unready: an index that knows part of the cache
  // still routes better than none, and a sidecar's readiness gates its engine's traffic.
  const char* index_incomplete = nullptr;
  bool engine_asleep = false;
  gauge_series* incomplete_gauge = nullptr;
  std::shared_ptr<credit_line> credits = std::make_shared<credit_line>();

  emitter_actor emitter;
  scraper_actor scraper;
  debouncer_actor debouncer;
  decoder_actor decoder;
  ingress_actor ingress;

  std::map<std::string, restart_record> records;
  bool shutting_down = false;
  // Orderly teardown: children stopped one by one, upstream first, each after the previous one's
  // DOWN, so no actor is ever destroyed by a sibling dropping the last handle to it while its
  // own exit message is still queued.
  std::vector<caf::actor> teardown;
  bool tearing_down = false;
  caf::error exit_reason;
  std::mt19937_64 rng{std::random_device{}()};
};

using pipeline_self = pipeline_actor::stateful_pointer<pipeline_state>;

std::string reason_text(const caf::error& e) {
  return e ? caf::to_string(e) : std::string("normal");
}

void spawn_emitter_child(pipeline_self self) {
  auto& st = self->state;
  std::string err;
  st.emitter = spawn_emitter(self->system(), st.ctx, st.opts.emitter, err);
  if (!st.emitter) {
    st.records["emitter"].last_error = err;
    return;
  }
  self->monitor(st.emitter);
  st.records["emitter"].started = clock::now();
}

void spawn_scraper_child(pipeline_self self) {
  auto& st = self->state;
  if (!st.opts.scraper) return;
  st.scraper = spawn_scraper(self->system(), st.ctx, *st.opts.scraper, st.emitter);
  self->monitor(st.scraper);
  st.records["scraper"].started = clock::now();
}

void spawn_datapath(pipeline_self self) {
  auto& st = self->state;
  st.debouncer = spawn_debouncer(self->system(), st.ctx, st.opts.debouncer, st.emitter);
  auto credits = st.credits;
  st.decoder = spawn_decoder(self->system(), st.ctx, st.opts.decoder, st.debouncer,
                             [credits](size_t n) { credits->credit(static_cast<uint32_t>(n)); });
  st.ingress = spawn_ingress(self->system(), st.ctx, st.opts.ingress, st.decoder, st.credits);
  self->monitor(st.debouncer);
  self->monitor(st.decoder);
  self->monitor(st.ingress);
  st.records["datapath"].started = clock::now();
}

std::chrono::milliseconds backoff_for(pipeline_state& st, restart_record& r) {
  const auto now = clock::now();
  while (!r.recent.empty() && now - r.recent.front() > st.opts.restart_window)
    r.recent.pop_front();
  r.recent.push_back(now);
  ++r.restarts;
  if (static_cast<int>(r.recent.size()) > st.opts.max_restarts) {
    if (!std::exchange(st.unhealthy, true))
      log::error("pipeline keeps failing; marked unhealthy, retrying slowly",
                 {{"pipeline", st.ctx.name}, {"restarts", r.restarts},
                  {"last_error", r.last_error}});
    return st.opts.unhealthy_backoff;
  }
  std::chrono::milliseconds base =
      st.opts.backoff_min * (int64_t{1} << std::min<size_t>(r.recent.size() - 1, 16));
  base = std::min(base, st.opts.backoff_max);
  // Jitter in [base/2, base]: pipelines failing together do not retry in lockstep.
  std::uniform_int_distribution<int64_t> d(base.count() / 2, base.count());
  return std::chrono::milliseconds(d(st.rng));
}

void schedule_restart(pipeline_self self, const std::string& unit, const caf::error& reason) {
  auto& st = self->state;
  auto& r = st.records[unit];
  r.last_error = reason_text(reason);
  if (r.pending) return;
  r.pending = true;
  auto delay = backoff_for(st, r);
  st.ctx.metrics
      ->counter("kvrelay_actor_restarts_total", "Supervised restarts by pipeline and unit",
                {{"pipeline", st.ctx.name}, {"unit", unit}})
      .inc();
  log::warn("actor failed; restarting", {{"pipeline", st.ctx.name}, {"unit", unit},
                                          {"err", r.last_error},
                                          {"backoff_ms", static_cast<int64_t>(delay.count())}});
  self->delayed_send(self, delay, atom::restart_v, unit);
}

void stop_next(pipeline_self self) {
  auto& st = self->state;
  while (!st.teardown.empty()) {
    auto next = st.teardown.front();
    if (next) {
      self->send_exit(next, caf::exit_reason::user_shutdown);
      return;  // continue on its DOWN
    }
    st.teardown.erase(st.teardown.begin());
  }
  st.ingress = nullptr;
  st.decoder = nullptr;
  st.debouncer = nullptr;
  st.scraper = nullptr;
  st.emitter = nullptr;
  self->quit(st.exit_reason);
}

void begin_teardown(pipeline_self self, const caf::error& reason) {
  auto& st = self->state;
  if (st.tearing_down) return;
  st.tearing_down = true;
  st.shutting_down = true;
  st.exit_reason = reason;
  const auto add = [&](const auto& hdl) {
    if (hdl) st.teardown.push_back(caf::actor_cast<caf::actor>(hdl));
  };
  add(st.ingress);
  add(st.decoder);
  add(st.debouncer);
  add(st.scraper);
  add(st.emitter);
  // A child that does not go down in time is killed; the supervisor never hangs shutdown.
  self->delayed_send(self, std::chrono::seconds(3), atom::restart_v, std::string("teardown"));
  stop_next(self);
}

void on_down(pipeline_self self, const caf::down_msg& m) {
  auto& st = self->state;
  if (!m.source) return;
  if (st.tearing_down) {
    if (!st.teardown.empty() && m.source == st.teardown.front().address()) {
      st.teardown.erase(st.teardown.begin());
      stop_next(self);
    }
    return;
  }
  if (st.shutting_down) return;  // draining: no restarts
  const auto is = [&](const auto& hdl) { return hdl && m.source == hdl.address(); };
  if (is(st.emitter)) {
    st.emitter = nullptr;
    schedule_restart(self, "emitter", m.reason);
  } else if (is(st.scraper)) {
    st.scraper = nullptr;
    schedule_restart(self, "scraper", m.reason);
  } else if (is(st.debouncer) || is(st.decoder) || is(st.ingress)) {
    // The data path goes down as a whole; the others are stopped (their DOWNs no longer match).
    const auto stop = [&](auto& hdl) {
      if (hdl && m.source != hdl.address()) self->send_exit(hdl, caf::exit_reason::user_shutdown);
      hdl = nullptr;
    };
    stop(st.ingress);
    stop(st.decoder);
    stop(st.debouncer);
    schedule_restart(self, "datapath", m.reason);
  }
}

void restart(pipeline_self self, const std::string& unit) {
  auto& st = self->state;
  if (unit == "teardown") {  // teardown deadline: kill whatever is left, then go
    if (st.teardown.empty()) return;
    for (auto& h : st.teardown)
      if (h) self->send_exit(h, caf::exit_reason::kill);
    st.teardown.clear();
    stop_next(self);
    return;
  }
  auto& r = st.records[unit];
  r.pending = false;
  if (st.shutting_down) return;
  if (unit == "emitter") {
    spawn_emitter_child(self);
    if (!st.emitter) {
      schedule_restart(self, "emitter", caf::make_error(caf::sec::runtime_error, r.last_error));
      return;
    }
    // Units in flight to the old emitter are treated as lost by the debouncer (it resyncs).
    if (st.debouncer) self->send(st.debouncer, atom::update_v, st.emitter);
    if (st.scraper) self->send(st.scraper, atom::update_v, st.emitter);
  } else if (unit == "scraper") {
    spawn_scraper_child(self);
  } else if (unit == "datapath") {
    spawn_datapath(self);
  }
  log::info("actor restarted", {{"pipeline", st.ctx.name}, {"unit", unit},
                                {"restarts", r.restarts}});
}

std::vector<std::pair<std::string, actor_status::value>> supervision_of(const restart_record& r) {
  const int64_t uptime =
      std::chrono::duration_cast<std::chrono::seconds>(clock::now() - r.started).count();
  return {{"restarts", int64_t{r.restarts}}, {"last_error", r.last_error}, {"uptime_s", uptime}};
}

bool ready(const pipeline_state& st) {
  return (st.first_batch || st.catchup_done) && st.server_ok && !st.unhealthy;
}

// Why the pipeline is not ready, in words an operator can act on (empty when ready).
std::vector<std::string> not_ready_reasons(const pipeline_state& st) {
  std::vector<std::string> out;
  if (!st.first_batch && !st.catchup_done)
    out.emplace_back("no batch decoded and no catch-up finished yet");
  if (!st.server_ok) out.emplace_back("the policy server has not acknowledged yet");
  if (st.unhealthy) out.emplace_back("restarts over the intensity limit; retrying slowly");
  if (st.index_incomplete) out.emplace_back(st.index_incomplete);  // "degraded (still ready)"
  return out;
}

constexpr const char* incomplete_since_start =
    "degraded (still ready): index incomplete since start: the engine's replay ring did not "
    "reach back to its first batch, so what it cached before is unknown until it clears its "
    "cache";
constexpr const char* incomplete_since_loss =
    "degraded (still ready): index incomplete since engine history was lost: what the engine "
    "cached before the loss is unknown until it clears its cache";

void on_health(pipeline_state& st, health_fact f) {
  const char* was = st.index_incomplete;
  switch (f) {
    case health_fact::batch_decoded: st.first_batch = true; break;
    case health_fact::catchup_done: st.catchup_done = true; break;
    case health_fact::engine_connected: st.engine_connected = true; break;
    case health_fact::engine_disconnected: st.engine_connected = false; break;
    case health_fact::server_ok: st.server_ok = true; break;
    case health_fact::server_failed: st.server_ok = false; break;
    case health_fact::history_complete: st.index_incomplete = nullptr; break;
    case health_fact::history_skipped: st.index_incomplete = incomplete_since_start; break;
    case health_fact::history_lost: st.index_incomplete = incomplete_since_loss; break;
    case health_fact::engine_cleared: st.index_incomplete = nullptr; break;
    case health_fact::engine_asleep: st.engine_asleep = true; st.index_incomplete = nullptr; break;
    case health_fact::engine_awake: st.engine_asleep = false; break;
  }
  if (was == st.index_incomplete) return;
  if (st.incomplete_gauge) st.incomplete_gauge->set(st.index_incomplete ? 1 : 0);
  if (!st.index_incomplete)
    log::info("index complete again: it matches the engine's cache",
              {{"pipeline", st.ctx.name}, {"because", to_string(f)}});
}

void drain(pipeline_self self, caf::typed_response_promise<bool> promise) {
  auto& st = self->state;
  st.shutting_down = true;
  if (!st.decoder || !st.debouncer) {
    if (st.ingress)
      self->request(st.ingress, st.opts.drain_timeout, atom::drain_v)
          .then([](bool) {}, [](caf::error&) {});
    promise.deliver(false);
    return;
  }
  auto deadline = st.opts.drain_timeout;
  // The decoder's drain answers after its shards': everything read so far has become ops in the
  // debouncer's mailbox by then. Then the debouncer flushes and waits for acks.
  auto decode_then_flush = [=]() mutable {
    auto& s = self->state;
    if (!s.decoder || !s.debouncer) {
      promise.deliver(false);
      return;
    }
    self->request(s.decoder, deadline, atom::drain_v)
        .then(
            [=](bool) mutable {
              auto& s2 = self->state;
              if (!s2.debouncer) {
                promise.deliver(false);
                return;
              }
              self->request(s2.debouncer, deadline, atom::drain_v)
                  .then([=](bool ok) mutable { promise.deliver(ok); },
                        [=](caf::error&) mutable { promise.deliver(false); });
            },
            [=](caf::error&) mutable { promise.deliver(false); });
  };
  if (!st.ingress) {
    decode_then_flush();
    return;
  }
  // Stop reading first. The ingress still reads what the engine already sent and answers the
  // drain only once its source stopped: every batch it read is then in the decoder's mailbox,
  // ahead of our drain request to the decoder.
  self->request(st.ingress, deadline, atom::drain_v)
      .then([=](bool) mutable { decode_then_flush(); },
            [=](caf::error&) mutable { decode_then_flush(); });
}

pipeline_actor::behavior_type pipeline_fn(pipeline_self self, pipeline_context ctx,
                                          pipeline_options opts) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.ctx.health = caf::actor_cast<health_listener_actor>(self);
  st.opts = std::move(opts);
  st.incomplete_gauge = &st.ctx.gauge(
      "kvrelay_index_incomplete",
      "1 while the index cannot know all the engine holds (history skipped at start or lost)");
  self->set_down_handler([=](caf::down_msg& m) { on_down(self, m); });
  self->set_exit_handler([=](caf::exit_msg& m) { begin_teardown(self, m.reason); });
  // Children die with their supervisor.
  self->attach_functor([=](const caf::error&) {
    auto& s = self->state;
    if (s.ingress) caf::anon_send_exit(s.ingress, caf::exit_reason::user_shutdown);
    if (s.decoder) caf::anon_send_exit(s.decoder, caf::exit_reason::user_shutdown);
    if (s.debouncer) caf::anon_send_exit(s.debouncer, caf::exit_reason::user_shutdown);
    if (s.scraper) caf::anon_send_exit(s.scraper, caf::exit_reason::user_shutdown);
    if (s.emitter) caf::anon_send_exit(s.emitter, caf::exit_reason::user_shutdown);
  });
  spawn_emitter_child(self);
  spawn_datapath(self);
  spawn_scraper_child(self);
  return {
      [=](atom::status) -> caf::result<actor_status> {
        auto& s = self->state;
        actor_status j("pipeline", self->mailbox().size());
        j.add("pipeline", s.ctx.name);
        j.add("replica_id", s.ctx.identity.replica_id);
        j.add("ready", ready(s));
        j.add("not_ready", not_ready_reasons(s));
        j.add("unhealthy", s.unhealthy);
        j.add("engine_connected", s.engine_connected);
        j.add("server_ok", s.server_ok);
        j.add("index_incomplete", s.index_incomplete ? s.index_incomplete : "");
        j.add("engine_asleep", s.engine_asleep);
        actor_status::string_map adapters;
        for (const auto& [id, name] : s.opts.decoder.adapters)
          adapters.emplace_back(std::to_string(id), name);
        j.add("adapters", std::move(adapters));
        const auto extra = [&](const char* unit) { return supervision_of(s.records[unit]); };
        std::vector<status_child> kids{
            {"ingress", s.ingress, extra("datapath")},
            {"decoder", s.decoder, extra("datapath")},
            {"debouncer", s.debouncer, extra("datapath")},
            {"emitter", s.emitter, extra("emitter")},
        };
        if (s.opts.scraper) kids.push_back({"scraper", s.scraper, extra("scraper")});
        auto p = self->make_response_promise<actor_status>();
        fan_out_status(self, std::move(j), std::move(kids), p);
        return p;
      },
      [=](health_fact f) {
        on_health(self->state, f);
        // A sleeping engine discarded its cache: clear like AllBlocksCleared (decoder's epoch).
        if (f == health_fact::engine_asleep && self->state.decoder)
          self->send(self->state.decoder,
                     std::make_shared<const ingress_notice>(
                         ingress_notice{ingress_notice::kind::engine_asleep, 0, 0, ""}));
      },
      [=](atom::ready) {
        auto& s = self->state;
        return caf::make_result(ready(s), not_ready_reasons(s));
      },
      [=](atom::restart, const std::string& unit) { restart(self, unit); },
      [=](atom::crash, const std::string& who) -> caf::result<bool> {
        auto& s = self->state;
        if (who == "emitter" && s.emitter) self->send(s.emitter, atom::crash_v);
        else if (who == "scraper" && s.scraper) self->send(s.scraper, atom::crash_v);
        else if (who == "decoder" && s.decoder) self->send(s.decoder, atom::crash_v);
        else if (who == "ingress" && s.ingress) self->send(s.ingress, atom::crash_v);
        else if (who == "debouncer" && s.debouncer) self->send(s.debouncer, atom::crash_v);
        else if (who == "shard" && s.decoder) return self->delegate(s.decoder, atom::crash_v, who);
        else return false;
        return true;
      },
      [=](atom::drain) -> caf::result<bool> {
        auto p = self->make_response_promise<bool>();
        drain(self, p);
        return p;
      },
      [=](atom::adapter, int64_t id, std::string& name) {
        auto& s = self->state;
        s.opts.decoder.adapters[id] = name;  // survives data-path restarts
        if (s.decoder) self->send(s.decoder, atom::adapter_v, id, name);
      },
  };
}

}  // namespace

pipeline_actor spawn_pipeline(caf::actor_system& sys, const pipeline_context& ctx,
                              const pipeline_options& opts, std::string& error) {
  error = policy_client::validate(opts.emitter.client);
  if (!error.empty()) return {};
  return sys.spawn(pipeline_fn, ctx, opts);
}

}  // namespace kvrelay
