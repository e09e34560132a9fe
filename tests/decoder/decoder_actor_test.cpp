// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The decoder shell under CAF's deterministic scheduler: it executes the router's steps in order
// (work to its shard, clears to the shard and the debouncer), publishes the router's counters and
// returns credit; the shard it spawned turns the work into ops for the debouncer.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <map>

#include "actors/decoder/decoder_actor.hpp"
#include "base/fingerprint.hpp"
#include "decoder_test_util.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay::test {
namespace {

const std::vector<uint32_t> k16 = iota_tokens(1, 16);

item store_ev(uint64_t h, std::optional<std::string> lora = std::nullopt,
              std::string medium = "GPU") {
  return M({{"type", S("BlockStored")},     {"block_hashes", Hashes({h})},
            {"parent_block_hash", Nil()},   {"token_ids", Toks(k16)},
            {"block_size", I(16)},          {"lora_id", Nil()},
            {"medium", S(medium)},          {"lora_name", lora ? S(*lora) : Nil()}});
}
item remove_ev(uint64_t h, std::string medium = "GPU") {
  return M({{"type", S("BlockRemoved")}, {"block_hashes", Hashes({h})}, {"medium", S(medium)}});
}
item clear_ev() { return M({{"type", S("AllBlocksCleared")}}); }

raw_batch_ptr raw(uint64_t seq, const std::string& bytes, bool replayed = false) {
  auto owner = std::make_shared<std::string>(bytes);
  auto rb = std::make_shared<raw_batch>();
  rb->seq = seq;
  rb->replayed = replayed;
  rb->data = owner->data();
  rb->size = owner->size();
  rb->owner = owner;
  return rb;
}

struct fixture {
  testing::deterministic_system t;
  testing::recorder debouncer{t};
  testing::recorder health{t};
  pipeline_context ctx;
  size_t credits = 0;
  decoder_actor aut;

  explicit fixture(decoder_options opts = {}) {
    ctx.name = "dec-0";
    ctx.health = health.as<health_listener_actor>();
    aut = spawn_decoder(t.sys(), ctx, opts, debouncer.as<debouncer_actor>(),
                        [this](size_t n) { credits += n; });
    t.stop_at_end(caf::actor_cast<caf::actor>(aut));
    t.run();
  }

  void send(uint64_t seq, const std::vector<item>& events) {
    caf::anon_send(aut, raw(seq, batch(events)));
    t.run();
  }

  // adapter → the ops the shard sent for it, in order: "+fp" / "-fp" with the epoch.
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> ops() const {
    std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> out;
    for (const auto& o : debouncer.all<shard_ops_ptr>()) {
      for (const auto& op : o->ops) {
        const char* sign = op.op == index_op::kind::upsert ? "+" : "-";
        out[o->adapter].emplace_back(o->epoch, sign + std::to_string(op.fingerprint % 1000));
      }
    }
    return out;
  }

  double metric(const std::string& name, label_set labels = {}) const {
    return ctx.metrics->value(name, ctx.labels(std::move(labels)));
  }
};

// Every block here has the same tokens, hence the same fingerprint.
uint64_t fp_mod() { return fingerprint::content(k16.data(), 16) % 1000; }

// BR7 through the shell: the good events of a batch with a bad one are indexed, the bad one is
// counted by kind and reason, and an undecodable removal tells the supervisor.
TEST(DecoderActor, ASkippedRemovalIsCountedAndTellsTheSupervisor) {
  fixture f;
  const item bad_removal =
      M({{"type", S("BlockRemoved")}, {"block_hashes", S("oops")}, {"medium", S("GPU")}});
  f.send(0, {store_ev(1), bad_removal, store_ev(2, "sql-lora")});
  const std::string f1 = std::to_string(fp_mod());
  using L = std::vector<std::pair<uint64_t, std::string>>;
  EXPECT_EQ(f.ops()[""], (L{{1, "+" + f1}}));
  EXPECT_EQ(f.ops()["sql-lora"], (L{{1, "+" + f1}})) << "the event after the bad one applies";
  EXPECT_EQ(f.metric("kvrelay_malformed_events_total",
                     {{"type", "removed"}, {"reason", "bad_hash"}}),
            1);
  EXPECT_EQ(f.metric("kvrelay_batches_total"), 1) << "the batch is not dropped";
  EXPECT_EQ(f.health.all<health_fact>(),
            (std::vector<health_fact>{health_fact::batch_decoded, health_fact::removal_lost}));
  // Said once until a clear; the clear makes the index match again, the next loss is said.
  f.send(1, {bad_removal});
  f.send(2, {clear_ev(), bad_removal});
  EXPECT_EQ(f.health.all<health_fact>(),
            (std::vector<health_fact>{health_fact::batch_decoded, health_fact::removal_lost,
                                      health_fact::engine_cleared, health_fact::removal_lost}));
  EXPECT_EQ(f.metric("kvrelay_malformed_events_total",
                     {{"type", "removed"}, {"reason", "bad_hash"}}),
            3);
  EXPECT_EQ(f.credits, 3u);
}

TEST(DecoderActor, ExecutesStepsInOrderAndTheShardRoutesRemovals) {
  fixture f;
  // A clear between a base store and a LoRA store + removal in the LoRA partition's first batch.
  f.send(0, {store_ev(1), clear_ev(), store_ev(2, "sql-lora"), remove_ev(2)});
  const auto clears = f.debouncer.starting_with<atom::clear>();
  ASSERT_EQ(clears.size(), 1u);
  EXPECT_EQ(clears[0].get_as<uint64_t>(1), 2u) << "the clear's new epoch";
  EXPECT_GT(clears[0].get_as<int64_t>(2), 0) << "the batch time";
  const std::string f1 = std::to_string(fp_mod());
  using L = std::vector<std::pair<uint64_t, std::string>>;
  EXPECT_EQ(f.ops()[""], (L{{1, "+" + f1}}));
  EXPECT_EQ(f.ops()["sql-lora"], (L{{2, "+" + f1}, {2, "-" + f1}}))
      << "the removal reached the partition its batch created";
  EXPECT_EQ(f.credits, 1u);
  // The clear also tells the supervisor the engine's cache is empty (the index is complete).
  EXPECT_EQ(f.health.all<health_fact>(),
            (std::vector<health_fact>{health_fact::batch_decoded, health_fact::engine_cleared}));
  EXPECT_EQ(f.metric("kvrelay_events_total", {{"type", "BlockStored"}, {"medium", "GPU"}}), 2);
  EXPECT_EQ(f.metric("kvrelay_events_total", {{"type", "BlockRemoved"}, {"medium", "GPU"}}), 1);
  EXPECT_EQ(f.metric("kvrelay_blocks_total", {{"type", "stored"}, {"medium", "GPU"}}), 2);
  EXPECT_EQ(f.metric("kvrelay_events_total", {{"type", "AllBlocksCleared"}}), 1);
  EXPECT_EQ(f.metric("kvrelay_batches_total"), 1);
  EXPECT_EQ(f.metric("kvrelay_index_blocks_total", {{"adapter", "sql-lora"}, {"outcome", "evicted"}}),
            1);
  EXPECT_EQ(f.metric("kvrelay_resident_blocks", {{"adapter", ""}}), 0) << "cleared";
  EXPECT_EQ(f.metric("kvrelay_resident_blocks", {{"adapter", "sql-lora"}}), 0);
  // Said once per clear: a later batch without one tells the supervisor nothing.
  f.send(1, {store_ev(3)});
  EXPECT_EQ(f.health.all<health_fact>(),
            (std::vector<health_fact>{health_fact::batch_decoded, health_fact::engine_cleared}));
  EXPECT_EQ(f.metric("kvrelay_batches_total"), 2);
}

// BR8 through the shell and the shard: the debouncer learns which ops are history (DB19).
TEST(DecoderActor, AReplayedBatchReachesTheDebouncerAsHistory) {
  fixture f;
  caf::anon_send(f.aut, raw(0, batch({store_ev(1), store_ev(2, "sql-lora")}), true));
  f.t.run();
  f.send(1, {store_ev(3)});
  const auto ops = f.debouncer.all<shard_ops_ptr>();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_TRUE(ops[0]->replayed);
  EXPECT_TRUE(ops[1]->replayed);
  EXPECT_FALSE(ops[2]->replayed) << "the live batch after it";
}

TEST(DecoderActor, UnknownMediaAndBadBatchesAreCountedNotIndexed) {
  fixture f;
  f.send(0, {store_ev(1, std::nullopt, "QUANTUM"), remove_ev(1, "QUANTUM"), store_ev(2, {}, "FS")});
  caf::anon_send(f.aut, raw(1, std::string("\xc1")));
  f.t.run();
  EXPECT_EQ(f.metric("kvrelay_unknown_medium_events_total", {{"medium", "QUANTUM"}}), 2);
  EXPECT_EQ(f.metric("kvrelay_events_total", {{"type", "BlockStored"}, {"medium", "unknown"}}), 1);
  EXPECT_EQ(f.metric("kvrelay_events_total", {{"type", "BlockStored"}, {"medium", "FS"}}), 1);
  EXPECT_EQ(f.metric("kvrelay_batches_dropped_total", {{"reason", "bad_envelope"}}), 1);
  EXPECT_EQ(f.credits, 2u) << "a dropped batch returns its credit too";
  const auto ops = f.ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops.begin()->second.size(), 1u) << "only the FS store was indexed";
}

TEST(DecoderActor, NoticesClearAndAWalkReachesTheShard) {
  fixture f;
  f.send(0, {store_ev(1)});
  auto notice = std::make_shared<ingress_notice>();
  notice->what = ingress_notice::kind::incarnation_reset;
  caf::anon_send(f.aut, ingress_notice_ptr{notice});
  f.t.run();
  caf::anon_send(f.aut, atom::walk_v, uint64_t{7}, uint32_t{0}, uint64_t{0}, uint32_t{100});
  f.t.run();
  EXPECT_EQ(f.debouncer.starting_with<atom::clear>().size(), 1u);
  // The shard forgot everything at the clear: the walk finds nothing.
  std::vector<shard_ops_ptr> chunk;
  for (const auto& o : f.debouncer.all<shard_ops_ptr>())
    if (o->walk == 7) chunk.push_back(o);
  ASSERT_EQ(chunk.size(), 1u);
  EXPECT_TRUE(chunk[0]->ops.empty());
  EXPECT_TRUE(chunk[0]->walk_last && chunk[0]->walk_done);
  f.send(1, {store_ev(5)});
  caf::anon_send(f.aut, atom::walk_v, uint64_t{8}, uint32_t{0}, uint64_t{0}, uint32_t{100});
  f.t.run();
  chunk.clear();
  for (const auto& o : f.debouncer.all<shard_ops_ptr>())
    if (o->walk == 8) chunk.push_back(o);
  ASSERT_EQ(chunk.size(), 1u);
  EXPECT_EQ(chunk[0]->epoch, 2u);
  EXPECT_TRUE(chunk[0]->resync);
  EXPECT_EQ(chunk[0]->ops.size(), 1u) << "read after the batch before it (mailbox order)";
  EXPECT_EQ(chunk[0]->resident, 1u);
}

TEST(DecoderActor, ASleepingEngineClearsThePipeline) {
  fixture f;
  f.send(0, {store_ev(1)});
  auto notice = std::make_shared<ingress_notice>();
  notice->what = ingress_notice::kind::engine_asleep;  // from the supervisor (the scraper saw it)
  caf::anon_send(f.aut, ingress_notice_ptr{notice});
  f.t.run();
  const auto clears = f.debouncer.starting_with<atom::clear>();
  ASSERT_EQ(clears.size(), 1u);
  EXPECT_EQ(clears[0].get_as<uint64_t>(1), 2u);
  f.send(1, {store_ev(2)});
  EXPECT_EQ(f.ops()[""].back().first, 2u) << "what the engine stores after the wake is indexed";
}

TEST(DecoderActor, DrainAndStatusGoThroughTheShard) {
  fixture f;
  f.send(0, {store_ev(1), store_ev(2, "a")});
  bool drained = false;
  actor_status st;
  auto client = f.t.sys().spawn([&](caf::event_based_actor* self) {
    self->request(f.aut, std::chrono::seconds(1), atom::drain_v).then([&](bool ok) {
      drained = ok;
    });
    self->request(f.aut, std::chrono::seconds(1), atom::status_v).then([&](actor_status& s) {
      st = std::move(s);
    });
  });
  f.t.stop_at_end(client);
  f.t.run();
  EXPECT_TRUE(drained);
  EXPECT_EQ(st.integer("partitions"), 2);
  ASSERT_EQ(st.children.size(), 1u);
  EXPECT_EQ(st.children[0].name, "shard");
  EXPECT_EQ(st.children[0].integer("resident_blocks"), 2);
  EXPECT_EQ(st.children[0].integer("directory_entries"), 1) << "a's block; the base one is home's";
}

}  // namespace
}  // namespace kvrelay::test
