// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Ordering end to end in each eviction mode (expire is the one that needs it most: an eviction
// there is an entry of the unit's stream, stamped 1 µs after the epoch, and a later add must
// refresh it): add → evict → add of one key inside one window and across windows, a clear
// between them, L2 downgrades, and merged DP ranks (an eviction only when no rank holds it). What the server holds is read as a router sees it: fresh
// entries only.
//
// Absence is asserted only after a barrier (a sentinel through the same shard is visible, or the
// daemon was drained), so "not there" never means "not there yet".
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/fingerprint.hpp"
#include "daemon/daemon.hpp"
#include "tests/evictions/mode.hpp"
#include "tests/support/harness.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::evictions {
namespace {

using namespace std::chrono_literals;
using e2e::cleared;
using e2e::harness;
using e2e::removed;
using e2e::stored;
using e2e::token_range;
using e2e::u_hashes;

constexpr int64_t bs = 16;

std::vector<uint32_t> slice(const std::vector<uint32_t>& t, size_t from, size_t to) {
  return std::vector<uint32_t>(t.begin() + static_cast<std::ptrdiff_t>(from),
                               t.begin() + static_cast<std::ptrdiff_t>(to));
}

class EvictionOrder : public ::testing::TestWithParam<config::eviction_mode> {
 protected:
  void start(bool l2 = false, int merged_ranks = 1) {
    e2e::harness_options o;
    o.engine.l2_tier = l2;
    if (merged_ranks > 1) {
      o.engine.dp_size = merged_ranks;
      o.engine.dp_mode = config::dp_mode::merged;
    }
    const auto mode = GetParam();
    o.tweak = [mode](config::daemon_config& c) { set_mode(c, mode); };
    h = std::make_unique<harness>(std::move(o));
    ASSERT_TRUE(h->start_daemon()) << h->error();
    ASSERT_EQ(emitter_mode(h->daemon()), to_string(config::effective(mode)))
        << "the configured eviction mode did not reach the emitter";
  }
  void TearDown() override { h.reset(); }

  std::optional<policy::replica_entry> block(const std::vector<uint32_t>& tokens, size_t i) {
    return h->entry(fingerprint::prefixes(tokens, bs).at(i));
  }
  // Era G carries the DP rank in the envelope, which each pipeline checks against its own.
  void publish_on(int rank, const std::vector<fake::fake_event>& events) {
    fake::encode_options eo;
    eo.era = fake::wire_era::g;
    h->publish(events, eo, rank);
  }
  bool wait_block(const std::vector<uint32_t>& tokens, size_t i, bool present,
                  int32_t tier = 1) {
    return harness::wait_until(
        [&] {
          auto e = block(tokens, i);
          return present ? e && e->tier == tier : !e;
        },
        30s);
  }
  // A block of its own through the same (base) shard: once it is visible, everything published
  // before it was flushed.
  void barrier(uint32_t first_token) {
    const auto s = token_range(first_token, 16);
    h->publish({stored(u_hashes({first_token}), s, bs)});
    ASSERT_TRUE(wait_block(s, 0, true)) << h->diagnose();
  }

  std::unique_ptr<harness> h;
};

TEST_P(EvictionOrder, AddEvictAddOfOneKeyInsideOneWindowEndsHeld) {
  start();
  const auto t = token_range(100, 48);
  // One batch: the last block goes and comes back.
  h->publish({stored(u_hashes({11, 12, 13}), t, bs), removed(u_hashes({13})),
              stored(u_hashes({13}), slice(t, 32, 48), bs, fake::fake_hash::u(12))});
  // Back-to-back batches inside the 10 ms window: the same, for another key.
  const auto u = token_range(500, 32);
  h->publish({stored(u_hashes({21, 22}), u, bs)});
  h->publish({removed(u_hashes({22}))});
  h->publish({stored(u_hashes({22}), slice(u, 16, 32), bs, fake::fake_hash::u(21))});
  barrier(9000);
  h->stop_daemon();
  for (size_t i = 0; i < 3; ++i) {
    auto e = block(t, i);
    ASSERT_TRUE(e) << "block " << i << "\n" << h->diagnose();
    EXPECT_EQ(e->token_count, static_cast<int32_t>(16 * (i + 1)));
  }
  EXPECT_TRUE(block(u, 0));
  EXPECT_TRUE(block(u, 1)) << h->diagnose();
}

TEST_P(EvictionOrder, AddEvictAddAcrossWindowsFollowsEachStep) {
  start();
  const auto t = token_range(100, 32);
  h->publish({stored(u_hashes({11, 12}), t, bs)});
  ASSERT_TRUE(wait_block(t, 1, true)) << h->diagnose();
  h->publish({removed(u_hashes({12}))});
  ASSERT_TRUE(wait_block(t, 1, false)) << h->diagnose();
  EXPECT_TRUE(block(t, 0)) << "only the evicted block goes";
  h->publish({stored(u_hashes({12}), slice(t, 16, 32), bs, fake::fake_hash::u(11))});
  ASSERT_TRUE(wait_block(t, 1, true)) << "a re-add refreshes the expired entry\n" << h->diagnose();
  EXPECT_EQ(block(t, 1)->token_count, 32);
  // And once more: evicted again, gone again.
  h->publish({removed(u_hashes({12, 11}))});
  ASSERT_TRUE(wait_block(t, 0, false)) << h->diagnose();
  ASSERT_TRUE(wait_block(t, 1, false)) << h->diagnose();
}

TEST_P(EvictionOrder, AClearBetweenEvictionAndReAddLeavesOnlyTheReAdd) {
  start();
  const auto k = token_range(100, 32), j = token_range(300, 16);
  h->publish({stored(u_hashes({11, 12}), k, bs), stored(u_hashes({31}), j, bs)});
  ASSERT_TRUE(wait_block(k, 1, true)) << h->diagnose();
  ASSERT_TRUE(wait_block(j, 0, true)) << h->diagnose();
  // Inside one batch: k's blocks go, the engine clears, k comes back (j does not).
  h->publish({removed(u_hashes({12, 11})), cleared(), stored(u_hashes({11, 12}), k, bs)});
  ASSERT_TRUE(wait_block(j, 0, false)) << "the clear dropped j\n" << h->diagnose();
  ASSERT_TRUE(wait_block(k, 1, true)) << h->diagnose();
  // Across windows: evicted, cleared, re-added, one step at a time.
  h->publish({removed(u_hashes({12}))});
  ASSERT_TRUE(wait_block(k, 1, false)) << h->diagnose();
  h->publish({cleared()});
  ASSERT_TRUE(wait_block(k, 0, false)) << h->diagnose();
  h->publish({stored(u_hashes({11, 12}), k, bs)});
  ASSERT_TRUE(wait_block(k, 1, true)) << h->diagnose();
  h->stop_daemon();
  EXPECT_TRUE(block(k, 0));
  EXPECT_FALSE(block(j, 0)) << h->diagnose();
}

TEST_P(EvictionOrder, L2DowngradesGoToT2InTheStreamAndAReAddRestoresT1) {
  start(/*l2=*/true);
  const auto t = token_range(100, 32), other = token_range(700, 16);
  h->publish({stored(u_hashes({11, 12}), t, bs)});
  ASSERT_TRUE(wait_block(t, 1, true)) << h->diagnose();
  // One unit with an add (other) and a downgrade (t's last block): one stream, two messages.
  h->publish({stored(u_hashes({71}), other, bs), removed(u_hashes({12}))});
  ASSERT_TRUE(wait_block(t, 1, true, /*tier=*/2)) << h->diagnose();
  EXPECT_TRUE(block(other, 0));
  EXPECT_EQ(block(t, 0)->tier, 1);
  h->publish({stored(u_hashes({12}), slice(t, 16, 32), bs, fake::fake_hash::u(11))});
  ASSERT_TRUE(wait_block(t, 1, true, /*tier=*/1)) << h->diagnose();
  EXPECT_EQ(h->server().index().counters().evicted_events, 0u) << "L2 mode never evicts";
}

TEST_P(EvictionOrder, MergedRanksEvictOnlyWhenNoRankHoldsThePrefix) {
  start(/*l2=*/false, /*merged_ranks=*/2);
  const auto k = token_range(100, 16);
  publish_on(0, {stored(u_hashes({11}), k, bs)});
  publish_on(1, {stored(u_hashes({11}), k, bs)});
  ASSERT_TRUE(wait_block(k, 0, true)) << h->diagnose();
  // Rank 0 lets it go; rank 1 still holds it: nothing may reach the server.
  publish_on(0, {removed(u_hashes({11}))});
  const auto s0 = token_range(9000, 16);
  publish_on(0, {stored(u_hashes({90}), s0, bs)});
  ASSERT_TRUE(wait_block(s0, 0, true)) << h->diagnose();
  EXPECT_TRUE(block(k, 0)) << "evicted while rank 1 still holds it\n" << h->diagnose();
  // The last holder lets it go: now the eviction goes out.
  publish_on(1, {removed(u_hashes({11}))});
  ASSERT_TRUE(wait_block(k, 0, false)) << h->diagnose();
}

INSTANTIATE_TEST_SUITE_P(Modes, EvictionOrder,
                         ::testing::Values(config::eviction_mode::expire,
                                           config::eviction_mode::rpc),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kvrelay::evictions
