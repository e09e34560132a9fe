// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The memory budget's charges on the data path, each shown necessary: the ingress' gate
// (base/memory_budget.hpp, MG1-MG3) sees only what is charged, so decoded work that waits for
// the shard, and ops that wait for the debouncer, must each be charged, or a shard or debouncer
// that falls behind holds memory the gate never sees and the ingress reads on into the OOM
// killer. Real decoder and shard shells under CAF's deterministic scheduler: the test decides
// who runs, so "the shard has not taken its work yet" is a state, not a race.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/decoder/decoder_actor.hpp"
#include "base/memory_budget.hpp"
#include "tests/decoder/decoder_test_util.hpp"
#include "tests/support/deterministic.hpp"

namespace kvrelay::test {
namespace {

constexpr uint32_t blocks = 64;  // per batch: 1024 tokens
constexpr size_t batches = 16;
// 64 KiB: the queues' share (MD1) is 16 KiB, a few batches' decoded work, and 64 messages.
constexpr uint64_t budget_bytes = uint64_t{64} << 10;

// Batch n: one BlockStored of `blocks` new root-anchored blocks.
std::string batch_bytes(uint32_t n) {
  std::vector<uint64_t> hashes;
  for (uint32_t i = 0; i < blocks; ++i) hashes.push_back(uint64_t{n} * 1000 + i + 1);
  return batch({M({{"type", S("BlockStored")},
                   {"block_hashes", Hashes(hashes)},
                   {"parent_block_hash", Nil()},
                   {"token_ids", Toks(iota_tokens(n * blocks * 16, blocks * 16))},
                   {"block_size", I(16)},
                   {"lora_id", Nil()},
                   {"medium", S("GPU")}})});
}

struct path {
  testing::deterministic_system t;
  testing::recorder debouncer{t};  // keeps every message: ops "not yet folded" until clear()
  testing::recorder health{t};
  pipeline_context ctx;
  decoder_actor decoder;

  path() {
    ctx.name = "budget-0";
    ctx.health = health.as<health_listener_actor>();
    ctx.budget = memory_budget::make(budget_bytes, budget_source::config);
    decoder = spawn_decoder(t.sys(), ctx, {}, debouncer.as<debouncer_actor>(), [](size_t) {});
    t.stop_at_end(caf::actor_cast<caf::actor>(decoder));
    t.run();
  }

  // A batch as the ingress delivers it: charged to the ingress queue, released with the message.
  void deliver(uint32_t n) {
    auto owner = std::make_shared<std::string>(batch_bytes(n));
    auto rb = std::make_shared<raw_batch>();
    rb->seq = n;
    rb->data = owner->data();
    rb->size = owner->size();
    rb->ticket = ctx.budget->charge(budget_queue::ingress, owner->size());
    rb->owner = std::move(owner);
    caf::anon_send(decoder, raw_batch_ptr{std::move(rb)});
  }

  // Runs the decoder alone: what it sends waits in its receivers' mailboxes.
  void run_decoder_only() {
    while (t.sched().prioritize(decoder)) t.sched().run_once();
  }

  // What the ingress' gate decides now (a fresh gate: MG2 at the limit).
  bool ingress_may_read() const {
    budget_gate g;
    const auto& b = *ctx.budget;
    return g.observe(b.used_bytes(), b.used_messages(), b.limit_bytes(), b.limit_messages(), 0)
        .read;
  }
  uint64_t bytes(budget_queue q) const { return ctx.budget->bytes(q); }
};

// The shard has not taken the decoded work yet (a shard slower than its decoder): the work is
// charged to the shard queue, which pauses the ingress, although every raw batch was released.
TEST(BudgetCharges, DecodedWorkWaitingForTheShardPausesTheIngress) {
  path p;
  for (uint32_t n = 0; n < batches; ++n) p.deliver(n);
  EXPECT_GE(p.bytes(budget_queue::ingress), batches * blocks * 16u) << "the ingress' charge";
  p.run_decoder_only();
  EXPECT_EQ(p.bytes(budget_queue::ingress), 0u) << "decoded: the raw batches are released";
  EXPECT_EQ(p.bytes(budget_queue::debouncer), 0u) << "the shard has not run";
  // The work holds every block's 16 token ids (4 bytes each) and is charged for them.
  EXPECT_GE(p.bytes(budget_queue::shard), batches * blocks * 16u * sizeof(uint32_t));
  EXPECT_EQ(p.ctx.budget->messages(budget_queue::shard), batches);
  EXPECT_FALSE(p.ingress_may_read()) << "decoded work waiting for the shard is not charged";
  // The shard takes it: the charge moves on with its ops (the next test), nothing stays behind.
  p.t.run();
  EXPECT_EQ(p.bytes(budget_queue::shard), 0u);
  EXPECT_EQ(p.ctx.budget->messages(budget_queue::shard), 0u);
}

// The debouncer has not folded the shard's ops yet (a debouncer that falls behind): the ops are
// charged to the debouncer queue, which pauses the ingress, until it lets them go.
TEST(BudgetCharges, OpsWaitingForTheDebouncerPauseTheIngress) {
  path p;
  for (uint32_t n = 0; n < batches; ++n) p.deliver(n);
  p.t.run();  // decoder and shard ran; the ops sit at the debouncer (the recorder keeps them)
  ASSERT_EQ(p.debouncer.all<shard_ops_ptr>().size(), batches);
  EXPECT_EQ(p.bytes(budget_queue::ingress), 0u);
  EXPECT_EQ(p.bytes(budget_queue::shard), 0u);
  // One op per block, each charged.
  EXPECT_GE(p.bytes(budget_queue::debouncer), batches * blocks * sizeof(index_op));
  EXPECT_EQ(p.ctx.budget->messages(budget_queue::debouncer), batches);
  EXPECT_FALSE(p.ingress_may_read()) << "ops waiting for the debouncer are not charged";
  // Folded (the messages destroyed): released, and the ingress reads again.
  p.debouncer.clear();
  EXPECT_EQ(p.ctx.budget->used_bytes(), 0u);
  EXPECT_EQ(p.ctx.budget->used_messages(), 0u);
  EXPECT_TRUE(p.ingress_may_read());
}

}  // namespace
}  // namespace kvrelay::test
