// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// An eviction storm end to end, in each eviction mode: a fake engine with a 4 Ki-block cache
// publishes 100 k+ blocks as fast as it can (one eviction per stored block once full), kvrelay
// relays them to the demo policy server, and once kvrelay has drained the server's *fresh*
// entries for the replica equal exactly what the engine still holds. How fast is the
// benchmark's business (scripts/bench.sh, case fullcache); here only the end state counts, with a
// generous bound.
//
// The engine: requests store chains of 1-4 fresh blocks (30 % under a LoRA adapter); past the
// capacity the oldest chains go, leaf first, as one BlockRemoved per batch. Flat chains keep the
// model O(1) per block, so the test spends its time in kvrelay, not in the model.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "base/fingerprint.hpp"
#include "tests/evictions/mode.hpp"
#include "tests/support/fault_fixture.hpp"

namespace kvrelay::evictions {
namespace {

using namespace std::chrono_literals;
using faults::index_view;

constexpr int64_t block_size = 16;
constexpr size_t capacity = 4096;
#if defined(__SANITIZE_THREAD__)
// Under ThreadSanitizer (CI) the storm is about races, not scale: 100 k blocks took ~3 min there.
constexpr size_t blocks_to_store = 20'000;
#else
constexpr size_t blocks_to_store = 100'000;
#endif

class storm_engine {
 public:
  explicit storm_engine(uint64_t seed) : rng_(seed) {}

  // One batch: `chains` new chains, then whatever must go to stay within the capacity.
  std::vector<fake::fake_event> batch(size_t chains) {
    std::vector<fake::fake_event> out;
    for (size_t c = 0; c < chains; ++c) out.push_back(store_chain());
    fake::fake_event rm;
    rm.t = fake::fake_event::type::removed;
    while (resident_ > capacity) {
      chain victim = std::move(live_.front());
      live_.pop_front();
      for (size_t i = victim.hashes.size(); i-- > 0;)  // leaf first
        rm.block_hashes.push_back(fake::fake_hash::u(victim.hashes[i]));
      resident_ -= victim.hashes.size();
    }
    if (!rm.block_hashes.empty()) out.push_back(std::move(rm));
    return out;
  }

  index_view expected() const {
    index_view v;
    for (const auto& c : live_)
      for (size_t i = 0; i < c.fps.size(); ++i)
        v[{c.adapter, faults::hex_be8(c.fps[i])}] = {static_cast<int32_t>((i + 1) * block_size), 1};
    return v;
  }
  uint64_t stored() const { return stored_; }
  size_t resident() const { return resident_; }

 private:
  struct chain {
    std::string adapter;
    std::vector<uint64_t> hashes, fps;
  };

  fake::fake_event store_chain() {
    chain c;
    if (rng_() % 10 < 3) c.adapter = faults::lora;
    const size_t n = 1 + rng_() % 4;
    fake::fake_event ev;
    ev.t = fake::fake_event::type::stored;
    ev.block_size = block_size;
    for (size_t i = 0; i < n * static_cast<size_t>(block_size); ++i)
      ev.token_ids.push_back(static_cast<uint32_t>(rng_() % 32000));
    if (!c.adapter.empty()) ev.lora_name = c.adapter;
    c.fps = fingerprint::prefixes(ev.token_ids, block_size);
    for (size_t i = 0; i < n; ++i) {
      c.hashes.push_back(++next_hash_ * 0x9e3779b97f4a7c15ULL);
      ev.block_hashes.push_back(fake::fake_hash::u(c.hashes.back()));
    }
    resident_ += n;
    stored_ += n;
    live_.push_back(std::move(c));
    return ev;
  }

  std::mt19937_64 rng_;
  uint64_t next_hash_ = 0;
  uint64_t stored_ = 0;
  size_t resident_ = 0;
  std::deque<chain> live_;
};

class EvictionStorm : public ::testing::TestWithParam<config::eviction_mode> {};

TEST_P(EvictionStorm, FreshEntriesEqualWhatTheEngineHoldsOnceDrained) {
  faults::fault_env env;
  set_mode(env.cfg, GetParam());
  // Server-side batching of the test's own load: a bigger window coalesces more per unit.
  env.cfg.engines[0].window = 20ms;
  std::string err;
  ASSERT_TRUE(env.start_daemon(&err)) << err;
  ASSERT_EQ(emitter_mode(*env.d), to_string(config::effective(GetParam())))
      << "the configured eviction mode did not reach the emitter";
  storm_engine engine(7);
  // The slow joiner: harmless empty batches until the daemon's SUB receives live ones.
  ASSERT_TRUE(faults::wait_until(
      [&] {
        env.publish_events({});
        return env.ingress_field("messages") > 0;
      },
      30s));
  while (engine.stored() < blocks_to_store) env.publish_events(engine.batch(8));

  const auto want = engine.expected();
  ASSERT_EQ(want.size(), engine.resident());
  std::string diff;
  const bool same = faults::wait_until(
      [&] {
        diff = faults::describe_diff(want, faults::server_view(env.server));
        return diff.empty();
      },
      240s);
  EXPECT_TRUE(same) << diff << "daemon tree: " << env.d->tree_json();
  // How many evictions went on the wire depends on how much kvrelay coalesced (how fast it ran),
  // so only what holds at any speed is checked: in expire mode every eviction rode in a stream,
  // and the only PublishEvents are the clears.
  if (config::effective(GetParam()) == config::eviction_mode::expire) {
    EXPECT_EQ(env.server.calls().publish, env.server.index().counters().cleared_events);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, EvictionStorm,
                         ::testing::Values(config::eviction_mode::expire,
                                           config::eviction_mode::rpc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kvrelay::evictions
