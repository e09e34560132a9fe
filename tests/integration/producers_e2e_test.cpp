// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Single-frame producers, end to end over real loopback sockets (fake engine → kvrelay → policy server): the
// producers of docs/producers.md, and one bad event costing only itself.
//  - TensorRT-LLM's native publisher: map events in a positional envelope, signed int64 hashes,
//    replay replies that carry the topic. Stored, removed, a gap repaired through its replay.
//  - ROCm ATOM #869: one frame per batch, no sequence number. Stored, removed, cleared; kvrelay
//    delivers them and says in /debug/engines that it cannot see a gap.
//  - A batch with a bad event of each kind applies the rest, and a lost removal makes the index
//    incomplete until the engine clears.
//
// Absence is asserted after a barrier: a later block through the same shard is visible.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/fingerprint.hpp"
#include "daemon/daemon.hpp"
#include "tests/support/harness.hpp"

namespace kvrelay::e2e {
namespace {

constexpr int64_t bs = 16;
using fake::fake_hash;
using fake::wire_era;

fake::encode_options era_of(wire_era era) {
  fake::encode_options o;
  o.era = era;
  return o;
}

// A signed hash the way TensorRT-LLM writes one: the first 8 digest bytes as int64 (negative
// about half the time).
fake_hash trt_hash(uint64_t n) {
  return fake_hash::i(-static_cast<int64_t>(0x7100000000000000ULL + n));
}

struct Producers : ::testing::Test {
  std::unique_ptr<harness> h;

  void start(harness_options o) {
    h = std::make_unique<harness>(std::move(o));
    ASSERT_TRUE(h->start_daemon()) << h->error();
  }
  void TearDown() override {
    if (h && HasFailure()) std::cerr << h->diagnose() << "\n";
    h.reset();
  }
  // Every full block of `tokens` is on the server, or (held = false) none is.
  bool on_server(const std::vector<uint32_t>& tokens, bool held = true) const {
    for (uint64_t p : fingerprint::prefixes(tokens, bs))
      if (h->entry(p).has_value() != held) return false;
    return true;
  }
  bool wait_on_server(const std::vector<uint32_t>& tokens, bool held = true) const {
    return harness::wait_until([&] { return on_server(tokens, held); });
  }
  nlohmann::json engine() {
    const auto doc = nlohmann::json::parse(h->daemon().engines_json(), nullptr, false);
    return doc.is_array() && !doc.empty() ? doc[0] : nlohmann::json::object();
  }
};

TEST_F(Producers, TensorRtLlmStoresRemovesAndRepairsAGapThroughItsReplay) {
  harness_options o;
  o.replay_topic_frames = true;  // TensorRT-LLM replies [topic, seq, payload] like vLLM >= 0.26
  start(o);
  const auto a = token_range(1000, 32);
  h->publish({stored({trt_hash(1), trt_hash(2)}, a, bs)}, era_of(wire_era::trt));
  ASSERT_TRUE(wait_on_server(a));
  // The chain continues from a signed parent, in the next batch.
  const auto b = token_range(2000, 16);
  h->publish({stored({trt_hash(3)}, b, bs, trt_hash(2))}, era_of(wire_era::trt));
  std::vector<uint32_t> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  ASSERT_TRUE(wait_on_server(ab));
  // A batch the live stream loses comes back through the replay, topic frame and all.
  const auto c = token_range(3000, 16);
  fake::encode_options eo = era_of(wire_era::trt);
  h->publish_replay_only(fake::encode_batch({stored({trt_hash(4)}, c, bs)}, eo));
  const auto d = token_range(4000, 16);
  h->publish({stored({trt_hash(5)}, d, bs)}, eo);
  ASSERT_TRUE(wait_on_server(d));
  EXPECT_TRUE(wait_on_server(c)) << "repaired through the replay";
  // A removal names the same signed hashes.
  h->publish({removed({trt_hash(3)})}, eo);
  EXPECT_TRUE(harness::wait_until([&] { return !h->entry(fingerprint::prefixes(ab, bs)[2]); }));
  EXPECT_TRUE(on_server(a));
  EXPECT_EQ(h->metric_sum("kvrelay_malformed_events_total"), 0);
  EXPECT_TRUE(harness::wait_until([&] {
    return h->metric("kvrelay_batches_recovered_total", {{"replica", h->replica()}}) >= 1;
  }));
}

TEST_F(Producers, AtomSingleFrameBatchesFlowWithoutASequence) {
  harness_options o;
  o.replay = false;
  o.unsequenced = true;
  o.engine.topic = "";  // ATOM's default: [payload], one frame
  start(o);
  const auto a = token_range(5000, 32);
  fake::encode_options eo = era_of(wire_era::atom0);
  h->publish({stored(u_hashes({71, 72}), a, bs)}, eo);
  ASSERT_TRUE(wait_on_server(a));
  const auto b = token_range(6000, 16);
  h->publish({removed(u_hashes({71, 72})), stored(u_hashes({73}), b, bs)}, eo);
  ASSERT_TRUE(wait_on_server(b));
  // Barrier: a later batch's block is on the server, so the unit with a's evictions is done.
  const auto sentinel = token_range(6500, 16);
  h->publish({stored(u_hashes({74}), sentinel, bs)}, eo);
  ASSERT_TRUE(wait_on_server(sentinel));
  EXPECT_TRUE(on_server(a, false)) << "removed in the batch that stored b";
  const auto j = engine();
  EXPECT_TRUE(j["last_seq"].is_null()) << j.dump();
  EXPECT_NE(j.value("sequence", "").find("none"), std::string::npos) << j.dump();
  EXPECT_TRUE(harness::wait_until([&] {
    return h->metric("kvrelay_unsequenced_batches_total", {{"replica", h->replica()}}) >= 2;
  }));
  EXPECT_EQ(h->metric("kvrelay_seq_gaps_total", {{"replica", h->replica()}}), 0);
  // Its AllBlocksCleared ([tag, medium]) clears.
  h->publish({cleared()}, eo);
  EXPECT_TRUE(wait_on_server(b, false));
}

TEST_F(Producers, OneBadEventOfEachKindCostsOnlyItself) {
  start({});
  const auto a = token_range(7000, 16);
  const auto b = token_range(8000, 16);
  const auto c = token_range(9000, 16);
  h->publish({stored(u_hashes({91}), a, bs)});
  ASSERT_TRUE(wait_on_server(a));
  // One batch, era C tuples and maps mixed: a store cut short (no tokens), a good store of b, a
  // removal of a whose hash list also holds a nil (the event is lost, a's hash with it), a clear
  // with a medium of the wrong type (lost too), an event with no type, a good store of c.
  auto bad_store = stored(u_hashes({92}), b, bs);
  bad_store.truncate_slots = 3;  // tuple era: [BlockStored, [h], nil] has no tokens
  const std::string good_b = fake::encode_event(stored(u_hashes({93}), b, bs), wire_era::c);
  const std::string good_c = fake::encode_event(stored(u_hashes({94}), c, bs), wire_era::c);
  // [BlockRemoved, [91, nil], "GPU"]: 91 is a's hash, so a decoder that applied the rest of a
  // bad hash list would evict a.
  const std::string bad_removal = fake::from_hex(
      "93 ac 42 6c 6f 63 6b 52 65 6d 6f 76 65 64 92 5b c0 a3 47 50 55").value();
  const std::string bad_clear = fake::from_hex(
      "82 a4 74 79 70 65 b0 41 6c 6c 42 6c 6f 63 6b 73 43 6c 65 61 72 65 64 a6 6d 65 64 69 75 6d "
      "01").value();  // {type: AllBlocksCleared, medium: 1}
  const std::string untyped = fake::from_hex("81 a1 78 01").value();  // {x: 1}
  std::string events = fake::encode_event(bad_store, wire_era::c) + good_b + bad_removal +
                       bad_clear + untyped + good_c;
  // [ts 0 ("now" to the server), [6 events], rank 0]
  std::string payload = fake::from_hex("93 00 96").value() + events + std::string(1, '\0');
  h->publish_raw(payload);
  ASSERT_TRUE(wait_on_server(c));
  EXPECT_TRUE(wait_on_server(b)) << "the good store before the bad ones";
  EXPECT_TRUE(on_server(a)) << "neither bad removal nor bad clear applied";
  const label_list r = {{"replica", h->replica()}};
  EXPECT_TRUE(harness::wait_until([&] {
    return h->metric_sum("kvrelay_malformed_events_total", r) == 4;
  })) << h->metric_sum("kvrelay_malformed_events_total", r);
  EXPECT_EQ(h->metric("kvrelay_malformed_events_total",
                      {{"replica", h->replica()}, {"type", "removed"}, {"reason", "bad_hash"}}),
            1);
  EXPECT_EQ(h->metric("kvrelay_malformed_events_total",
                      {{"replica", h->replica()}, {"type", "cleared"}, {"reason", "bad_medium"}}),
            1);
  EXPECT_EQ(h->metric("kvrelay_batches_dropped_total",
                      {{"replica", h->replica()}, {"reason", "missing_field"}}),
            -1)
      << "no batch dropped";
  // The lost removal makes the index incomplete, until the engine clears its cache.
  EXPECT_TRUE(harness::wait_until([&] {
    return h->metric("kvrelay_index_incomplete", r) == 1;
  }));
  EXPECT_NE(engine().value("index_incomplete", "").find("could not be decoded"), std::string::npos)
      << engine().dump();
  h->publish({cleared()});
  EXPECT_TRUE(harness::wait_until([&] { return h->metric("kvrelay_index_incomplete", r) == 0; }));
  EXPECT_TRUE(wait_on_server(a, false));
}

// a source that stores at CPU and never removes (LMCache's multi-process mode),
// at ten times its tier's bound. kvrelay holds the bound, evicts what it lets go, and so the
// server's entries for the replica stay bounded too; its memory does not follow the stream.
TEST_F(Producers, StoreOnlyTierAtTenTimesItsBoundStaysBounded) {
  constexpr int64_t bound = 50;
  harness_options o;
  o.engine.max_t2_blocks_per_adapter = bound;
  start(o);
  const label_list r = {{"replica", h->replica()}};
  const auto resident = [&] { return h->metric_sum("kvrelay_resident_blocks", r); };
  double resident_at_2x = 0;
  fake::encode_options eo = era_of(wire_era::i);
  for (uint32_t batch = 0; batch < 50; ++batch) {  // 50 batches x 10 blocks = 10x the bound
    std::vector<fake::fake_event> events;
    for (uint32_t k = 0; k < 10; ++k) {
      const uint32_t n = batch * 10 + k;
      auto ev = stored(u_hashes({100000 + n}), token_range(20000 + n * 16, 16), bs);
      ev.medium = std::string("CPU");  // LMCache MP: canonical "CPU", and never a removal
      events.push_back(std::move(ev));
    }
    h->publish(events, eo);
    if (batch == 9) {
      ASSERT_TRUE(harness::wait_until([&] { return resident() == bound; })) << resident();
      resident_at_2x = resident();
    }
  }
  // Barrier: a GPU block published last is on the server, so everything before it went out.
  const auto sentinel = token_range(900000, 16);
  h->publish({stored(u_hashes({999}), sentinel, bs)}, eo);
  ASSERT_TRUE(wait_on_server(sentinel));
  EXPECT_TRUE(harness::wait_until([&] { return resident() == bound + 1; })) << resident();
  EXPECT_EQ(resident(), resident_at_2x + 1) << "flat from 2x to 10x the bound";
  EXPECT_TRUE(harness::wait_until([&] {
    return h->metric_sum("kvrelay_index_blocks_total",
                         {{"replica", h->replica()}, {"outcome", "t2_cap_dropped"}}) == 450;
  }));
  // The server holds the last `bound` CPU blocks and the sentinel, nothing older.
  EXPECT_TRUE(harness::wait_until([&] { return h->total_prefixes() == bound + 1; }))
      << h->total_prefixes();
  for (uint32_t n = 450; n < 500; ++n)
    EXPECT_TRUE(on_server(token_range(20000 + n * 16, 16))) << n;
  for (uint32_t n = 0; n < 450; n += 50)
    EXPECT_TRUE(on_server(token_range(20000 + n * 16, 16), false)) << n;
}

}  // namespace
}  // namespace kvrelay::e2e
