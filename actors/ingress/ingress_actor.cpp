// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/ingress/ingress_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <atomic>
#include <chrono>
#include <string_view>
#include <vector>

#include "base/counter_table.hpp"
#include "base/log.hpp"
#include "base/metrics_registry.hpp"
#include "base/tsan.hpp"

namespace kvrelay {

namespace {

// Counters are published when they changed, then at most once per this interval while they keep
// changing (or batches are in flight); an idle source costs no wake-up at all.
constexpr auto publish_cooldown = std::chrono::seconds(1);
// Shutdown: what the engine already sent is read until the socket is quiet this long, at most
// drain_read_max (an engine that never pauses must not hold the shutdown).
constexpr auto drain_poll = std::chrono::milliseconds(20);
constexpr auto drain_read_max = std::chrono::seconds(1);

// Every counter the ingress publishes, declared once: one row per series (base/counter_table.hpp).
constexpr const char* replays_help = "Replay requests by outcome";
constexpr const char* bad_help = "Malformed ZMQ messages dropped, by reason";

constexpr counter_row<ingress::tracker_counters> tracker_rows[] = {
    {"kvrelay_seq_gaps_total", "Sequence gaps seen on the live stream", nullptr, nullptr,
     &ingress::tracker_counters::gaps},
    {"kvrelay_replays_total", replays_help, "outcome", "requested",
     &ingress::tracker_counters::replays_requested},
    {"kvrelay_replays_total", replays_help, "outcome", "succeeded",
     &ingress::tracker_counters::replays_succeeded},
    {"kvrelay_replays_total", replays_help, "outcome", "failed",
     &ingress::tracker_counters::replays_failed},
    {"kvrelay_replays_total", replays_help, "outcome", "continued",
     &ingress::tracker_counters::replays_continued},
    {"kvrelay_replay_holes_total",
     "Replay replies that skipped seqs the engine's socket dropped past its high-water mark "
     "(each asked for again, not a loss)",
     nullptr, nullptr, &ingress::tracker_counters::replay_holes},
    {"kvrelay_batches_recovered_total", "Batches recovered through replay", nullptr, nullptr,
     &ingress::tracker_counters::batches_recovered},
    {"kvrelay_batches_lost_total", "Batches that could not be recovered (pipeline cleared)",
     nullptr, nullptr, &ingress::tracker_counters::batches_lost},
    {"kvrelay_history_lost_total", "Unrecoverable gaps (each clears the pipeline)", nullptr,
     nullptr, &ingress::tracker_counters::history_lost},
    {"kvrelay_history_skipped_batches_total",
     "Engine batches before the first one delivered that no replay could supply: what the "
     "engine cached in them is unknown to the index",
     nullptr, nullptr, &ingress::tracker_counters::cold_skipped},
    {"kvrelay_incarnation_resets_total", "Engine restarts seen as sequence resets", nullptr,
     nullptr, &ingress::tracker_counters::resets},
    {"kvrelay_replay_shed_batches_total",
     "Live batches shed from a full reorder buffer during a replay, read from the ring again",
     nullptr, nullptr, &ingress::tracker_counters::batches_shed},
    {"kvrelay_duplicate_batches_total", "Batches seen twice (dropped)", nullptr, nullptr,
     &ingress::tracker_counters::duplicates},
};

constexpr counter_row<ingress::frame_counters> frame_rows[] = {
    {"kvrelay_bad_frames_total", bad_help, "reason", "frame_count",
     &ingress::frame_counters::bad_frame_count},
    {"kvrelay_bad_frames_total", bad_help, "reason", "seq_size",
     &ingress::frame_counters::bad_seq_size},
    {"kvrelay_bad_frames_total", bad_help, "reason", "reserved_seq",
     &ingress::frame_counters::reserved_seq},
    {"kvrelay_bad_frames_total", bad_help, "reason", "replay_malformed",
     &ingress::frame_counters::replay_malformed},
    {"kvrelay_bad_frames_total", bad_help, "reason", "replay_bad_end",
     &ingress::frame_counters::replay_bad_end},
    {"kvrelay_received_bytes_total", "Live payload bytes received", nullptr, nullptr,
     &ingress::frame_counters::bytes},
    {"kvrelay_unsequenced_batches_total",
     "Live batches without a sequence number (ATOM #869): no gap can be detected on such a "
     "stream",
     nullptr, nullptr, &ingress::frame_counters::unsequenced},
};

struct ingress_series {
  explicit ingress_series(const pipeline_context& m)
      : tracker(tracker_rows, m.metrics, m.labels()), frames(frame_rows, m.metrics, m.labels()) {
    in_flight = &m.gauge("kvrelay_ingress_in_flight",
                         "Batches handed to the decoder, not yet decoded");
    connected = &m.gauge("kvrelay_engine_connected", "1 when the SUB socket has an engine peer");
    ring_batches = &m.gauge(
        "kvrelay_replay_ring_batches",
        "The engine's replay ring as learnt from its replies: its capacity once it has dropped "
        "entries, else the reach seen so far (a lower bound); 0 until a reply");
    ring_seconds = &m.gauge("kvrelay_replay_ring_seconds",
                            "The replay ring's span at the observed batch rate (0 until both are "
                            "known)");
  }
  counter_table<ingress::tracker_counters> tracker;
  counter_table<ingress::frame_counters> frames;
  gauge_series *in_flight, *connected, *ring_batches, *ring_seconds;
  // The durable index's delta log, when this data path writes one.
  counter_series* log_bytes = nullptr;
  gauge_series* log_writing = nullptr;
  uint64_t log_bytes_published = 0;
};

struct ingress_state {
  static inline constexpr const char* name = "ingress";

  pipeline_context ctx;
  ingress_options opts;
  decoder_actor decoder;  // for a notice the source cannot deliver itself
  std::unique_ptr<ingress::event_source> source;
  std::unique_ptr<ingress_series> series;
  bool told_connected = false;  // what ctx.health last heard
  bool log_stop_said = false;   // the delta log's stop was logged
  bool told_catchup = false;
  ingress::zmq_source_stats last{};  // the stats the last publish read (its in_flight)

  // Publishing cadence. The source sets `dirty` on the ZMQ thread and wakes us only on the
  // false → true edge, so at most one wake-up is queued per cooldown.
  std::shared_ptr<std::atomic<bool>> dirty = std::make_shared<std::atomic<bool>>(false);
  bool cooling = false;  // a cooldown timer is pending
  caf::actor_clock::time_point cool_until{};

  // Drain: batches published before it are still read (they may sit in the SUB socket); the
  // drain's answer waits until the source stopped, so the supervisor knows every batch went out.
  bool draining = false;
  bool stopped = false;
  uint64_t drain_seen = ~uint64_t{0};
  caf::actor_clock::time_point drain_until{};
  std::vector<caf::typed_response_promise<bool>> drain_waiting;

  ~ingress_state() {
    // Join the ZMQ thread before the handles it sends to go away (STYLE.md C1).
    if (source) source->stop();
  }
};

using ingress_self = ingress_actor::stateful_pointer<ingress_state>;

void publish(ingress_self self) {
  auto& st = self->state;
  st.dirty->store(false);  // before reading: a change from here on wakes us again
  const auto now = st.source->stats();
  auto& m = *st.series;
  const auto& t = now.tracker;
  m.tracker.publish(t);
  m.frames.publish(now.frames);
  m.in_flight->set(static_cast<double>(now.in_flight));
  m.connected->set(now.connected ? 1 : 0);
  m.ring_batches->set(static_cast<double>(now.ring.capacity));
  m.ring_seconds->set(now.ring.seconds());
  if (m.log_bytes && st.opts.source.delta_log) {
    const auto w = st.opts.source.delta_log->read();
    m.log_bytes->advance(w.appended_bytes, m.log_bytes_published);
    m.log_writing->set(w.writing ? 1 : 0);
    // Said once: from here a restart has the last snapshot and the ring, not every batch.
    if (!w.writing && !w.stopped.empty() && !st.log_stop_said) {
      st.log_stop_said = true;
      log::error("durable index: the delta log stopped; until this data path restarts, a "
                 "restart relies on the last snapshot and the engine's replay ring",
                 {{"replica", st.ctx.name}, {"err", w.stopped}});
    }
  }
  if (st.ctx.health && now.connected != st.told_connected) {
    st.told_connected = now.connected;
    self->send(st.ctx.health, now.connected ? health_fact::engine_connected
                                            : health_fact::engine_disconnected);
  }
  if (st.ctx.health && t.replays_succeeded > 0 && !st.told_catchup) {
    st.told_catchup = true;
    self->send(st.ctx.health, health_fact::catchup_done);
  }
  st.last = now;
}

// A change was signalled, or the cooldown ended. Publishes at once when idle, else leaves it to
// the pending cooldown; re-arms only while something moves (batches in flight count: the decoder
// credits them without telling us).
void on_publish(ingress_self self) {
  auto& st = self->state;
  if (st.stopped) return;  // the drain published the final counters
  const auto now = self->clock().now();
  if (st.cooling) {
    if (now < st.cool_until) return;  // a wake-up during the cooldown: the timer will see it
    st.cooling = false;
    const auto in_flight = st.source->stats().in_flight;
    if (!st.dirty->load() && in_flight == st.last.in_flight && in_flight == 0) return;
  }
  publish(self);
  st.cooling = true;
  st.cool_until = now + publish_cooldown;
  self->delayed_send(self, publish_cooldown, atom::publish_v);
}

// Runs on the ZMQ thread: only sends to handles, never touches actor state. The source has
// logged losses and resets already; the decoder logs the clear they cause. What the index knows
// of the engine's history goes to the supervisor before the batch or notice it is about reaches
// the decoder, so a later fact of the decoder's (engine_cleared) always arrives after it.
ingress::event_source::sink_fn make_sink(decoder_actor decoder, ingress_actor self_hdl,
                                         health_listener_actor health, std::string replica) {
  return [decoder, self_hdl, health, replica](ingress::ingress_event ev) {
    const auto tell = [&](health_fact f) {
      if (health) caf::anon_send(health, f);
    };
    std::visit(
        [&](auto& e) {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, raw_batch_ptr>) {
            caf::anon_send(decoder, std::move(e));
          } else if constexpr (std::is_same_v<T, ingress_notice_ptr>) {
            // A new engine process: the durable index reads its evidence (delta log LR4).
            if (e->what == ingress_notice::kind::incarnation_reset)
              tell(health_fact::incarnation_reset);
            if (e->what == ingress_notice::kind::history_lost) {
              // The ring did not reach back to a restored snapshot (RD6): it is discarded.
              if (std::string_view(e->reason) == ingress::to_string(
                                                     ingress::loss_reason::resume_outside_ring))
                tell(health_fact::snapshot_outside_ring);
              tell(health_fact::history_lost);
            }
            caf::anon_send(decoder, std::move(e));
          } else if constexpr (std::is_same_v<T, ingress::history_event>) {
            if (e.complete()) {
              tell(health_fact::history_complete);
            } else {
              log::warn("engine history before this seq is gone from its replay ring: blocks it "
                        "cached then are unknown to the index (index incomplete since start)",
                        {{"replica", replica}, {"first_seq", e.first_seq}});
              tell(health_fact::history_skipped);
            }
          } else if constexpr (std::is_same_v<T, ingress::source_failed_event>) {
            caf::anon_send(self_hdl, atom::src_failed_v, e.what);
          }
          // gap (logged by the source, repaired or followed by a notice) and connection
          // changes: nothing to forward (connection state is published).
        },
        ev);
  };
}

ingress::log_fn make_log(std::string replica_id) {
  return [leading = std::vector<log::field>{{"replica", replica_id}}](const log::record& r) {
    log::write(r, leading);
  };
}

actor_status status_of(ingress_self self) {
  auto& s = self->state;
  auto stats = s.source->stats();
  actor_status j("ingress", self->mailbox().size());
  j.add("endpoint", s.opts.source.endpoint);
  j.add("replay_endpoint", s.opts.source.replay_endpoint);
  j.add("topic", s.opts.source.topic);
  j.add("connected", stats.connected);
  j.add("live", stats.live);
  j.add("catching_up", stats.catching_up);
  j.add("phase", ingress::to_string(stats.phase));
  j.add("running", s.source->running());
  j.add("overloaded", stats.overloaded);
  j.add("overloads", stats.overloads);
  j.add("messages", stats.frames.messages);
  j.add("unsequenced_batches", stats.frames.unsequenced);
  j.add("batches", stats.tracker.batches);
  j.add("gaps", stats.tracker.gaps);
  j.add("replays_requested", stats.tracker.replays_requested);
  j.add("replays_succeeded", stats.tracker.replays_succeeded);
  j.add("replays_continued", stats.tracker.replays_continued);
  j.add("replay_holes", stats.tracker.replay_holes);
  j.add("tail_probes", stats.tracker.tail_probes);
  j.add("batches_recovered", stats.tracker.batches_recovered);
  j.add("history_lost", stats.tracker.history_lost);
  j.add("history_skipped", stats.tracker.cold_skipped);
  j.add("incarnation_resets", stats.tracker.resets);
  j.add("in_flight", stats.in_flight);
  // The replay ring as learnt from the engine's replies (ring_span.hpp RS1-RS5).
  j.add("ring_batches", stats.ring.capacity);
  j.add("ring_exact", stats.ring.exact);
  j.add("ring_first_seq", stats.ring.first_seq ? static_cast<int64_t>(*stats.ring.first_seq)
                                               : int64_t{-1});
  j.add("batches_per_second", stats.ring.batches_per_second);
  j.add("ring_seconds", stats.ring.seconds());
  j.add("log_replayed", stats.log_replayed);
  j.add("log_replaying", stats.log_replaying);
  if (!stats.log_replay_error.empty()) j.add("log_replay_error", stats.log_replay_error);
  return j;
}

// One drain step: stop once nothing new was read for a poll interval and the decoder has taken
// everything delivered (or the bound passed); else look again shortly.
void drain_step(ingress_self self) {
  auto& s = self->state;
  const auto stats = s.source->stats();
  const bool quiet = stats.frames.messages == s.drain_seen && stats.in_flight == 0;
  s.drain_seen = stats.frames.messages;
  if (!quiet && self->clock().now() < s.drain_until && s.source->running()) {
    self->delayed_send(self, drain_poll, atom::drain_step_v);
    return;
  }
  s.source->stop();
  publish(self);
  s.stopped = true;
  for (auto& p : s.drain_waiting) p.deliver(true);
  s.drain_waiting.clear();
}

ingress_actor::behavior_type ingress_fn(ingress_self self, pipeline_context ctx,
                                        ingress_options opts, decoder_actor decoder,
                                        std::shared_ptr<credit_line> credits) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.opts = std::move(opts);
  st.series = std::make_unique<ingress_series>(st.ctx);
  if (st.opts.source.delta_log) {
    st.series->log_bytes = &st.ctx.counter("kvrelay_state_log_bytes_total",
                                           ingress_log_bytes_help);
    st.series->log_writing = &st.ctx.gauge("kvrelay_state_log_writing",
                                           ingress_log_writing_help);
  }
  auto source_opts = st.opts.source;
  source_opts.log = make_log(st.ctx.name);
  source_opts.credits = std::move(credits);
  source_opts.budget = st.ctx.budget;
  const auto me = caf::actor_cast<ingress_actor>(self);
  source_opts.on_change = [dirty = st.dirty, me] {
    if (!dirty->exchange(true)) caf::anon_send(me, atom::publish_v);
  };
  st.decoder = decoder;
  auto sink = make_sink(std::move(decoder), me, st.ctx.health, st.ctx.name);
  if (st.opts.make_source)
    st.source = st.opts.make_source(std::move(source_opts), std::move(sink));
  else
    st.source = std::make_unique<ingress::zmq_source>(std::move(source_opts), std::move(sink));
  std::string err;
  if (!st.source->start(&err)) {
    // A supervisor restart with backoff is the retry; the error says why on /debug/tree.
    log::error("engine endpoint unusable", {{"replica", st.ctx.name},
                                            {"endpoint", st.opts.source.endpoint}, {"err", err}});
    self->quit(caf::make_error(caf::sec::runtime_error, err));
  }
  publish(self);  // every series exists from the start, at 0 (no cooldown: nothing moved yet)
  return {
      [=](atom::publish) { on_publish(self); },
      [=](atom::drain_step) {
        if (self->state.draining && !self->state.stopped) drain_step(self);
      },
      [=](atom::drain) -> caf::result<bool> {
        auto& s = self->state;
        if (s.stopped) return true;
        auto p = self->make_response_promise<bool>();
        s.drain_waiting.push_back(p);
        if (!s.draining) {
          s.draining = true;
          s.drain_until = self->clock().now() + drain_read_max;
          drain_step(self);
        }
        return p;
      },
      [=](atom::src_failed, const std::string& what) {
        log::error("zmq thread failed; restarting ingress",
                   {{"replica", self->state.ctx.name}, {"err", what}});
        self->quit(caf::make_error(caf::sec::runtime_error, what));
      },
      [=](ingress_notice_ptr n) {
        auto& s = self->state;
        if (!s.source->inject(n)) self->send(s.decoder, std::move(n));
      },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) { return tsan::published(status_of(self)); },
  };
}

}  // namespace

ingress_actor spawn_ingress(caf::actor_system& sys, const pipeline_context& ctx,
                            const ingress_options& opts, decoder_actor decoder,
                            std::shared_ptr<credit_line> credits) {
  return sys.spawn(ingress_fn, ctx, opts, std::move(decoder), std::move(credits));
}

}  // namespace kvrelay
