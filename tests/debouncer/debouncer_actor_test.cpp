// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The debouncer's shells under CAF's deterministic scheduler: recorders stand in for the emitter,
// the decoder and the supervisor; the test answers units and moves the clock. No sockets.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "actors/debouncer/debouncer_actor.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay {
namespace {

using std::chrono::milliseconds;
using testing::deterministic_system;
using testing::recorder;

shard_ops_ptr batch(std::vector<prefix_op> v, uint64_t epoch = 1) {
  auto o = std::make_shared<shard_ops>();
  o->epoch = epoch;
  o->had_store = true;
  o->ts_us = 1000;
  o->ops = std::move(v);
  return o;
}
prefix_op up(uint64_t fp) { return prefix_op{prefix_op::kind::upsert, fp, 16, tier::t1}; }
prefix_op ev(uint64_t fp) { return prefix_op{prefix_op::kind::evict, fp, 16, tier::t1}; }

std::vector<health_fact> facts(const recorder& r) { return r.all<health_fact>(); }

struct Shell : ::testing::Test {
  deterministic_system t;
  recorder emitter{t};
  recorder decoder{t};
  recorder supervisor{t};
  pipeline_context ctx;
  debouncer_options opts;
  size_t seen = 0;  // units already handled by the test

  void SetUp() override {
    ctx.name = "det-0";
    ctx.wall_us = [] { return int64_t{7'000'000}; };
    ctx.health = supervisor.as<health_listener_actor>();
    opts.protocol.refresh_interval = milliseconds(0);
    opts.protocol.shutdown_clear = false;
    decoder.reply_with([](const caf::message&) { return caf::make_message(true); });
  }
  template <class Hdl>
  void stop_at_end(const Hdl& h) {
    t.stop_at_end(caf::actor_cast<caf::actor>(h));
  }
  // Units the emitter received since the last call.
  std::vector<emit_unit_ptr> fresh_units() {
    auto all = emitter.all_last<emit_unit_ptr>();
    std::vector<emit_unit_ptr> v(all.begin() + static_cast<std::ptrdiff_t>(seen), all.end());
    seen = all.size();
    return v;
  }
  // Asks `hdl` to drain from a client actor; the answer lands in the returned slot.
  template <class Hdl>
  std::shared_ptr<std::optional<bool>> ask_drain(const Hdl& hdl) {
    auto slot = std::make_shared<std::optional<bool>>();
    auto client = t.sys().spawn([=](caf::event_based_actor* self) {
      self->request(hdl, std::chrono::seconds(10), atom::drain_v)
          .then([=](bool ok) { *slot = ok; }, [=](caf::error&) { *slot = false; });
    });
    t.stop_at_end(client);
    t.run();
    return slot;
  }
  // The emitter names its one target (a recorder does not): units held until then go out.
  template <class Hdl>
  void name_target(const Hdl& aut) {
    caf::anon_send(aut, atom::targets_v, std::vector<std::string>{"policy:9090"});
    t.run();
  }
  template <class Hdl>
  void answer(const Hdl& aut, const emit_unit_ptr& u, bool ok) {
    caf::anon_send(aut, emit_result{"policy:9090", u->id, ok, ok ? 0u : 1u, true,
                                    ok ? "" : "UNAVAILABLE"});
    t.run();
  }
};

TEST_F(Shell, AnOutageEndsWithTheClearFirstThenTheReReport) {
  auto aut = spawn_debouncer(t.sys(), ctx, opts, emitter.as<emitter_actor>());
  stop_at_end(aut);
  caf::anon_send(aut, atom::update_v, decoder.as<decoder_actor>());
  t.run();
  name_target(aut);
  EXPECT_EQ(emitter.starting_with<atom::update>().size(), 1u)
      << "the emitter learns whom to tell about reconnects";
  auto u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  answer(aut, u[0], true);
  ASSERT_EQ(facts(supervisor).size(), 1u);
  EXPECT_EQ(facts(supervisor)[0], health_fact::server_ok);

  caf::anon_send(aut, batch({ev(1)}));
  t.run();
  u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  answer(aut, u[0], false);
  EXPECT_EQ(facts(supervisor).back(), health_fact::server_failed);

  // The server is away: what the engine does now goes nowhere but the re-report's source.
  caf::anon_send(aut, batch({up(2), ev(3)}));
  t.run();
  t.advance(milliseconds(100));
  EXPECT_TRUE(fresh_units().empty()) << "nothing but the probe while unhealthy";

  t.advance(milliseconds(500));  // the first probe's backoff (jittered, at most 500 ms)
  u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear && u[0]->adds.empty() && u[0]->evicts.empty()) << "the probe";
  answer(aut, u[0], true);
  EXPECT_EQ(facts(supervisor).back(), health_fact::server_ok);
  EXPECT_EQ(decoder.starting_with<atom::walk>().size(), 1u) << "a walk of the index begins";

  // Reconnect right after the resync: deferred to 5 s after it, then a probe again.
  caf::anon_send(aut, atom::reconnected_v, std::string("policy:9090"));
  t.run();
  EXPECT_TRUE(fresh_units().empty());
  t.advance(milliseconds(5000));
  u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear);
}

TEST_F(Shell, DrainEndsWithTheFinalClearWhenAsked) {
  opts.protocol.shutdown_clear = true;
  auto aut = spawn_debouncer(t.sys(), ctx, opts, emitter.as<emitter_actor>());
  stop_at_end(aut);
  t.run();
  name_target(aut);
  answer(aut, fresh_units().at(0), true);
  caf::anon_send(aut, batch({up(5)}));
  t.run();
  auto drained = ask_drain(aut);
  auto u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0]->clear && u[0]->adds.empty()) << "pending is superseded by the last clear";
  EXPECT_FALSE(*drained) << "not before the clear is acknowledged";
  answer(aut, u[0], true);
  ASSERT_TRUE(*drained);
  EXPECT_TRUE(**drained);
}

TEST_F(Shell, MergedRanksShareOneDebouncerAndOneStream) {
  recorder decoder1{t};
  recorder supervisor1{t};
  decoder1.reply_with([](const caf::message&) { return caf::make_message(true); });
  auto rctx = ctx;
  rctx.name = "vllm-0";
  rctx.health = nullptr;
  auto replica = spawn_replica_debouncer(t.sys(), rctx, opts);
  stop_at_end(replica);
  debouncer_options ro = opts;
  ro.replica = replica;
  ro.merged_rank = 0;
  auto rank0 = spawn_debouncer(t.sys(), ctx, ro, emitter.as<emitter_actor>());
  auto ctx1 = ctx;
  ctx1.name = "vllm-0-dp1";
  ctx1.health = supervisor1.as<health_listener_actor>();
  ro.merged_rank = 1;
  recorder other_emitter{t};
  auto rank1 = spawn_debouncer(t.sys(), ctx1, ro, other_emitter.as<emitter_actor>());
  stop_at_end(rank0);
  stop_at_end(rank1);
  caf::anon_send(rank0, atom::update_v, decoder.as<decoder_actor>());
  caf::anon_send(rank1, atom::update_v, decoder1.as<decoder_actor>());
  t.run();
  name_target(replica);
  auto u = fresh_units();
  ASSERT_EQ(u.size(), 1u) << "one clear for the replica, at its start";
  EXPECT_TRUE(u[0]->clear);
  answer(replica, u[0], true);
  EXPECT_EQ(facts(supervisor1).size(), 1u) << "every rank's supervisor hears the server";

  caf::anon_send(rank0, batch({up(1), up(2)}));
  caf::anon_send(rank1, batch({up(1)}));
  t.run();
  t.advance(milliseconds(100));
  u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0]->adds.size(), 2u) << "1 once, through rank 0's emitter";
  EXPECT_TRUE(other_emitter.all_last<emit_unit_ptr>().empty());
  answer(replica, u[0], true);

  caf::anon_send(rank0, batch({ev(1)}));
  t.run();
  EXPECT_TRUE(fresh_units().empty()) << "rank 1 still holds 1";
  caf::anon_send(rank1, batch({ev(1)}));
  t.run();
  u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  ASSERT_EQ(u[0]->evicts.size(), 1u);
  EXPECT_EQ(u[0]->evicts[0].fingerprint, 1u);
  answer(replica, u[0], true);

  // Rank 0's clear: only what it alone held goes.
  caf::anon_send(rank0, atom::clear_v, uint64_t{2}, int64_t{5});
  t.run();
  u = fresh_units();
  ASSERT_EQ(u.size(), 1u);
  EXPECT_FALSE(u[0]->clear);
  ASSERT_EQ(u[0]->evicts.size(), 1u);
  EXPECT_EQ(u[0]->evicts[0].fingerprint, 2u);
  answer(replica, u[0], true);

  auto drained = ask_drain(rank1);
  ASSERT_TRUE(*drained) << "a rank's drain is the replica's";
  EXPECT_TRUE(**drained);
}

}  // namespace
}  // namespace kvrelay
