// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// DP merged mode end to end on real sockets: two engine ranks, one replica on the server. The
// server's index must equal what the ranks hold together: an eviction reaches it only when no
// rank holds the prefix, a rank's clear removes only what that rank alone held, and only the
// replica's start clears it (the one owner of the holder set; the ordering).
//
// Presence after an eviction is asserted behind a barrier: a later add through the same rank
// (hence the same port and the same replica debouncer, in order) is visible first.
#include <gtest/gtest.h>

#include <set>

#include "base/fingerprint.hpp"
#include "daemon/daemon.hpp"
#include "tests/support/harness.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay::e2e {
namespace {

constexpr int64_t bs = 16;

struct MergedDp : ::testing::Test {
  std::unique_ptr<harness> h;
  // What each rank holds, as the engines were told: (rank → prompts).
  std::map<int, std::vector<std::vector<uint32_t>>> held;

  void SetUp() override {
    harness_options o;
    o.engine.dp_size = 2;
    o.engine.dp_mode = config::dp_mode::merged;
    h = std::make_unique<harness>(std::move(o));
    ASSERT_TRUE(h->start_daemon()) << h->error();
  }
  void TearDown() override { h.reset(); }

  fake::encode_options era_g() const {
    fake::encode_options o;
    o.era = fake::wire_era::g;  // carries the rank, which each pipeline checks against its own
    return o;
  }
  void store(int rank, std::vector<uint64_t> hashes, const std::vector<uint32_t>& tokens) {
    std::vector<fake::fake_hash> hs;
    for (auto x : hashes) hs.push_back(fake::fake_hash::u(x));
    h->publish({stored(hs, tokens, bs)}, era_g(), rank);
    held[rank].push_back(tokens);
  }
  void remove(int rank, std::vector<uint64_t> hashes, const std::vector<uint32_t>& tokens) {
    std::vector<fake::fake_hash> hs;
    for (auto x : hashes) hs.push_back(fake::fake_hash::u(x));
    h->publish({removed(hs)}, era_g(), rank);
    auto& v = held[rank];
    v.erase(std::remove(v.begin(), v.end(), tokens), v.end());
  }
  void clear(int rank) {
    h->publish({cleared()}, era_g(), rank);
    held[rank].clear();
  }
  bool resident(const std::vector<uint32_t>& tokens) const {
    for (uint64_t p : fingerprint::prefixes(tokens, bs))
      if (!h->entry(p)) return false;
    return true;
  }
  bool absent(const std::vector<uint32_t>& tokens) const {
    for (uint64_t p : fingerprint::prefixes(tokens, bs))
      if (h->entry(p)) return false;
    return true;
  }
  // The server's index for the replica equals the union of what both ranks hold.
  ::testing::AssertionResult matches_both_ranks() const {
    std::set<uint64_t> expected;
    for (const auto& [rank, prompts] : held)
      for (const auto& t : prompts)
        for (uint64_t p : fingerprint::prefixes(t, bs)) expected.insert(p);
    for (uint64_t p : expected)
      if (!h->entry(p)) return ::testing::AssertionFailure() << "missing prefix " << p;
    if (h->total_prefixes() != expected.size())
      return ::testing::AssertionFailure()
             << "server holds " << h->total_prefixes() << " prefixes, the ranks " << expected.size();
    return ::testing::AssertionSuccess();
  }
  bool wait_matches() const {
    return harness::wait_until([&] { return static_cast<bool>(matches_both_ranks()); });
  }
};

TEST_F(MergedDp, TheServerHoldsWhatEitherRankHolds) {
  ASSERT_EQ(h->replica(0), h->replica(1)) << "one replica";
  const auto a = token_range(100, 32), shared = token_range(200, 32), b = token_range(300, 32);
  store(0, {1, 2}, a);
  store(0, {3, 4}, shared);
  store(1, {3, 4}, shared);  // the same blocks cached by both ranks
  store(1, {5, 6}, b);
  ASSERT_TRUE(wait_matches()) << matches_both_ranks() << h->diagnose();

  // Rank 0 evicts the shared prefix: rank 1 still holds it, so the server keeps it.
  remove(0, {3, 4}, shared);
  const auto sentinel0 = token_range(400, 16);
  store(0, {7}, sentinel0);
  ASSERT_TRUE(harness::wait_until([&] { return resident(sentinel0); })) << h->diagnose();
  EXPECT_TRUE(resident(shared)) << "evicted while rank 1 still holds it\n" << h->diagnose();

  // Rank 1 evicts it too: now no rank holds it.
  remove(1, {3, 4}, shared);
  ASSERT_TRUE(harness::wait_until([&] { return absent(shared); })) << h->diagnose();
  ASSERT_TRUE(wait_matches()) << matches_both_ranks() << h->diagnose();

  // Both ranks cache c; rank 1 clears: only what rank 1 alone held (b) goes.
  const auto c = token_range(500, 16);
  store(0, {8}, c);
  store(1, {8}, c);
  ASSERT_TRUE(harness::wait_until([&] { return resident(c); })) << h->diagnose();
  clear(1);
  ASSERT_TRUE(harness::wait_until([&] { return absent(b); })) << h->diagnose();
  const auto sentinel1 = token_range(600, 16);
  store(1, {9}, sentinel1);
  ASSERT_TRUE(harness::wait_until([&] { return resident(sentinel1); })) << h->diagnose();
  EXPECT_TRUE(resident(a)) << "a rank's clear is no ALL_CLEARED\n" << h->diagnose();
  EXPECT_TRUE(resident(c)) << "rank 0 still holds c\n" << h->diagnose();
  ASSERT_TRUE(wait_matches()) << matches_both_ranks() << h->diagnose();

  h->stop_daemon();
  EXPECT_TRUE(matches_both_ranks()) << h->diagnose();
  const auto sc = h->server().index().counters();
  EXPECT_EQ(sc.cleared_events, 1u) << "only the replica's start clears it";
}

}  // namespace
}  // namespace kvrelay::e2e
