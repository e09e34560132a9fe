// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The ingress actor shell under CAF's deterministic scheduler, with its source injected (no ZMQ,
// no sockets, no sleeps): what reaches the decoder and the supervisor, when counters are
// published, how it dies and how it drains. The source's own protocol is tested in
// sequence_tracker_test and zmq_source_test.

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <memory>
#include <optional>
#include <string>

#include "actors/ingress/ingress_actor.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

// What the test sees of the source the shell made: its sink, its options and the stats it shows.
struct fake_state {
  ingress::event_source::sink_fn sink;
  ingress::zmq_source_options opts;
  ingress::zmq_source_stats stats;
  bool start_ok = true;
  bool started = false;
  bool stopped = false;

  // A change the source would signal after a poll round.
  void changed() {
    if (opts.on_change) opts.on_change();
  }
};

class fake_source final : public ingress::event_source {
 public:
  explicit fake_source(std::shared_ptr<fake_state> s) : s_(std::move(s)) {}
  bool start(std::string* error) override {
    s_->started = s_->start_ok;
    if (!s_->start_ok && error) *error = "no such endpoint";
    return s_->start_ok;
  }
  void stop() override { s_->stopped = true; }
  bool running() const noexcept override { return s_->started && !s_->stopped; }
  ingress::zmq_source_stats stats() const override { return s_->stats; }

 private:
  std::shared_ptr<fake_state> s_;
};

raw_batch_ptr batch(uint64_t seq) {
  auto bytes = std::make_shared<const std::string>("batch-" + std::to_string(seq));
  auto b = std::make_shared<raw_batch>();
  b->seq = seq;
  b->owner = bytes;
  b->data = bytes->data();
  b->size = bytes->size();
  return b;
}

struct shell {
  testing::deterministic_system t;
  testing::recorder decoder{t};
  testing::recorder health{t};
  std::shared_ptr<fake_state> src = std::make_shared<fake_state>();
  pipeline_context ctx;
  ingress_actor aut;

  void spawn() {
    ctx.name = "det-0";
    ctx.health = health.as<health_listener_actor>();
    ingress_options opts;
    opts.source.endpoint = "tcp://engine:5557";
    auto s = src;
    opts.make_source = [s](ingress::zmq_source_options o, ingress::event_source::sink_fn sink) {
      s->opts = std::move(o);
      s->sink = std::move(sink);
      return std::make_unique<fake_source>(s);
    };
    aut = spawn_ingress(t.sys(), ctx, opts, decoder.as<decoder_actor>(),
                        std::make_shared<credit_line>());
    t.stop_at_end(caf::actor_cast<caf::actor>(aut));
    t.run();
  }
  double metric(const std::string& name, label_set extra = {}) const {
    return ctx.metrics->value(name, ctx.labels(std::move(extra)));
  }
  std::vector<health_fact> facts() const { return health.all<health_fact>(); }
};

TEST(IngressShell, BatchesAndNoticesReachTheDecoderAsTheSourceMadeThem) {
  shell s;
  s.spawn();
  ASSERT_TRUE(s.src->started);
  EXPECT_TRUE(s.src->opts.credits) << "the decoder's credit line is handed to the source";
  const auto b0 = batch(0);
  const auto lost = std::make_shared<const ingress_notice>(
      ingress_notice{ingress_notice::kind::history_lost, 1, 5, "history_lost", 0, 0});
  // The sink runs on the ZMQ thread in production; here on the test thread.
  s.src->sink(b0);
  s.src->sink(lost);
  s.src->sink(batch(5));
  s.src->sink(ingress::gap_event{1, 5, true});  // informational: not forwarded
  s.t.run();
  const auto& got = s.decoder.received();
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(got[0].match_element<raw_batch_ptr>(0));
  EXPECT_EQ(got[0].get_as<raw_batch_ptr>(0), b0) << "the same shared batch, not a re-wrapped copy";
  ASSERT_TRUE(got[1].match_element<ingress_notice_ptr>(0));
  EXPECT_EQ(got[1].get_as<ingress_notice_ptr>(0), lost);
  EXPECT_EQ(got[2].get_as<raw_batch_ptr>(0)->seq, 5u);
}

TEST(IngressShell, CountersExistAtZeroAndArePublishedOnChangeAtMostOncePerSecond) {
  shell s;
  s.spawn();
  EXPECT_EQ(s.metric("kvrelay_seq_gaps_total"), 0) << "created at spawn, before any change";
  EXPECT_EQ(s.metric("kvrelay_engine_connected"), 0);
  EXPECT_EQ(s.metric("kvrelay_replays_total", {{"outcome", "requested"}}), 0);
  s.t.advance(1000ms);  // the spawn's cooldown ends with nothing changed
  EXPECT_FALSE(s.t.has_timer()) << "an idle ingress keeps no timer";

  s.src->stats.tracker.gaps = 2;
  s.src->stats.connected = true;
  s.src->changed();
  s.t.run();
  EXPECT_EQ(s.metric("kvrelay_seq_gaps_total"), 2) << "the first change is published at once";
  EXPECT_EQ(s.metric("kvrelay_engine_connected"), 1);

  s.src->stats.tracker.gaps = 5;
  s.src->changed();
  s.src->changed();  // a second signal in the same cooldown is not even sent
  s.t.run();
  EXPECT_EQ(s.metric("kvrelay_seq_gaps_total"), 2) << "later changes wait for the cooldown";
  s.t.advance(999ms);
  EXPECT_EQ(s.metric("kvrelay_seq_gaps_total"), 2);
  s.t.advance(1ms);
  EXPECT_EQ(s.metric("kvrelay_seq_gaps_total"), 5);
  s.t.advance(1000ms);
  EXPECT_FALSE(s.t.has_timer()) << "quiet again: no more wake-ups";
}

TEST(IngressShell, BatchesInFlightKeepThePublisherTicking) {
  shell s;
  s.spawn();
  s.t.advance(1000ms);
  s.src->stats.in_flight = 3;
  s.src->changed();
  s.t.run();
  EXPECT_EQ(s.metric("kvrelay_ingress_in_flight"), 3);
  // The decoder credits without the source noticing a change: the cooldown looks again.
  s.src->stats.in_flight = 0;
  s.t.advance(1000ms);
  EXPECT_EQ(s.metric("kvrelay_ingress_in_flight"), 0);
  s.t.advance(1000ms);
  EXPECT_FALSE(s.t.has_timer());
}

TEST(IngressShell, TellsTheSupervisorWhatChangedOnce) {
  shell s;
  s.spawn();
  EXPECT_TRUE(s.facts().empty());
  s.src->stats.connected = true;
  s.src->changed();
  s.t.run();
  EXPECT_EQ(s.facts(), (std::vector<health_fact>{health_fact::engine_connected}));
  s.src->stats.tracker.replays_succeeded = 1;
  s.src->changed();
  s.t.advance(1000ms);
  s.src->stats.tracker.replays_succeeded = 2;
  s.src->changed();
  s.t.advance(1000ms);
  s.src->stats.connected = false;
  s.src->changed();
  s.t.advance(1000ms);
  EXPECT_EQ(s.facts(),
            (std::vector<health_fact>{health_fact::engine_connected, health_fact::catchup_done,
                                      health_fact::engine_disconnected}));
}

// Spawns a watcher that records why `hdl` went down.
std::shared_ptr<std::optional<caf::error>> watch(testing::deterministic_system& t,
                                                 const caf::actor& hdl) {
  auto reason = std::make_shared<std::optional<caf::error>>();
  auto w = t.sys().spawn([hdl, reason](caf::event_based_actor* self) -> caf::behavior {
    self->monitor(hdl);
    self->set_down_handler([reason](caf::down_msg& m) { *reason = m.reason; });
    return {[](caf::atom_constant<caf::atom("never")>) {}};
  });
  t.stop_at_end(w);
  t.run();
  return reason;
}

TEST(IngressShell, ASourceFailureEndsTheActorWithAnError) {
  shell s;
  s.spawn();
  auto down = watch(s.t, caf::actor_cast<caf::actor>(s.aut));
  s.src->sink(ingress::source_failed_event{"zmq recv: boom"});
  s.t.run();
  ASSERT_TRUE(down->has_value()) << "the supervisor restarts the data path on this DOWN";
  EXPECT_NE(caf::to_string(**down).find("boom"), std::string::npos) << caf::to_string(**down);
  EXPECT_TRUE(s.src->stopped) << "the source is stopped before the actor goes";
}

TEST(IngressShell, AnUnusableEndpointEndsTheActorAtOnce) {
  shell s;
  s.src->start_ok = false;
  s.spawn();
  // The actor quit while being spawned; nothing is running and nothing was delivered.
  EXPECT_FALSE(s.src->started);
  EXPECT_TRUE(s.decoder.received().empty());
}

TEST(IngressShell, DrainReadsUntilQuietThenStopsTheSourceAndAnswers) {
  shell s;
  s.spawn();
  s.src->stats.frames.messages = 10;
  s.src->stats.in_flight = 1;
  std::optional<bool> answer;
  auto client = s.t.sys().spawn([&](caf::event_based_actor* self) {
    self->request(s.aut, std::chrono::seconds(5), atom::drain_v).then([&](bool ok) {
      answer = ok;
    });
  });
  s.t.stop_at_end(client);
  s.t.run();
  EXPECT_FALSE(answer) << "messages are still arriving and one batch is in flight";
  s.t.advance(20ms);
  EXPECT_FALSE(answer);
  s.src->stats.in_flight = 0;  // the decoder took the last batch; nothing new was read
  s.t.advance(20ms);
  ASSERT_TRUE(answer);
  EXPECT_TRUE(*answer);
  EXPECT_TRUE(s.src->stopped);
}

}  // namespace
}  // namespace kvrelay
