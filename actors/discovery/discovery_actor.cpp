// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/discovery/discovery_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <pthread.h>

#include <map>

#include "base/log.hpp"
#include "base/tsan.hpp"
#include "base/worker_bridge.hpp"

namespace kvrelay {

namespace {

/// A thread per fetch (base/worker_bridge.hpp WB3: a hung engine's fetch delays no other
/// engine's), detached at close (WB4: a fetch of a hung engine lasts its whole timeout, and
/// joining would hold a CAF worker, and shutdown, that long).
class fetch_threads final : public discovery_fetch_port {
 public:
  explicit fetch_threads(discovery_actor owner)
      : bridge_(worker_options{"kvr.discover", worker_options::threads::per_job,
                               worker_options::on_close::detach, false},
                [owner = std::move(owner)](std::pair<uint64_t, discovery_fetch_ptr> r) {
                  caf::anon_send(owner, atom::fetched_v, r.first, std::move(r.second));
                }) {}

  void fetch(uint64_t engine, const std::string& url,
             const discovery::fetch_options& opts) override {
    bridge_.submit([engine, url, opts] {
      return std::make_pair(engine, discovery_fetch_ptr{std::make_shared<const discovery_fetch>(
                                        discovery_fetch{discovery::fetch_and_discover(url, opts)})});
    });
  }

 private:
  worker_bridge<std::pair<uint64_t, discovery_fetch_ptr>> bridge_;
};

struct watched {
  uint64_t index = 0;
  std::unique_ptr<discovery::engine_watch> watch;
  int64_t last_fetch_unix_ms = 0;  // when the last fetch's result arrived (0 = none yet)
};

struct discovery_state {
  static inline constexpr const char* name = "discovery";

  pipeline_context ctx;
  discovery_options opts;
  discovery_listener_actor listener;
  std::unique_ptr<discovery_fetch_port> port;
  std::map<uint64_t, watched> engines;  // by config index
  uint64_t updates_sent = 0;
};

using discovery_self = discovery_actor::stateful_pointer<discovery_state>;

void send_update(discovery_self self, const watched& w, std::shared_ptr<const discovered_target> t,
                 std::string waiting) {
  auto& st = self->state;
  auto u = std::make_shared<discovery_update>();
  u->engine = static_cast<size_t>(w.index);
  u->url = w.watch->request().url;
  u->target = std::move(t);
  u->waiting = std::move(waiting);
  ++st.updates_sent;
  tsan::handoff_publish();
  if (st.listener) self->send(st.listener, discovery_update_ptr{std::move(u)});
}

void execute(discovery_self self, watched& w, discovery::watch_actions& actions) {
  auto& st = self->state;
  using kind = discovery::watch_action::kind;
  for (auto& a : actions) {
    switch (a.what) {
      case kind::fetch:
        if (a.delay.count() > 0) {
          self->delayed_send(self, a.delay, atom::discover_v, w.index, a.gen);
        } else {
          discovery::fetch_options fo;
          fo.timeout = st.opts.http_timeout;
          fo.want_model = !w.watch->request().model_id.has_value();
          st.port->fetch(w.index, w.watch->request().url, fo);
        }
        break;
      case kind::retarget:
        send_update(self, w, a.target, {});
        break;
      case kind::readiness:
        // "" comes with the retarget that follows it; only a reason is news on its own.
        if (!a.text.empty()) send_update(self, w, nullptr, a.text);
        break;
      case kind::log:
        log::write(a.level, a.text, a.fields);
        break;
    }
  }
  actions.clear();
}

actor_status engine_status(const watched& w) {
  const auto& e = *w.watch;
  actor_status s("engine_watch", 0);
  s.name = e.request().url;
  s.add("engine", w.index);
  s.add("url", e.request().url);
  s.add("state", to_string(e.state()));
  s.add("fetching", e.fetching());
  s.add("waiting", e.waiting_reason());
  s.add("last_error", e.last_error());
  s.add("last_fetch_unix_ms", w.last_fetch_unix_ms);
  s.add("retries", e.failures_in_a_row());
  const auto& c = e.counters();
  s.add("fetches", c.fetches);
  s.add("failures", c.failures);
  s.add("retargets", c.retargets);
  s.add("stream_stops", c.stops);
  actor_status::string_list stopped;
  for (int64_t r : e.stopped_ranks()) stopped.push_back(std::to_string(r));
  s.add("stopped_ranks", std::move(stopped));
  if (const auto& t = e.target()) {
    s.add("dialect", t->dialect);
    s.add("model_id", t->model_id.value);
    actor_status::string_list eps;
    for (const auto& r : t->ranks)
      eps.push_back(std::to_string(r.dp_rank) + " " + r.endpoint.value);
    s.add("endpoints", std::move(eps));
  }
  return s;
}

discovery_actor::behavior_type discovery_fn(discovery_self self, pipeline_context ctx,
                                            discovery_options opts,
                                            discovery_listener_actor listener) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.opts = std::move(opts);
  st.listener = std::move(listener);
  const auto me = caf::actor_cast<discovery_actor>(self);
  st.port = st.opts.make_fetcher ? st.opts.make_fetcher(me) : std::make_unique<fetch_threads>(me);
  for (const auto& e : st.opts.engines) {
    discovery::watch_options wo;
    wo.retry_initial = st.opts.retry_initial;
    wo.retry_max = e.retry_max;
    wo.seed = std::random_device{}();
    auto& w = st.engines[e.index];
    w.index = e.index;
    w.watch = std::make_unique<discovery::engine_watch>(e.request, wo);
  }
  for (auto& [idx, w] : st.engines) {
    discovery::watch_actions out;
    w.watch->start(out);
    execute(self, w, out);
  }
  const auto with = [self](uint64_t engine, auto&& f) {
    auto it = self->state.engines.find(engine);
    if (it == self->state.engines.end()) return;
    discovery::watch_actions out;
    f(*it->second.watch, out);
    execute(self, it->second, out);
  };
  return {
      [=](atom::stream, uint64_t engine, int64_t rank, bool flowing, const std::string& why) {
        with(engine, [&](discovery::engine_watch& w, discovery::watch_actions& out) {
          if (flowing)
            w.on_stream_flowing(rank);
          else
            w.on_stream_stopped(rank, why, out);
        });
      },
      [=](atom::fetched, uint64_t engine, const discovery_fetch_ptr& r) {
        tsan::handoff_consume();
        const int64_t now_ms = self->state.ctx.wall_us() / 1000;
        if (auto it = self->state.engines.find(engine); it != self->state.engines.end())
          it->second.last_fetch_unix_ms = now_ms;
        with(engine, [&](discovery::engine_watch& w, discovery::watch_actions& out) {
          w.on_fetched(r->result, now_ms, out);
        });
      },
      [=](atom::discover, uint64_t engine, uint64_t gen) {
        with(engine, [&](discovery::engine_watch& w, discovery::watch_actions& out) {
          w.on_timer(gen, out);
        });
      },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) {
        auto& s = self->state;
        actor_status j("discovery", self->mailbox().size());
        j.add("engines", s.engines.size());
        j.add("updates_sent", s.updates_sent);
        for (const auto& [idx, w] : s.engines) j.children.push_back(engine_status(w));
        tsan::handoff_publish();  // read on the asker's thread
        return j;
      },
  };
}

}  // namespace

discovery_actor spawn_discovery(caf::actor_system& sys, const pipeline_context& ctx,
                                const discovery_options& opts,
                                discovery_listener_actor listener) {
  return sys.spawn(discovery_fn, ctx, opts, std::move(listener));
}

}  // namespace kvrelay
