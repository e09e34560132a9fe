// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Index truth end to end: fake engine → kvrelay → policy server on loopback sockets.
// Every test states what the engine holds and waits (bounded) until the server's index for the
// replica is exactly that: lost removals in a partition's first batch, physical copies, the
// engine's own remaining_copy_counts, every medium (and REMOTE, and an unknown one), a LoRA fleet
// of 256 adapters, bin-wrapped events.
//
// "Still held" is asserted after a barrier: a sentinel block stored in a later batch of its own
// reaches the server only after every unit before it (the emitter runs units in order), so once
// the sentinel is visible, an eviction the earlier batch would have caused has been applied.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <random>
#include <set>
#include <sstream>

#include "base/fingerprint.hpp"
#include "tests/support/harness.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::e2e {
namespace {

constexpr int64_t bs = 16;
using fake::fake_event;
using fake::fake_hash;
using fake::wire_era;

// (adapter, prefix hash as hex of BE8) → (token_count, tier)
using view = std::map<std::pair<std::string, std::string>, std::pair<int64_t, int32_t>>;

std::string hex_be8(uint64_t fp) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (char c : fingerprint::to_be8(fp)) {
    out.push_back(digits[(static_cast<unsigned char>(c) >> 4) & 0xf]);
    out.push_back(digits[static_cast<unsigned char>(c) & 0xf]);
  }
  return out;
}

fake::encode_options era(wire_era e) {
  fake::encode_options o;
  o.era = e;
  return o;
}

// A chain of `n` blocks starting at token `first`, engine hashes h0, h0+1, ...
struct chain {
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> hashes;
  chain(uint32_t first, size_t n, uint64_t h0) : tokens(token_range(first, uint32_t(n * bs))) {
    for (size_t i = 0; i < n; ++i) hashes.push_back(h0 + i);
  }
  std::vector<fake_hash> wire() const {
    std::vector<fake_hash> out;
    for (uint64_t h : hashes) out.push_back(fake_hash::u(h));
    return out;
  }
  fake_event store(std::optional<std::string> adapter = std::nullopt,
                   std::optional<std::string> medium = std::string("GPU")) const {
    auto ev = stored(wire(), tokens, bs);
    ev.lora_name = adapter;
    ev.medium = medium;
    return ev;
  }
  fake_event remove(std::optional<std::string> medium = std::string("GPU")) const {
    auto ev = removed(wire());
    ev.medium = medium;
    return ev;
  }
  // What the server holds for this chain: every block with its cumulative tokens.
  void expect(view& v, const std::string& adapter = "", int32_t tier = 1) const {
    const auto fps = fingerprint::prefixes(tokens, bs);
    for (size_t i = 0; i < fps.size(); ++i)
      v[{adapter, hex_be8(fps[i])}] = {bs * static_cast<int64_t>(i + 1), tier};
  }
};

std::string describe(const view& want, const view& got) {
  std::ostringstream out;
  size_t lines = 0;
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end() || it->second != v) {
      if (lines++ < 8)
        out << "  want [" << k.first << "] " << k.second << " tokens " << v.first << " tier "
            << v.second << (it == got.end() ? " (missing)" : " (differs)") << "\n";
    }
  }
  for (const auto& [k, v] : got)
    if (!want.count(k) && lines++ < 8)
      out << "  extra [" << k.first << "] " << k.second << " tier " << v.second
          << " (the engine does not hold it)\n";
  if (lines == 0) return {};
  return "server index differs from the engine (want " + std::to_string(want.size()) + ", got " +
         std::to_string(got.size()) + "):\n" + out.str();
}

struct IndexTruth : ::testing::Test {
  std::unique_ptr<harness> h;
  std::set<std::string> sentinels;  // barrier blocks, left out of every comparison
  uint32_t next_sentinel = 4'000'000;

  void start(harness_options o = {}) {
    h = std::make_unique<harness>(std::move(o));
    ASSERT_TRUE(h->start_daemon()) << h->error();
  }
  void TearDown() override { h.reset(); }

  view server_view() const {
    view v;
    const auto doc = nlohmann::json::parse(h->server().index().dump_json());
    for (const auto& m : doc.at("models")) {
      if (m.at("tenant_id") != h->options().tenant_id ||
          m.at("model_id") != h->options().engine.model_id)
        continue;
      for (const auto& p : m.at("prefixes")) {
        const auto& reps = p.at("replicas");
        auto it = reps.find(h->replica());
        const std::string hash = p.at("prefix_hash").get<std::string>();
        if (it == reps.end() || sentinels.count(hash)) continue;
        // Fresh entries only, as a router sees them: an expire-mode eviction is a stale entry
        // that stays stored until the server's TTL sweep (a dump without the flag is all fresh).
        if (!it->value("fresh", true)) continue;
        v[{p.at("adapter_id").get<std::string>(), hash}] = {it->at("token_count").get<int64_t>(),
                                                            it->at("tier").get<int32_t>()};
      }
    }
    return v;
  }

  // Waits until the server holds exactly `want` for the replica; "" or the difference.
  std::string wait_view(const view& want) {
    std::string diff;
    harness::wait_until([&] { return (diff = describe(want, server_view())).empty(); },
                        std::chrono::seconds(15));
    return diff.empty() ? diff : diff + h->diagnose();
  }

  // Everything published before has reached the server (see the file comment).
  void barrier() {
    const chain s(next_sentinel, 1, 0xBA000000ull + next_sentinel);
    next_sentinel += 16;
    sentinels.insert(hex_be8(fingerprint::prefixes(s.tokens, bs).at(0)));
    h->publish({s.store()}, era(wire_era::g));
    ASSERT_TRUE(harness::wait_until([&] { return h->entry(fingerprint::prefixes(s.tokens, bs)[0]).has_value(); },
                                    std::chrono::seconds(15)))
        << "the barrier block never arrived\n"
        << h->diagnose();
  }
};

// ---- item 0: a removal in the batch that created its partition -------------------------------

TEST_F(IndexTruth, StoreAndRemoveInTheBasePartitionsFirstBatch) {
  start();
  const chain gone(100, 3, 1000), kept(500, 2, 2000);
  h->publish({gone.store(), gone.remove(), kept.store()}, era(wire_era::g));
  view want;
  kept.expect(want);
  EXPECT_EQ(wait_view(want), "");
  barrier();
  EXPECT_EQ(describe(want, server_view()), "");
}

TEST_F(IndexTruth, StoreAndRemoveInALoraPartitionsFirstBatch) {
  start();
  const chain base(100, 2, 1000), gone(300, 3, 2000), kept(600, 2, 3000);
  h->publish({base.store()}, era(wire_era::g));
  view want;
  base.expect(want);
  ASSERT_EQ(wait_view(want), "");
  // The adapter's first batch: its partition is created, stored into, removed from.
  h->publish({gone.store("sql-lora"), gone.remove(), kept.store("sql-lora")}, era(wire_era::g));
  kept.expect(want, "sql-lora");
  EXPECT_EQ(wait_view(want), "");
  barrier();
  EXPECT_EQ(describe(want, server_view()), "");
}

// ---- item 1: copies --------------------------------------------------------------------------

TEST_F(IndexTruth, TwoCopiesOneRemovedStillHeldTheSecondRemovedEvicted) {
  start();
  const chain c(100, 2, 1000);
  h->publish({c.store()}, era(wire_era::g));
  h->publish({c.store()}, era(wire_era::g));  // the engine recomputed the blocks: a second copy
  view want;
  c.expect(want);
  ASSERT_EQ(wait_view(want), "");
  h->publish({c.remove()}, era(wire_era::g));
  barrier();
  EXPECT_EQ(describe(want, server_view()), "") << "one copy is still resident";
  h->publish({c.remove()}, era(wire_era::g));
  EXPECT_EQ(wait_view({}), "");
}

TEST_F(IndexTruth, RemainingCopyCountsOneThenZero) {
  start();
  const chain c(100, 1, 1000);
  h->publish({c.store()}, era(wire_era::i));
  view want;
  c.expect(want);
  ASSERT_EQ(wait_view(want), "");
  // The engine says one copy is left, although kvrelay saw one store only: it is authoritative.
  auto one = c.remove();
  one.remaining_copy_counts = std::vector<uint32_t>{1};
  h->publish({one}, era(wire_era::i));
  barrier();
  EXPECT_EQ(describe(want, server_view()), "");
  auto zero = c.remove();
  zero.remaining_copy_counts = std::vector<uint32_t>{0};
  h->publish({zero}, era(wire_era::i));
  EXPECT_EQ(wait_view({}), "");
}

TEST_F(IndexTruth, ReusedReannouncementIsNoCopy) {
  start();
  const chain c(100, 2, 1000);
  h->publish({c.store()}, era(wire_era::i));
  auto again = c.store();
  again.origin = std::string("REUSED");  // kv_cache_report_mode="full": a prefix-cache hit
  h->publish({again}, era(wire_era::i));
  view want;
  c.expect(want);
  ASSERT_EQ(wait_view(want), "");
  h->publish({c.remove()}, era(wire_era::i));
  EXPECT_EQ(wait_view({}), "") << "the one physical copy went";
}

// ---- item 2: media ---------------------------------------------------------------------------

TEST_F(IndexTruth, EveryKnownMediumMapsToItsTierAndTheUnknownIsNotIndexed) {
  start();
  struct medium_case {
    std::optional<std::string> medium;
    int32_t tier;
  };
  const std::vector<medium_case> cases = {
      {std::nullopt, 1},          {std::string("GPU"), 1},     {std::string("CPU"), 2},
      {std::string("cpu"), 2},    {std::string("CPU_PINNED"), 2}, {std::string("lmcache-l1"), 2},
      {std::string("DISK"), 3},   {std::string("FS"), 3},      {std::string("OBJ"), 3},
      {std::string("STORAGE"), 3}, {std::string("EXTERNAL"), 3},
      {std::string("lmcache-l2-redis"), 3}};
  std::vector<chain> chains;
  std::vector<fake_event> stores, removals;
  view want;
  for (size_t i = 0; i < cases.size(); ++i) {
    chains.emplace_back(static_cast<uint32_t>(1000 * (i + 1)), 1, 100 * (i + 1));
    stores.push_back(chains.back().store(std::nullopt, cases[i].medium));
    removals.push_back(chains.back().remove(cases[i].medium));
    chains.back().expect(want, "", cases[i].tier);
  }
  const chain unknown(90000, 2, 9000);
  stores.push_back(unknown.store(std::nullopt, std::string("QUANTUM_FOAM")));
  h->publish(stores, era(wire_era::g));
  EXPECT_EQ(wait_view(want), "");
  EXPECT_TRUE(harness::wait_until([&] {
    return h->metric_sum("kvrelay_unknown_medium_events_total", {{"medium", "QUANTUM_FOAM"}}) >=
           1.0;
  })) << h->diagnose();
  EXPECT_GE(h->metric_sum("kvrelay_blocks_total", {{"type", "stored"}, {"medium", "unknown"}}), 2);
  EXPECT_GE(h->metric_sum("kvrelay_blocks_total", {{"type", "stored"}, {"medium", "FS"}}), 1);
  // The unknown medium's removal evicts nothing; every known one evicts its block.
  removals.push_back(unknown.remove(std::string("QUANTUM_FOAM")));
  h->publish(removals, era(wire_era::g));
  EXPECT_EQ(wait_view({}), "");
}

TEST_F(IndexTruth, RemoteBlocksAreNeverWarmerThanT3) {
  start();
  const chain gpu_remote(100, 1, 1000), cpu_local(300, 1, 2000), storage_remote(500, 1, 3000);
  auto a = gpu_remote.store();
  a.locality = std::string("REMOTE");
  auto b = cpu_local.store(std::nullopt, std::string("CPU"));
  b.locality = std::string("LOCAL");
  auto c = storage_remote.store(std::nullopt, std::string("STORAGE"));
  c.locality = std::string("REMOTE");
  h->publish({a, b, c}, era(wire_era::i));
  view want;
  gpu_remote.expect(want, "", 3);
  cpu_local.expect(want, "", 2);
  storage_remote.expect(want, "", 3);
  EXPECT_EQ(wait_view(want), "");
  // The REMOTE removal takes the REMOTE copy; a LOCAL GPU copy stored later is T1 again.
  auto rm = gpu_remote.remove();
  rm.locality = std::string("REMOTE");
  h->publish({rm, gpu_remote.store()}, era(wire_era::i));
  want.erase(want.find({"", hex_be8(fingerprint::prefixes(gpu_remote.tokens, bs)[0])}));
  gpu_remote.expect(want, "", 1);
  EXPECT_EQ(wait_view(want), "");
}

// ---- item 5: a LoRA fleet --------------------------------------------------------------------

TEST_F(IndexTruth, TwoHundredFiftySixAdaptersWithRemovals) {
  start();
  std::vector<chain> chains;
  std::vector<fake_event> stores;
  view want;
  for (uint32_t a = 0; a < 256; ++a) {
    chains.emplace_back(10'000 + a * 64, 2, 100'000 + a * 8);
    stores.push_back(chains.back().store("lora-" + std::to_string(a)));
  }
  h->publish(stores, era(wire_era::g));
  for (uint32_t a = 0; a < 256; ++a) chains[a].expect(want, "lora-" + std::to_string(a));
  ASSERT_EQ(wait_view(want), "");
  // Every adapter loses its second block, in one batch of removals naming no adapter.
  std::vector<fake_event> removals;
  want.clear();
  for (uint32_t a = 0; a < 256; ++a) {
    const auto& c = chains[a];
    auto rm = removed({fake_hash::u(c.hashes[1])});
    removals.push_back(rm);
    chain first(10'000 + a * 64, 1, c.hashes[0]);
    first.expect(want, "lora-" + std::to_string(a));
  }
  h->publish(removals, era(wire_era::g));
  EXPECT_EQ(wait_view(want), "");
  // Each removal reached the one partition holding its hash, and no other.
  EXPECT_EQ(h->metric_sum("kvrelay_index_blocks_total", {{"outcome", "unknown_removal"}}), 0);
  EXPECT_EQ(h->metric_sum("kvrelay_removal_routing_total", {{"outcome", "unrouted"}}), 0);
}

// ---- also on the wire: bin-wrapped events ----------------------------------------------------

TEST_F(IndexTruth, BinWrappedBatchesAreDecodedLikeAnyOther) {
  start();
  const chain c(100, 2, 1000), d(400, 1, 2000);
  auto wrapped = era(wire_era::c);
  wrapped.bin_wrapped = true;  // an llm-d storage publisher: [ts, [bin(event), ...]]
  h->publish({c.store(), d.store()}, wrapped);
  view want;
  c.expect(want);
  d.expect(want);
  ASSERT_EQ(wait_view(want), "");
  // The storage publisher's own store: no tokens, parent 0, block size 0 - a location update.
  auto on_storage = stored(c.wire(), {}, 0, fake_hash::u(0));
  on_storage.medium = std::string("STORAGE");
  h->publish({on_storage, d.remove()}, wrapped);
  want.erase({"", hex_be8(fingerprint::prefixes(d.tokens, bs)[0])});
  ASSERT_EQ(wait_view(want), "");
  // The GPU copies go; the storage copies keep the blocks, at T3.
  h->publish({c.remove()}, wrapped);
  want.clear();
  c.expect(want, "", 3);
  EXPECT_EQ(wait_view(want), "");
}

}  // namespace
}  // namespace kvrelay::e2e

// ---- item 6: rpc evictions and LoRA copies of base-model blocks -------------------
// Shared system prompts: the base model and three LoRA adapters cache blocks of the same tokens
// (one fingerprint, engine hashes of their own), 20 % of requests on an adapter, leaf-first
// evictions. In rpc mode the reference server reads a base-model PREFIX_EVICTED as "every
// adapter": kvrelay must put the adapters' entries back (debouncer DB18), or, against a server
// that reads adapter_scoped (PR #164), need not. After every round the server holds exactly what
// the engine holds.

namespace kvrelay::e2e {
namespace {

struct shared_prompts {
  static constexpr uint32_t prompts = 6, blocks = 3;
  const std::vector<std::string> adapters{"", "sql-lora", "chat-lora", "code-lora"};
  std::map<std::pair<size_t, uint32_t>, size_t> held;  // (adapter, prompt) → leading blocks held

  static chain of(size_t a, uint32_t p) {
    return chain(10'000 + p * 64, blocks, 1'000'000 + a * 10'000 + p * 16);
  }
  // One request or one eviction, as the engine would publish it.
  fake_event step(std::mt19937& rng) {
    const size_t a = rng() % 5 == 0 ? 1 + rng() % 3 : 0;
    const uint32_t p = static_cast<uint32_t>(rng() % prompts);
    const chain c = of(a, p);
    auto wire = c.wire();
    size_t& n = held[{a, p}];
    if (n == blocks || (n > 0 && rng() % 3 == 0)) {  // evict a tail, leaf first
      const size_t keep = rng() % n;
      auto ev = removed({wire.begin() + static_cast<std::ptrdiff_t>(keep),
                         wire.begin() + static_cast<std::ptrdiff_t>(n)});
      n = keep;
      return ev;
    }
    const size_t from = n;  // store the rest of the chain
    std::optional<fake_hash> parent;
    if (from > 0) parent = wire[from - 1];
    auto ev = stored({wire.begin() + static_cast<std::ptrdiff_t>(from), wire.end()},
                     {c.tokens.begin() + static_cast<std::ptrdiff_t>(from * bs), c.tokens.end()},
                     bs, parent);
    if (!adapters[a].empty()) ev.lora_name = adapters[a];
    n = blocks;
    return ev;
  }
  view want() const {
    view v;
    for (const auto& [k, n] : held) {
      const auto fps = fingerprint::prefixes(of(k.first, k.second).tokens, bs);
      for (size_t i = 0; i < n; ++i)
        v[{adapters[k.first], hex_be8(fps[i])}] = {bs * static_cast<int64_t>(i + 1), 1};
    }
    return v;
  }
};

struct RpcLora : IndexTruth {
  // Runs the rounds; returns the entries kvrelay put back after a base-model sweep.
  double run(bool server_reads_scope) {
    harness_options o;
    o.server_adapter_scoped = server_reads_scope;
    o.tweak = [server_reads_scope](config::daemon_config& c) {
      c.server.eviction_mode = config::eviction_mode::rpc;
      c.server.scoped_evictions = server_reads_scope;
    };
    start(std::move(o));
    std::mt19937 rng(24);
    shared_prompts model;
    size_t lora_evictions_at_risk = 0;
    for (int round = 0; round < 12; ++round) {
      std::vector<fake_event> batch;
      for (int i = 0; i < 12; ++i) batch.push_back(model.step(rng));
      h->publish(batch, era(wire_era::g));
      barrier();
      const auto want = model.want();
      for (const auto& [k, v] : want) lora_evictions_at_risk += k.first.empty() ? 0 : 1;
      // The barrier's add may share a unit with the round's evictions, which go after it: wait.
      const auto diff = wait_view(want);
      EXPECT_EQ(diff, "") << "round " << round;
      if (!diff.empty()) break;
    }
    EXPECT_GT(lora_evictions_at_risk, 0u) << "the model must put LoRA copies at risk";
    return h->metric_sum("kvrelay_sweep_restores_total", {});
  }
};

TEST_F(RpcLora, AgainstTheReferenceServerTheSweptAdapterEntriesArePutBack) {
  EXPECT_GT(run(false), 0) << "the seed must make a base-model eviction sweep a LoRA entry";
}

TEST_F(RpcLora, AgainstAServerThatReadsAdapterScopedNothingNeedsPuttingBack) {
  EXPECT_EQ(run(true), 0);
}

}  // namespace
}  // namespace kvrelay::e2e
