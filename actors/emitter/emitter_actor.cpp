#include "actors/emitter/emitter_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "base/fingerprint.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.pb.h"
#include "base/clock.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"

namespace ic = inferencecache::v1alpha1;

namespace kvrelay {

namespace {


int64_t non_negative(int64_t us) { return us > 0 ? us : 0; }

ic::CacheTier to_proto(tier t) { return static_cast<ic::CacheTier>(static_cast<int>(t)); }

const char* code_name(int code) {
  static const char* names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? names[code] : "UNKNOWN";
}

enum class call_kind : uint8_t { clear, report, downgrade, evict, stats };

const char* method_of(call_kind k) {
  return k == call_kind::clear || k == call_kind::evict ? "PublishEvent" : "ReportCacheState";
}

/// RPC completions, handed from gRPC threads to the actor. One CAF message wakes the actor per
/// batch of completions instead of one per RPC: under eviction load (one PublishEvent per
/// prefix) the per-message wake-ups were half the emitter's cost.
class completion_inbox {
 public:
  struct item {
    uint64_t call;
    int32_t code;
    std::string message;
    bool accepted;
    int64_t latency_us;
  };
  /// True when the inbox was empty: the caller must then wake the actor.
  bool push(item it) {
    std::lock_guard<std::mutex> lk(mu_);
    items_.push_back(std::move(it));
    return items_.size() == 1;
  }
  std::vector<item> take() {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<item> out;
    out.swap(items_);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<item> items_;
};

struct emitter_state {
  static inline constexpr const char* name = "emitter";

  pipeline_context ctx;
  emitter_options opts;
  std::shared_ptr<policy_client> client;
  std::shared_ptr<completion_inbox> inbox = std::make_shared<completion_inbox>();

  // The unit being sent and the ones queued behind it (the debouncer bounds this by credits).
  struct queued {
    emit_unit_ptr unit;
    caf::strong_actor_ptr reply_to;
  };
  std::deque<queued> queue;
  bool clear_done = false;      // current unit: the ALL_CLEARED step finished
  bool body_started = false;    // current unit: adds/downgrades/evicts issued
  size_t next_evict = 0;        // current unit: next eviction to issue
  size_t outstanding = 0;       // current unit: RPCs in flight
  uint32_t failed = 0;          // current unit: RPCs that failed
  std::string last_error;

  uint64_t next_call = 1;
  struct call_info {
    call_kind kind;
    int64_t engine_ts_us;  // for event age (0 = unknown)
  };
  std::unordered_map<uint64_t, call_info> calls;
  std::unordered_map<uint64_t, caf::typed_response_promise<bool>> stats_promises;

  uint64_t units_done = 0, units_failed = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

using emitter_self = emitter_actor::stateful_pointer<emitter_state>;

void pump(emitter_self self);

// Issues one RPC; its completion comes back as (done, call, ...) on the actor's mailbox.
template <class Msg>
void issue(emitter_self self, call_kind kind, std::shared_ptr<const Msg> msg,
           int64_t engine_ts_us) {
  auto& st = self->state;
  const uint64_t call = st.next_call++;
  st.calls.emplace(call, emitter_state::call_info{kind, engine_ts_us});
  // The callback runs on a gRPC thread: it may only use the shared inbox and send to the
  // handle, never touch state.
  auto hdl = caf::actor_cast<emitter_actor>(self);
  auto done = [hdl, call, inbox = st.inbox](rpc_result r) {
    if (inbox->push({call, static_cast<int32_t>(r.code), std::move(r.message), r.accepted,
                     static_cast<int64_t>(r.latency.count())}))
      caf::anon_send(hdl, atom::completed_v);
  };
  if constexpr (std::is_same_v<Msg, ic::CacheEvent>)
    st.client->publish(std::move(msg), std::move(done));
  else
    st.client->report(std::move(msg), std::move(done));
}

std::shared_ptr<ic::CacheStateUpdate> new_update(const emitter_state& st, int64_t ts_us) {
  auto u = std::make_shared<ic::CacheStateUpdate>();
  u->set_replica_id(st.ctx.identity.replica_id);
  u->set_model_id(st.ctx.identity.model_id);
  u->set_tenant_id(st.ctx.identity.tenant_id);
  u->set_hash_scheme(st.ctx.identity.hash_scheme);
  u->set_timestamp_us(non_negative(ts_us));
  return u;
}

void add_entries(ic::CacheStateUpdate& u, const std::vector<prefix_add>& entries) {
  u.mutable_prefixes()->Reserve(static_cast<int>(entries.size()));
  for (const auto& e : entries) {
    auto* p = u.add_prefixes();
    char key[8];
    fingerprint::write_be8(e.fingerprint, key);
    p->set_prefix_hash(key, sizeof key);
    p->set_token_count(static_cast<int32_t>(e.token_count));
    p->set_tier(to_proto(e.t));
    if (!e.adapter.empty()) p->set_adapter_id(e.adapter);  // "" is the proto3 default anyway
  }
}

std::shared_ptr<ic::CacheEvent> new_event(const emitter_state& st, ic::CacheEvent::Type type,
                                          int64_t ts_us) {
  auto e = std::make_shared<ic::CacheEvent>();
  e->set_type(type);
  e->set_replica_id(st.ctx.identity.replica_id);
  e->set_model_id(st.ctx.identity.model_id);
  e->set_tenant_id(st.ctx.identity.tenant_id);
  e->set_timestamp_us(non_negative(ts_us));
  return e;
}

void issue_evictions(emitter_self self) {
  auto& st = self->state;
  const auto& unit = *st.queue.front().unit;
  while (st.next_evict < unit.evicts.size() && st.outstanding < st.opts.max_evictions_in_flight) {
    const auto& ev = unit.evicts[st.next_evict++];
    auto e = new_event(st, ic::CacheEvent::PREFIX_EVICTED, ev.ts_us);
    e->set_prefix_hash(fingerprint::to_be8(ev.fingerprint));
    e->set_adapter_id(ev.adapter);
    ++st.outstanding;
    issue<ic::CacheEvent>(self, call_kind::evict, std::move(e), 0);
  }
}

void finish_unit(emitter_self self) {
  auto& st = self->state;
  auto q = std::move(st.queue.front());
  st.queue.pop_front();
  emit_result r{q.unit->id, st.failed == 0, st.failed, true, st.last_error};
  if (r.ok) ++st.units_done;
  else ++st.units_failed;
  if (q.reply_to) caf::anon_send(caf::actor_cast<debouncer_actor>(q.reply_to), std::move(r));
  st.clear_done = st.body_started = false;
  st.next_evict = st.outstanding = 0;
  st.failed = 0;
}

// Advances the unit at the head of the queue as far as ordering allows.
void pump(emitter_self self) {
  auto& st = self->state;
  while (!st.queue.empty()) {
    const auto& unit = *st.queue.front().unit;
    if (unit.clear && !st.clear_done) {
      if (st.outstanding == 0) {
        ++st.outstanding;
        issue<ic::CacheEvent>(self, call_kind::clear,
                              new_event(st, ic::CacheEvent::ALL_CLEARED, unit.clear_ts_us), 0);
      }
      return;  // nothing after a clear may start before the server has it
    }
    if (!st.body_started) {
      st.body_started = true;
      if (!unit.adds.empty()) {
        auto u = new_update(st, unit.adds_ts_us);
        add_entries(*u, unit.adds);
        ++st.outstanding;
        issue<ic::CacheStateUpdate>(self, call_kind::report, std::move(u), unit.adds_ts_us);
      }
      for (const auto& g : unit.downgrades) {
        auto u = new_update(st, g.ts_us);
        add_entries(*u, g.entries);
        ++st.outstanding;
        issue<ic::CacheStateUpdate>(self, call_kind::downgrade, std::move(u), 0);
      }
    }
    issue_evictions(self);
    if (st.outstanding > 0 || st.next_evict < unit.evicts.size()) return;
    finish_unit(self);
  }
}

void on_done(emitter_self self, uint64_t call, int32_t code, const std::string& msg,
             bool accepted, int64_t latency_us) {
  auto& st = self->state;
  auto it = st.calls.find(call);
  if (it == st.calls.end()) return;
  auto info = it->second;
  st.calls.erase(it);
  const char* method = method_of(info.kind);
  const auto& m = st.ctx;
  const auto& rid = st.ctx.name;
  m.counter("kvrelay_rpc_total", "RPCs to the policy server by method and gRPC code",
            {{"method", method}, {"code", code_name(code)}})
      .inc();
  m.histogram("kvrelay_rpc_latency_seconds", "RPC latency to the policy server",
              metrics_registry::latency_buckets(), {{"method", method}})
      .observe(static_cast<double>(latency_us) / 1e6);
  if (info.kind == call_kind::stats) {
    auto p = st.stats_promises.find(call);
    if (p != st.stats_promises.end()) {
      // The stats path counts accepted=false as a failure (S08); the event path ignores it.
      p->second.deliver(code == 0 && accepted);
      st.stats_promises.erase(p);
    }
    if (code != 0)
      log::warn("stats report failed", {{"replica", rid}, {"code", code_name(code)},
                                        {"err", msg}});
    return;
  }
  if (code == 0 && info.engine_ts_us > 0) {
    double age = static_cast<double>(st.ctx.wall_us() - info.engine_ts_us) / 1e6;
    if (age >= 0)
      m.histogram("kvrelay_event_age_seconds",
                  "Engine batch time to policy-server acknowledgement", 
                  metrics_registry::latency_buckets())
          .observe(age);
  }
  if (st.outstanding > 0) --st.outstanding;
  if (info.kind == call_kind::clear) st.clear_done = true;
  if (code != 0) {
    ++st.failed;
    st.last_error = std::string(code_name(code)) + ": " + msg;
    // Same texts as the reference so existing alerts keep matching (R14).
    log::warn(info.kind == call_kind::report || info.kind == call_kind::downgrade
                  ? "report send failed; dropping batch"
                  : "publish event failed; dropping",
              {{"replica", rid}, {"code", code_name(code)}, {"err", msg}});
  }
  pump(self);
}

emitter_actor::behavior_type emitter_fn(emitter_self self, pipeline_context ctx,
                                        emitter_options opts,
                                        std::shared_ptr<policy_client> client) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.opts = std::move(opts);
  st.client = std::move(client);
  st.client->try_connect();
  return {
      [=](emit_unit_ptr unit) {
        auto& s = self->state;
        s.queue.push_back({std::move(unit), self->current_sender()});
        if (s.queue.size() == 1) pump(self);
      },
      [=](stats_sample_ptr stats) -> caf::result<bool> {
        auto& s = self->state;
        auto u = new_update(s, s.ctx.wall_us());  // stats carry the daemon's clock (S13)
        auto* out = u->mutable_stats();
        out->set_replica_id(s.ctx.identity.replica_id);
        out->set_cache_memory_bytes(stats->cache_memory_bytes);
        out->set_hit_rate(stats->hit_rate);
        out->set_pressure(stats->pressure);
        out->set_t2_hit_tokens(stats->t2_hit_tokens);
        out->set_t2_query_tokens(stats->t2_query_tokens);
        auto promise = self->make_response_promise<bool>();
        const uint64_t call = s.next_call;
        s.stats_promises.emplace(call, promise);
        issue<ic::CacheStateUpdate>(self, call_kind::stats, std::move(u), 0);
        return promise;
      },
      [=](atom::completed) {
        for (auto& c : self->state.inbox->take())
          on_done(self, c.call, c.code, c.message, c.accepted, c.latency_us);
      },
      [=](atom::update, reconnect_listener_actor) {},  // wired up by the reconnect work
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) {
        auto& s = self->state;
        actor_status j("emitter", self->mailbox().size());
        j.add("target", s.opts.client.target);
        j.add("channel", s.client->channel_state());
        j.add("in_flight", s.client->in_flight());
        j.add("queued_units", s.queue.size());
        j.add("units_done", s.units_done);
        j.add("units_failed", s.units_failed);
        j.add("last_error", s.last_error);
        return j;
      },
  };
}

}  // namespace

emitter_actor spawn_emitter(caf::actor_system& sys, const pipeline_context& ctx,
                            const emitter_options& opts, std::string& error) {
  // The client is built here, not in the actor, so a bad TLS file is an error for the caller
  // instead of an actor that dies on start.
  std::shared_ptr<policy_client> client = policy_client::make(opts.client, error);
  if (!client) return {};
  return sys.spawn(emitter_fn, ctx, opts, std::move(client));
}

}  // namespace kvrelay
