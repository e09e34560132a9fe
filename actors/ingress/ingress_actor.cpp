#include "actors/ingress/ingress_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <vector>

#include "base/log.hpp"
#include "base/metrics_registry.hpp"

namespace kvrelay {

namespace {

constexpr auto tick_interval = std::chrono::seconds(1);
// Shutdown: what the engine already sent is read until the socket is quiet this long, at most
// drain_read_max (an engine that never pauses must not hold the shutdown).
constexpr auto drain_poll = std::chrono::milliseconds(20);
constexpr auto drain_read_max = std::chrono::seconds(1);


struct ingress_state {
  static inline constexpr const char* name = "ingress";

  pipeline_context ctx;
  ingress_options opts;
  std::shared_ptr<ingress::zmq_source> source;
  std::shared_ptr<credit_line> credits;
  bool told_connected = false;  // what ctx.health last heard
  bool told_catchup = false;
  ingress::zmq_source_stats last{};  // counters already published

  // Drain: batches published before it are still read (they may sit in the SUB socket); the
  // drain's answer waits until the source stopped, so the supervisor knows every batch went out.
  bool draining = false;
  bool stopped = false;
  uint64_t drain_seen = ~uint64_t{0};
  std::chrono::steady_clock::time_point drain_until{};
  std::vector<caf::typed_response_promise<bool>> drain_waiting;

  ~ingress_state() {
    // Join the ZMQ thread before the handles it sends to go away (STYLE.md C1).
    if (credits) credits->attach(nullptr);
    if (source) source->stop();
  }
};

using ingress_self = ingress_actor::stateful_pointer<ingress_state>;

void publish(ingress_self self) {
  auto& st = self->state;
  auto now = st.source->stats();
  const auto& m = st.ctx;
  const auto bump = [&](const char* name, const char* help, uint64_t cur, uint64_t prev,
                        label_set extra = {}) {
    auto& c = m.counter(name, help, std::move(extra));  // created even at 0: dashboards see it
    if (cur > prev) c.inc(cur - prev);
  };
  const auto& t = now.tracker;
  const auto& p = st.last.tracker;
  bump("kvrelay_seq_gaps_total", "Sequence gaps seen on the live stream", t.gaps, p.gaps);
  bump("kvrelay_replays_total", "Replay requests by outcome", t.replays_requested,
       p.replays_requested, {{"outcome", "requested"}});
  bump("kvrelay_replays_total", "Replay requests by outcome", t.replays_succeeded,
       p.replays_succeeded, {{"outcome", "succeeded"}});
  bump("kvrelay_replays_total", "Replay requests by outcome", t.replays_failed, p.replays_failed,
       {{"outcome", "failed"}});
  bump("kvrelay_batches_recovered_total", "Batches recovered through replay",
       t.batches_recovered, p.batches_recovered);
  bump("kvrelay_batches_lost_total", "Batches that could not be recovered (pipeline cleared)",
       t.batches_lost, p.batches_lost);
  bump("kvrelay_history_lost_total", "Unrecoverable gaps (each clears the pipeline)",
       t.history_lost, p.history_lost);
  bump("kvrelay_incarnation_resets_total", "Engine restarts seen as sequence resets", t.resets,
       p.resets);
  bump("kvrelay_duplicate_batches_total", "Batches seen twice (dropped)", t.duplicates,
       p.duplicates);
  const auto& f = now.frames;
  const auto& q = st.last.frames;
  const char* frames = "Malformed ZMQ messages dropped, by reason";
  bump("kvrelay_bad_frames_total", frames, f.bad_frame_count, q.bad_frame_count,
       {{"reason", "frame_count"}});
  bump("kvrelay_bad_frames_total", frames, f.bad_seq_size, q.bad_seq_size,
       {{"reason", "seq_size"}});
  bump("kvrelay_bad_frames_total", frames, f.reserved_seq, q.reserved_seq,
       {{"reason", "reserved_seq"}});
  bump("kvrelay_bad_frames_total", frames, f.replay_malformed, q.replay_malformed,
       {{"reason", "replay_malformed"}});
  bump("kvrelay_bad_frames_total", frames, f.replay_bad_end, q.replay_bad_end,
       {{"reason", "replay_bad_end"}});
  bump("kvrelay_received_bytes_total", "Live payload bytes received", f.bytes, q.bytes);
  m.gauge("kvrelay_ingress_in_flight", "Batches handed to the decoder, not yet decoded",
          {})
      .set(static_cast<double>(now.in_flight));
  m.gauge("kvrelay_engine_connected", "1 when the SUB socket has an engine peer")
      .set(now.connected ? 1 : 0);
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

// Runs on the ZMQ thread: only sends to handles, never touches actor state.
ingress::zmq_source::sink_fn make_sink(decoder_actor decoder, ingress_actor self_hdl,
                                       std::string replica_id) {
  return [decoder, self_hdl, replica_id](ingress::ingress_event ev) {
    std::visit(
        [&](auto& e) {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, ingress::batch_event>) {
            auto rb = std::make_shared<raw_batch>();
            rb->seq = e.seq;
            rb->replayed = e.replayed;
            rb->data = e.payload.data();
            rb->size = e.payload.size();
            rb->owner = std::make_shared<ingress::payload_ref>(std::move(e.payload));
            caf::anon_send(decoder, raw_batch_ptr{std::move(rb)});
          } else if constexpr (std::is_same_v<T, ingress::history_lost_event>) {
            log::error("engine event history lost; clearing this replica's index",
                       {{"replica", replica_id}, {"first_missing", e.first_missing},
                        {"first_available", e.first_available},
                        {"reason", ingress::to_string(e.reason)}});
            caf::anon_send(decoder, ingress_notice_ptr{std::make_shared<ingress_notice>(
                                        ingress_notice{ingress_notice::kind::history_lost,
                                                       e.first_missing, e.first_available})});
          } else if constexpr (std::is_same_v<T, ingress::incarnation_reset_event>) {
            log::warn("engine sequence went backwards: new engine incarnation",
                      {{"replica", replica_id}, {"previous_seq", e.previous_seq},
                       {"new_seq", e.new_seq}});
            caf::anon_send(decoder, ingress_notice_ptr{std::make_shared<ingress_notice>(
                                        ingress_notice{ingress_notice::kind::incarnation_reset,
                                                       e.previous_seq, e.new_seq})});
          } else if constexpr (std::is_same_v<T, ingress::gap_event>) {
            log::debug("sequence gap", {{"replica", replica_id}, {"first_missing", e.first_missing},
                                        {"seen", e.seen}, {"repairing", e.repairing}});
          } else if constexpr (std::is_same_v<T, ingress::source_failed_event>) {
            caf::anon_send(self_hdl, atom::src_failed_v, e.what);
          }
        },
        ev);
  };
}

ingress::log_fn make_log(std::string replica_id) {
  return [replica_id](ingress::log_severity sev, const std::string& msg,
                      const ingress::log_fields& fields) {
    auto lvl = sev == ingress::log_severity::debug  ? log::level::debug
               : sev == ingress::log_severity::info ? log::level::info
               : sev == ingress::log_severity::warn ? log::level::warn
                                                     : log::level::error;
    if (!log::enabled(lvl)) return;
    std::vector<log::field> f{{"replica", replica_id}};
    for (const auto& [k, v] : fields) f.emplace_back(k, v);
    log::write(lvl, msg, f);
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
  j.add("running", s.source->running());
  j.add("messages", stats.frames.messages);
  j.add("batches", stats.tracker.batches);
  j.add("gaps", stats.tracker.gaps);
  j.add("replays_requested", stats.tracker.replays_requested);
  j.add("replays_succeeded", stats.tracker.replays_succeeded);
  j.add("batches_recovered", stats.tracker.batches_recovered);
  j.add("history_lost", stats.tracker.history_lost);
  j.add("incarnation_resets", stats.tracker.resets);
  j.add("in_flight", stats.in_flight);
  return j;
}

// One drain step: stop once nothing new was read for a poll interval and the decoder has taken
// everything delivered (or the bound passed); else look again shortly.
void drain_step(ingress_self self) {
  auto& s = self->state;
  const auto stats = s.source->stats();
  const bool quiet = stats.frames.messages == s.drain_seen && stats.in_flight == 0;
  s.drain_seen = stats.frames.messages;
  if (!quiet && std::chrono::steady_clock::now() < s.drain_until && s.source->running()) {
    self->delayed_send(self, drain_poll, atom::drain_step_v);
    return;
  }
  s.source->stop();
  s.stopped = true;
  publish(self);
  for (auto& p : s.drain_waiting) p.deliver(true);
  s.drain_waiting.clear();
}

ingress_actor::behavior_type ingress_fn(ingress_self self, pipeline_context ctx,
                                        ingress_options opts, decoder_actor decoder,
                                        std::shared_ptr<credit_line> credits) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.opts = std::move(opts);
  st.credits = std::move(credits);
  auto source_opts = st.opts.source;
  source_opts.log = make_log(st.ctx.name);
  st.source = std::make_shared<ingress::zmq_source>(
      std::move(source_opts),
      make_sink(std::move(decoder), caf::actor_cast<ingress_actor>(self), st.ctx.name));
  std::string err;
  if (!st.source->start(&err)) {
    // A supervisor restart with backoff is the retry; the error says why on /debug/tree.
    log::error("engine endpoint unusable", {{"replica", st.ctx.name},
                                            {"endpoint", st.opts.source.endpoint}, {"err", err}});
    self->quit(caf::make_error(caf::sec::runtime_error, err));
  } else {
    st.credits->attach(st.source);  // zmq_source logs "subscribed to engine KV events"
  }
  self->delayed_send(self, tick_interval, atom::publish_v);
  return {
      [=](atom::publish) {
        auto& s = self->state;
        if (s.stopped) return;  // the drain published the final counters
        publish(self);
        self->delayed_send(self, tick_interval, atom::publish_v);
      },
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
          s.drain_until = std::chrono::steady_clock::now() + drain_read_max;
          drain_step(self);
        }
        return p;
      },
      [=](atom::src_failed, const std::string& what) {
        log::error("zmq thread failed; restarting ingress",
                   {{"replica", self->state.ctx.name}, {"err", what}});
        self->quit(caf::make_error(caf::sec::runtime_error, what));
      },
      [=](atom::crash) { throw std::runtime_error("crash requested through the admin port"); },
      [=](atom::status) { return status_of(self); },
  };
}

}  // namespace

ingress_actor spawn_ingress(caf::actor_system& sys, const pipeline_context& ctx,
                            const ingress_options& opts, decoder_actor decoder,
                            std::shared_ptr<credit_line> credits) {
  return sys.spawn(ingress_fn, ctx, opts, std::move(decoder), std::move(credits));
}

}  // namespace kvrelay
