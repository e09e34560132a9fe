// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter's shell under CAF's deterministic scheduler, with the RPC layer replaced by fake
// ports (one per target): what the sequencer decides reaches the port, completions come back
// through the inbox, answers reach the unit's sender, the reconnect listener hears about a
// reconnect, and the RPC metrics are recorded. With several targets each link is on its own: a
// unit goes only to its target, one link's hung calls delay no other, stats fan out. No sockets,
// no sleeps.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/emitter/emitter_actor.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using emitter::channel_state;
using emitter::port_event;

/// Records what the emitter asks for; the test completes calls through the inbox.
class fake_port final : public emitter::policy_port {
 public:
  struct call {
    enum class kind { clear, stream, evict, stats } what;
    uint64_t id = 0;
    emit_unit_ptr unit;
    bool with_expirations = false;
    prefix_evict evict;
    int64_t ts_us = 0;
  };

  explicit fake_port(std::shared_ptr<emitter::port_inbox> inbox) : inbox_(std::move(inbox)) {}

  void clear(uint64_t id, int64_t ts_us) override {
    calls.push_back({call::kind::clear, id, nullptr, false, {}, ts_us});
  }
  void stream(uint64_t id, emit_unit_ptr unit, bool with_expirations) override {
    calls.push_back({call::kind::stream, id, std::move(unit), with_expirations, {}, 0});
  }
  void evict(uint64_t id, const prefix_evict& ev) override {
    calls.push_back({call::kind::evict, id, nullptr, false, ev, ev.ts_us});
  }
  void stats(uint64_t id, const stats_sample&, int64_t ts_us) override {
    calls.push_back({call::kind::stats, id, nullptr, false, {}, ts_us});
  }
  void set_deadline(int64_t ms) override { deadlines.push_back(ms); }
  void start() override { started = true; }
  size_t in_flight() const override { return calls.size(); }

  /// Completes one call (from the test thread, as a gRPC thread would).
  void complete(uint64_t id, int code = 0, bool accepted = true) {
    port_event e;
    e.call = id;
    e.code = code;
    e.accepted = accepted;
    e.latency_us = 1500;
    e.message = code == 0 ? "" : "refused";
    inbox_->push(std::move(e));
  }
  void channel(channel_state s) {
    port_event e;
    e.what = port_event::kind::channel;
    e.state = s;
    inbox_->push(std::move(e));
  }

  std::vector<call> calls;
  std::vector<int64_t> deadlines;  // set_deadline, in order
  bool started = false;

 private:
  std::shared_ptr<emitter::port_inbox> inbox_;
};

constexpr const char* default_target = "127.0.0.1:9090";  // client_options' default

struct fixture {
  fixture() : fixture(emitter::eviction_mode::expire) {}
  explicit fixture(emitter::eviction_mode mode, std::vector<std::string> targets = {})
      : debouncer(t), listener(t) {
    ctx.name = "shell-0";
    ctx.identity.replica_id = "r";
    ctx.wall_us = [] { return int64_t{2'000'000}; };
    emitter_options o;
    o.targets = std::move(targets);
    o.sequencer.mode = mode;
    o.sequencer.max_evictions_in_flight = 2;
    o.make_port = [this](const emitter::port_config& cfg, std::shared_ptr<emitter::port_inbox> in,
                         std::string&) {
      auto p = std::make_unique<fake_port>(std::move(in));
      ports[cfg.client.target] = p.get();
      port = p.get();
      return p;
    };
    std::string err;
    aut = spawn_emitter(t.sys(), ctx, o, err);
    EXPECT_TRUE(aut) << err;
    t.stop_at_end(caf::actor_cast<caf::actor>(aut));
    caf::anon_send(aut, atom::update_v, listener.as<reconnect_listener_actor>());
    t.run();
  }

  void send_unit(emit_unit u, const std::string& target = default_target) {
    caf::send_as(debouncer.as<debouncer_actor>(), aut, target,
                 std::make_shared<const emit_unit>(std::move(u)));
    t.run();
  }

  // Asks for a stats update from a client actor; its answer lands in `answer`.
  void ask_stats(std::optional<bool>& answer) {
    auto client = t.sys().spawn([&](caf::event_based_actor* self) {
      auto s = std::make_shared<stats_sample>();
      s->hit_rate = 0.5f;
      self->request(aut, std::chrono::seconds(5), stats_sample_ptr(s))
          .then([&](bool ok) { answer = ok; });
    });
    t.stop_at_end(client);
    t.run();
  }

  testing::deterministic_system t;
  testing::recorder debouncer;
  testing::recorder listener;
  pipeline_context ctx;
  fake_port* port = nullptr;  // the last one made; owned by the emitter's state
  std::map<std::string, fake_port*> ports;  // by target
  emitter_actor aut;
};

emit_unit unit(uint64_t id, bool clear, size_t adds, size_t evicts) {
  emit_unit u;
  u.id = id;
  u.clear = clear;
  u.clear_ts_us = 10;
  u.adds_ts_us = 1'000'000;
  for (size_t i = 0; i < adds; ++i) u.adds.push_back({i + 1, 16, tier::t1, ""});
  for (size_t i = 0; i < evicts; ++i) u.evicts.push_back({i + 100, "", 20});
  return u;
}

TEST(EmitterShell, AUnitGoesOutAsTheSequencerSaysAndIsAnsweredToItsSender) {
  fixture f;
  ASSERT_NE(f.port, nullptr);
  EXPECT_TRUE(f.port->started) << "the emitter starts connecting at once";
  f.send_unit(unit(7, true, 2, 3));
  ASSERT_EQ(f.port->calls.size(), 1u);
  EXPECT_EQ(f.port->calls[0].what, fake_port::call::kind::clear);
  EXPECT_EQ(f.port->calls[0].ts_us, 10);
  f.port->complete(f.port->calls[0].id);
  f.t.run();
  ASSERT_EQ(f.port->calls.size(), 2u);
  EXPECT_EQ(f.port->calls[1].what, fake_port::call::kind::stream);
  EXPECT_TRUE(f.port->calls[1].with_expirations) << "expire is the default mode";
  EXPECT_EQ(f.port->calls[1].unit->evicts.size(), 3u);
  EXPECT_TRUE(f.debouncer.all<emit_result>().empty());
  f.port->complete(f.port->calls[1].id);
  f.t.run();
  auto results = f.debouncer.all<emit_result>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].id, 7u);
  EXPECT_EQ(results[0].target, default_target);
  EXPECT_TRUE(results[0].ok);
  EXPECT_TRUE(results[0].sent);
  // Metrics: one series per (method, code), resolved once; event age from the adds' batch time.
  const auto& m = *f.ctx.metrics;
  EXPECT_EQ(m.value("kvrelay_rpc_total", {{"replica", "shell-0"},
                                          {"target", default_target},
                                          {"method", "PublishEvent"},
                                          {"code", "OK"}}),
            1);
  EXPECT_EQ(m.value("kvrelay_rpc_total", {{"replica", "shell-0"},
                                          {"target", default_target},
                                          {"method", "ReportCacheState"},
                                          {"code", "OK"}}),
            1);
  const std::string text = m.render();
  EXPECT_NE(text.find("kvrelay_rpc_duration_seconds_count{replica=\"shell-0\",target="
                      "\"127.0.0.1:9090\",method=\"ReportCacheState\",code=\"OK\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kvrelay_event_age_seconds_sum{replica=\"shell-0\"} 1"), std::string::npos)
      << "wall 2 s - adds at 1 s\n"
      << text;
}

TEST(EmitterShell, ATimedOutCallLengthensThePortsDeadlineAndAFastOneRestoresIt) {
  fixture f;  // rpc_timeout: the client default, 5 s
  f.send_unit(unit(1, false, 1, 0));
  ASSERT_EQ(f.port->calls.size(), 1u);
  f.port->complete(f.port->calls[0].id, 4);  // DEADLINE_EXCEEDED
  f.t.run();
  EXPECT_EQ(f.port->deadlines, (std::vector<int64_t>{10'000})) << "UQ11: doubled";
  f.send_unit(unit(2, true, 1, 0));
  ASSERT_EQ(f.port->calls.size(), 2u);
  f.port->complete(f.port->calls[1].id);  // 1.5 ms: well under a quarter of 10 s
  f.t.run();
  EXPECT_EQ(f.port->deadlines, (std::vector<int64_t>{10'000, 5'000})) << "back to the configured";
}

TEST(EmitterShell, RpcModeSendsEvictionsBehindTheStreamWithinTheCap) {
  fixture f(emitter::eviction_mode::rpc);
  f.send_unit(unit(1, false, 1, 5));
  ASSERT_EQ(f.port->calls.size(), 3u) << "the stream, then evictions up to the cap (2)";
  EXPECT_EQ(f.port->calls[0].what, fake_port::call::kind::stream);
  EXPECT_FALSE(f.port->calls[0].with_expirations);
  f.port->complete(f.port->calls[0].id);
  f.t.run();
  ASSERT_EQ(f.port->calls.size(), 3u) << "the stream's completion frees no eviction slot";
  EXPECT_EQ(f.port->calls[1].evict.fingerprint, 100u);
  EXPECT_EQ(f.port->calls[2].evict.fingerprint, 101u);
  f.port->complete(f.port->calls[2].id);
  f.port->complete(f.port->calls[1].id);
  f.t.run();
  ASSERT_EQ(f.port->calls.size(), 5u);
  for (size_t i = 3; i < 5; ++i) f.port->complete(f.port->calls[i].id);
  f.t.run();
  ASSERT_EQ(f.port->calls.size(), 6u);
  f.port->complete(f.port->calls[5].id);
  f.t.run();
  auto results = f.debouncer.all<emit_result>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].ok);
}

TEST(EmitterShell, AFailedClearAbandonsItsUnitAndQueuedUnitsFailUnsent) {
  fixture f;
  f.send_unit(unit(1, true, 4, 4));
  f.send_unit(unit(2, false, 4, 0));
  f.send_unit(unit(3, false, 0, 4));
  ASSERT_EQ(f.port->calls.size(), 1u);
  f.port->complete(f.port->calls[0].id, 14);
  f.t.run();
  EXPECT_EQ(f.port->calls.size(), 1u) << "nothing else went on the wire";
  auto results = f.debouncer.all<emit_result>();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].id, 1u);
  EXPECT_FALSE(results[0].ok);
  EXPECT_TRUE(results[0].sent);
  EXPECT_FALSE(results[1].sent);
  EXPECT_FALSE(results[2].sent);
  // The resync's clear-led unit goes out.
  f.send_unit(unit(4, true, 1, 0));
  ASSERT_EQ(f.port->calls.size(), 2u);
  EXPECT_EQ(f.port->calls[1].what, fake_port::call::kind::clear);
}

TEST(EmitterShell, TheListenerHearsTheTargetsAndOfAReconnectOnly) {
  fixture f;
  auto sets = f.listener.all_last<std::vector<std::string>>();
  ASSERT_EQ(sets.size(), 1u) << "told the targets at registration";
  EXPECT_EQ(sets[0], (std::vector<std::string>{default_target}));
  f.port->channel(channel_state::connecting);
  f.port->channel(channel_state::ready);
  f.t.run();
  EXPECT_TRUE(f.listener.starting_with<atom::reconnected>().empty())
      << "the first READY is no reconnect";
  EXPECT_EQ(f.ctx.metrics->value("kvrelay_target_connected",
                                 {{"replica", "shell-0"}, {"target", default_target}}),
            1);
  f.port->channel(channel_state::transient_failure);
  f.t.run();
  EXPECT_EQ(f.ctx.metrics->value("kvrelay_target_connected",
                                 {{"replica", "shell-0"}, {"target", default_target}}),
            0);
  f.port->channel(channel_state::ready);
  f.t.run();
  auto heard = f.listener.starting_with<atom::reconnected>();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].get_as<std::string>(1), default_target);
}

TEST(EmitterShell, StatsAreAnsweredFromTheirCompletion) {
  fixture f;
  std::optional<bool> answer;
  f.ask_stats(answer);
  ASSERT_EQ(f.port->calls.size(), 1u);
  EXPECT_EQ(f.port->calls[0].what, fake_port::call::kind::stats);
  EXPECT_EQ(f.port->calls[0].ts_us, 2'000'000) << "stats carry the context's clock";
  EXPECT_FALSE(answer.has_value());
  f.port->complete(f.port->calls[0].id, 0, /*accepted=*/true);
  f.t.run();
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(*answer);
}

// ---- several targets: one link each --------------------------------------------------------

const std::vector<std::string> three = {"a:1", "b:2", "c:3"};

// U4: a unit goes to the one target it names and is answered once, naming it.
TEST(EmitterLinks, AUnitGoesOnlyToItsTargetAndIsAnsweredWithItsName) {
  fixture f(emitter::eviction_mode::expire, {"b:2", "a:1"});
  ASSERT_EQ(f.ports.size(), 2u);
  EXPECT_TRUE(f.ports["a:1"]->started && f.ports["b:2"]->started);
  auto sets = f.listener.all_last<std::vector<std::string>>();
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0], (std::vector<std::string>{"a:1", "b:2"})) << "sorted";
  f.send_unit(unit(1, false, 2, 0), "b:2");
  EXPECT_TRUE(f.ports["a:1"]->calls.empty());
  ASSERT_EQ(f.ports["b:2"]->calls.size(), 1u);
  f.ports["b:2"]->complete(f.ports["b:2"]->calls[0].id);
  f.t.run();
  auto results = f.debouncer.all<emit_result>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].target, "b:2");
  EXPECT_EQ(results[0].id, 1u);
  EXPECT_TRUE(results[0].ok);
  EXPECT_EQ(f.ctx.metrics->value("kvrelay_rpc_total", {{"replica", "shell-0"},
                                                       {"target", "b:2"},
                                                       {"method", "ReportCacheState"},
                                                       {"code", "OK"}}),
            1);
}

TEST(EmitterLinks, OneLinksHungCallsDelayNoOther) {
  fixture f(emitter::eviction_mode::expire, three);
  ASSERT_EQ(f.ports.size(), 3u);
  // a's first unit hangs (never completed); b and c each get several units through meanwhile.
  f.send_unit(unit(1, true, 1, 0), "a:1");
  f.send_unit(unit(2, false, 1, 0), "a:1");
  for (uint64_t id = 10; id < 13; ++id) {
    for (const char* to : {"b:2", "c:3"}) {
      f.send_unit(unit(id, false, 1, 0), to);
      auto* p = f.ports[to];
      ASSERT_FALSE(p->calls.empty());
      p->complete(p->calls.back().id);
      f.t.run();
    }
  }
  EXPECT_EQ(f.ports["a:1"]->calls.size(), 1u) << "a is still on its first unit's clear";
  auto results = f.debouncer.all<emit_result>();
  ASSERT_EQ(results.size(), 6u);
  for (const auto& r : results) {
    EXPECT_NE(r.target, "a:1");
    EXPECT_TRUE(r.ok) << r.target << " " << r.id;
  }
  // a's calls complete at last: its units are answered, in order, with its name.
  f.ports["a:1"]->complete(f.ports["a:1"]->calls[0].id);
  f.t.run();
  ASSERT_EQ(f.ports["a:1"]->calls.size(), 2u);
  f.ports["a:1"]->complete(f.ports["a:1"]->calls[1].id);
  f.t.run();
  ASSERT_EQ(f.ports["a:1"]->calls.size(), 3u);
  f.ports["a:1"]->complete(f.ports["a:1"]->calls[2].id);
  f.t.run();
  results = f.debouncer.all<emit_result>();
  ASSERT_EQ(results.size(), 8u);
  EXPECT_EQ(results[6].target, "a:1");
  EXPECT_EQ(results[6].id, 1u);
  EXPECT_EQ(results[7].id, 2u);
}

TEST(EmitterLinks, StatsFanOutAndAreTrueWhenOneTargetAccepted) {
  fixture f(emitter::eviction_mode::expire, three);
  std::optional<bool> answer;
  f.ask_stats(answer);
  for (const auto& t : three) {
    ASSERT_EQ(f.ports[t]->calls.size(), 1u) << t;
    EXPECT_EQ(f.ports[t]->calls[0].what, fake_port::call::kind::stats);
  }
  f.ports["a:1"]->complete(f.ports["a:1"]->calls[0].id, 14);
  f.ports["b:2"]->complete(f.ports["b:2"]->calls[0].id, 0, /*accepted=*/true);
  f.t.run();
  EXPECT_FALSE(answer.has_value()) << "not before every target answered";
  f.ports["c:3"]->complete(f.ports["c:3"]->calls[0].id, 14);
  f.t.run();
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(*answer) << "b accepted it";
}

TEST(EmitterLinks, StatsAreFalseWhenNoTargetAccepted) {
  fixture f(emitter::eviction_mode::expire, {"a:1", "b:2"});
  std::optional<bool> answer;
  f.ask_stats(answer);
  f.ports["a:1"]->complete(f.ports["a:1"]->calls[0].id, 14);
  f.ports["b:2"]->complete(f.ports["b:2"]->calls[0].id, 0, /*accepted=*/false);
  f.t.run();
  ASSERT_TRUE(answer.has_value());
  EXPECT_FALSE(*answer);
}

TEST(EmitterLinks, AUnitForAnUnknownTargetIsAnsweredFailedUnsent) {
  fixture f(emitter::eviction_mode::expire, {"a:1", "b:2"});
  f.send_unit(unit(5, true, 1, 0), "z:9");
  EXPECT_TRUE(f.ports["a:1"]->calls.empty());
  EXPECT_TRUE(f.ports["b:2"]->calls.empty());
  auto results = f.debouncer.all<emit_result>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].target, "z:9");
  EXPECT_EQ(results[0].id, 5u);
  EXPECT_FALSE(results[0].ok);
  EXPECT_FALSE(results[0].sent);
  EXPECT_EQ(results[0].last_error, "unknown target");
}

TEST(EmitterLinks, AReconnectIsToldForItsTargetOnly) {
  fixture f(emitter::eviction_mode::expire, three);
  for (const auto& t : three) f.ports[t]->channel(channel_state::ready);
  f.t.run();
  f.ports["b:2"]->channel(channel_state::idle);
  f.t.run();
  f.ports["b:2"]->channel(channel_state::ready);
  f.t.run();
  auto heard = f.listener.starting_with<atom::reconnected>();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].get_as<std::string>(1), "b:2");
}

TEST(EmitterLinks, TheStatusListsEveryTarget) {
  fixture f(emitter::eviction_mode::expire, {"a:1", "b:2"});
  f.send_unit(unit(1, false, 1, 0), "a:1");
  std::optional<actor_status> st;
  auto client = f.t.sys().spawn([&](caf::event_based_actor* self) {
    self->request(f.aut, std::chrono::seconds(5), atom::status_v)
        .then([&](const actor_status& s) { st = s; });
  });
  f.t.stop_at_end(client);
  f.t.run();
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->integer("targets"), 2);
  EXPECT_EQ(st->integer("queued_units"), 1) << "the total over every target";
  const auto* a = st->find("target[a:1]");
  ASSERT_NE(a, nullptr);
  const auto& m = std::get<actor_status::string_map>(*a);
  std::map<std::string, std::string> fields(m.begin(), m.end());
  EXPECT_EQ(fields["queued_units"], "1");
  EXPECT_EQ(fields["in_flight"], "1");
  for (const char* k : {"channel", "units_done", "units_failed", "deadline_ms", "last_error"})
    EXPECT_EQ(fields.count(k), 1u) << k;
  EXPECT_NE(st->find("target[b:2]"), nullptr);
}

}  // namespace
}  // namespace kvrelay
