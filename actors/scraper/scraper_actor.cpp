// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/scraper/scraper_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <pthread.h>


#include "actors/scraper/stats_tracker.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "base/tsan.hpp"
#include "base/worker_bridge.hpp"
#include "net/http_fetch.hpp"

namespace kvrelay {

namespace {

/// GETs on a worker thread (base/worker_bridge.hpp), one at a time, each result posted back to the
/// actor. Detached at close (WB4): a GET to a hung engine lasts the whole HTTP timeout, and
/// joining it blocked a CAF scheduler thread, the scraper's restart and daemon shutdown that long.
class fetch_worker final : public fetch_port {
 public:
  fetch_worker(std::string url, http_fetch_options opts, scraper_actor owner)
      : fetcher_(std::make_shared<http_fetcher>(std::move(url), opts)),
        bridge_(worker_options{"kvr.scrape", worker_options::threads::serial,
                               worker_options::on_close::detach, /*skip_when_busy=*/true},
                [owner = std::move(owner)](fetch_result r) {
                  caf::anon_send(owner, atom::fetched_v, r.ok, static_cast<int32_t>(r.status),
                                 std::move(r.body), std::move(r.error));
                }) {}

  /// False when a fetch is still running (the tick is then skipped, not queued: WB5).
  bool request() override {
    return bridge_.submit([f = fetcher_] { return f->get(); });
  }

 private:
  std::shared_ptr<http_fetcher> fetcher_;  // the running GET co-owns it
  worker_bridge<fetch_result> bridge_;
};

void write(const log::record& r, const std::string& replica_id) {
  log::write(r, {{"replica", replica_id}});
}

struct scraper_state {
  static inline constexpr const char* name = "scraper";

  pipeline_context ctx;
  scraper_options opts;
  emitter_actor emitter;
  std::unique_ptr<scraper_logic> logic;
  stats_tracker tracker;
  std::unique_ptr<silent_stream_detector> silent;
  sleep_watch sleep;
  std::unique_ptr<fetch_port> worker;
  double batches_seen = 0;  // the decoder's kvrelay_batches_total at the previous tick
  uint64_t scrapes = 0, scrape_errors = 0, delivered = 0;
  std::string last_error;
  gauge_series* silent_gauge = nullptr;
  gauge_series* stale_gauge = nullptr;
  // The engine-state gauges, made when the engine first reports the value (a gauge at 0 would
  // read as "asleep: no" or "coverage: none" for an engine that says nothing).
  gauge_series* asleep_gauge = nullptr;
  gauge_series* capacity_gauge = nullptr;
  gauge_series* in_use_gauge = nullptr;
  gauge_series* coverage_capacity = nullptr;
  gauge_series* coverage_in_use = nullptr;

  ~scraper_state() { log::info("stats reporter stopped", {{"replica", ctx.name}}); }
};

using scraper_self = scraper_actor::stateful_pointer<scraper_state>;

void failed(scraper_self self, const std::string& why) {
  auto& st = self->state;
  st.last_error = why;
  write(st.tracker.failed(why), st.ctx.name);
  st.stale_gauge->set(st.tracker.stale() ? 1 : 0);
}

// Sets a gauge made on first use.
void set(gauge_series*& g, const pipeline_context& ctx, const char* name, const char* help,
         label_set labels, double v) {
  if (!g) g = &ctx.gauge(name, help, std::move(labels));
  g->set(v);
}

// Sleep transitions and the coverage gauges, from every body that parsed.
void on_engine_state(scraper_self self, const engine_cache_state& e) {
  auto& st = self->state;
  const auto& ctx = st.ctx;
  switch (st.sleep.tick(e.asleep)) {
    case sleep_watch::transition::fell_asleep:
      log::warn("engine asleep: sleep mode discards its KV cache; clearing this replica's hints",
                {{"replica", ctx.name}, {"event", "engine_asleep"}});
      if (ctx.health) self->send(ctx.health, health_fact::engine_asleep);
      break;
    case sleep_watch::transition::woke_up:
      log::info("engine awake: indexing its KV events again",
                {{"replica", ctx.name}, {"event", "engine_awake"}});
      if (ctx.health) self->send(ctx.health, health_fact::engine_awake);
      break;
    case sleep_watch::transition::none: break;
  }
  if (e.asleep)
    set(st.asleep_gauge, ctx, "kvrelay_engine_asleep",
        "1 while the engine's /metrics say it sleeps (its KV cache discarded)", {},
        *e.asleep ? 1 : 0);
  const char* blocks_help =
      "The engine's own KV-cache blocks, from its /metrics: capacity, and in use by running "
      "requests (cached blocks no request holds count as free)";
  const char* ratio_help =
      "kvrelay's resident blocks for this replica over the engine's capacity or in-use block "
      "count, clamped to 1 (the share of the engine's cache the index knows lies between them)";
  const double resident = std::max(0.0, ctx.metrics->sum("kvrelay_resident_blocks",
                                                         {{"replica", ctx.name}}));
  if (e.capacity_blocks) {
    set(st.capacity_gauge, ctx, "kvrelay_engine_cache_blocks", blocks_help,
        {{"kind", "capacity"}}, *e.capacity_blocks);
    set(st.coverage_capacity, ctx, "kvrelay_index_coverage_ratio", ratio_help,
        {{"of", "capacity"}}, *coverage_ratio(resident, e.capacity_blocks));
  }
  if (e.in_use_blocks) {
    set(st.in_use_gauge, ctx, "kvrelay_engine_cache_blocks", blocks_help, {{"kind", "in_use"}},
        *e.in_use_blocks);
    set(st.coverage_in_use, ctx, "kvrelay_index_coverage_ratio", ratio_help, {{"of", "in_use"}},
        *coverage_ratio(resident, e.in_use_blocks));
  }
}

void on_fetched(scraper_self self, bool ok, int32_t status, const std::string& body,
                const std::string& error) {
  auto& st = self->state;
  ++st.scrapes;
  if (!ok) {
    ++st.scrape_errors;
    failed(self, "scrape failed: " + error);
    return;
  }
  auto res = st.logic->scrape_response(status, body);
  on_engine_state(self, res.engine);
  // Silent stream: the engine counts prefix-cache queries, but no KV event reached us.
  // The decoder's own counter says whether batches arrived (read once per scrape).
  const double batches = st.ctx.metrics->value("kvrelay_batches_total", st.ctx.labels());
  auto t = st.silent->tick(res.prefix_cache_queries_total, batches != st.batches_seen);
  st.batches_seen = batches;
  if (t == silent_stream_detector::transition::raise) {
    log::warn("engine reports prefix-cache activity but no KV events arrive; is the engine "
              "started with KV events enabled, and is the endpoint right?",
              {{"replica", st.ctx.name}, {"event", "kv_events_silent"}});
    st.silent_gauge->set(1);
    if (st.ctx.health) self->send(st.ctx.health, health_fact::events_silent);
  } else if (t == silent_stream_detector::transition::clear) {
    log::info("KV events arriving again", {{"replica", st.ctx.name}});
    st.silent_gauge->set(0);
    if (st.ctx.health) self->send(st.ctx.health, health_fact::events_flowing);
  }
  if (!res.ok) {
    ++st.scrape_errors;
    failed(self, res.error);
    return;
  }
  auto sample = std::make_shared<stats_sample>();
  sample->cache_memory_bytes = res.stats.cache_memory_bytes;
  sample->hit_rate = static_cast<float>(res.stats.hit_rate);
  sample->pressure = static_cast<float>(res.stats.pressure);
  sample->t2_hit_tokens = res.stats.t2_hit_tokens;
  sample->t2_query_tokens = res.stats.t2_query_tokens;
  self->request(st.emitter, st.opts.rpc_timeout + std::chrono::seconds(1),
                stats_sample_ptr{std::move(sample)})
      .then(
          [=](bool accepted) {
            auto& s = self->state;
            if (!accepted) {
              failed(self, "policy server did not accept the stats update");
              return;
            }
            ++s.delivered;
            // Once per interval: the server answered, whatever the last unit said (readiness).
            if (s.ctx.health) self->send(s.ctx.health, health_fact::server_ok);
            if (auto rec = s.tracker.delivered()) write(*rec, s.ctx.name);
            s.stale_gauge->set(0);
          },
          [=](caf::error& err) { failed(self, "stats update failed: " + to_string(err)); });
}

scraper_actor::behavior_type scraper_fn(scraper_self self, pipeline_context ctx,
                                        scraper_options opts, emitter_actor emitter) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.opts = std::move(opts);
  st.emitter = std::move(emitter);
  st.logic = std::make_unique<scraper_logic>(st.opts.profile);
  st.silent = std::make_unique<silent_stream_detector>(st.opts.silent_intervals);
  const auto me = caf::actor_cast<scraper_actor>(self);
  if (st.opts.make_fetcher)
    st.worker = st.opts.make_fetcher(me);
  else
    st.worker = std::make_unique<fetch_worker>(
        st.opts.url, http_fetch_options{st.opts.http_timeout, 16u << 20}, me);
  st.silent_gauge = &st.ctx.gauge(
      "kvrelay_engine_events_silent",
      "1 when the engine shows prefix-cache activity but no KV events arrive");
  st.stale_gauge = &st.ctx.gauge(
      "kvrelay_stats_stale", "1 after 3 consecutive stats ticks without a delivered sample");
  if (!st.logic->warning().empty())
    log::warn(st.logic->warning(), {{"replica", st.ctx.name}});
  write(stats_tracker::starting(st.opts.interval.count()), st.ctx.name);
  // The first tick comes after one interval, not at start (S13).
  self->delayed_send(self, st.opts.interval, atom::scrape_v);
  return {
      [=](atom::scrape) {
        auto& s = self->state;
        if (!s.worker->request()) failed(self, "previous scrape still running");
        self->delayed_send(self, s.opts.interval, atom::scrape_v);
      },
      [=](atom::fetched, bool ok, int32_t status, const std::string& body, const std::string& err) {
        on_fetched(self, ok, status, body, err);
      },
      [=](atom::update, emitter_actor e) { self->state.emitter = std::move(e); },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) {
        auto& s = self->state;
        actor_status j("scraper", self->mailbox().size());
        j.add("url", s.opts.url);
        j.add("profile", to_string(s.logic->profile()));
        j.add("scrapes", s.scrapes);
        j.add("scrape_errors", s.scrape_errors);
        j.add("delivered", s.delivered);
        j.add("consecutive_failures", s.tracker.consecutive_failures());
        j.add("stale", s.tracker.stale());
        j.add("events_silent", s.silent->alarmed());
        j.add("engine_asleep", s.sleep.asleep());
        j.add("last_error", s.last_error);
        tsan::handoff_publish();  // read on the asker's thread
        return j;
      },
  };
}

}  // namespace

scraper_actor spawn_scraper(caf::actor_system& sys, const pipeline_context& ctx,
                            const scraper_options& opts, emitter_actor emitter) {
  return sys.spawn(scraper_fn, ctx, opts, std::move(emitter));
}

}  // namespace kvrelay
