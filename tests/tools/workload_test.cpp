// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The fake engine's event sources: the reference's scripted scenario (E01–E03 of
// docs/spec/reference-behaviour.md) and the random workload's cache consistency.
#include <gtest/gtest.h>

#include <msgpack.hpp>

#include <map>
#include <set>

#include "base/fingerprint.hpp"
#include "tools/fake-engine/wire_encoder.hpp"
#include "tools/fake-engine/workload.hpp"

namespace kvrelay::fake {
namespace {

// The reference payload: era A, ts 0.0, decoded generically as a consumer would.
struct decoded_stored {
  std::vector<int64_t> hashes;
  bool parent_nil = true;
  int64_t parent = 0;
  bool tokens_nil = false;
  std::vector<uint32_t> tokens;
  int64_t block_size = 0;
  bool lora_nil = false;
  size_t fields = 0;
};

std::vector<decoded_stored> decode_reference(const std::string& payload, double* ts = nullptr) {
  auto oh = msgpack::unpack(payload.data(), payload.size());
  const auto& env = oh.get();
  EXPECT_EQ(env.type, msgpack::type::ARRAY);
  EXPECT_EQ(env.via.array.size, 2u);  // reference: 2-element envelope
  if (ts) *ts = env.via.array.ptr[0].as<double>();
  std::vector<decoded_stored> out;
  const auto& events = env.via.array.ptr[1].via.array;
  for (uint32_t i = 0; i < events.size; ++i) {
    const auto& e = events.ptr[i].via.array;
    decoded_stored d;
    d.fields = e.size;
    EXPECT_EQ(e.ptr[0].as<std::string>(), "BlockStored");
    for (uint32_t h = 0; h < e.ptr[1].via.array.size; ++h) {
      d.hashes.push_back(e.ptr[1].via.array.ptr[h].as<int64_t>());
    }
    d.parent_nil = e.ptr[2].is_nil();
    if (!d.parent_nil) d.parent = e.ptr[2].as<int64_t>();
    d.tokens_nil = e.ptr[3].is_nil();
    if (!d.tokens_nil) d.tokens = e.ptr[3].as<std::vector<uint32_t>>();
    d.block_size = e.ptr[4].as<int64_t>();
    d.lora_nil = e.ptr[5].is_nil();
    out.push_back(d);
  }
  return out;
}

std::string reference_payload(const scripted_options& o) {
  encode_options eo;
  eo.era = wire_era::a;
  eo.ts = 0.0;
  return encode_batch(scripted_events(o), eo);
}

TEST(ScriptedScenario, TwoBlocksOneEventRoundTripsAndFingerprints) {  // E01
  scripted_options o;
  o.block_size = 128;
  o.num_blocks = 2;
  double ts = -1;
  const auto events = decode_reference(reference_payload(o), &ts);
  EXPECT_EQ(ts, 0.0);
  ASSERT_EQ(events.size(), 1u);
  const auto& e = events[0];
  EXPECT_EQ(e.fields, 6u);
  EXPECT_EQ(e.block_size, 128);
  EXPECT_TRUE(e.parent_nil);
  EXPECT_TRUE(e.lora_nil);
  EXPECT_EQ(e.hashes, (std::vector<int64_t>{0xE000, 0xE001}));
  ASSERT_EQ(e.tokens.size(), 256u);
  for (uint32_t t = 0; t < 256; ++t) EXPECT_EQ(e.tokens[t], t);
  // Supplementary values of docs/spec/policy-contract.md §3 (tokens 0..255, bs 128).
  EXPECT_EQ(fingerprint::prefixes(e.tokens, e.block_size),
            (std::vector<uint64_t>{9509643624113304476ULL, 4646466054415241071ULL}));
}

TEST(ScriptedScenario, BlocksSplitOverEventsChainByParent) {  // E02
  scripted_options o;
  o.block_size = 16;
  o.num_blocks = 3;
  o.events = 2;
  o.start_token = 7;
  const auto events = decode_reference(reference_payload(o));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].hashes.size(), 2u);
  EXPECT_EQ(events[1].hashes.size(), 1u);
  EXPECT_TRUE(events[0].parent_nil);
  ASSERT_FALSE(events[1].parent_nil);
  EXPECT_EQ(events[1].parent, events[0].hashes.back());
  EXPECT_EQ(events[0].tokens.size(), 32u);
  EXPECT_EQ(events[1].tokens.size(), 16u);
  EXPECT_EQ(events[1].tokens[0], 7u + 32u);
}

TEST(ScriptedScenario, OmitTokenIds) {  // E03
  scripted_options o;
  o.omit_token_ids = true;
  const auto events = decode_reference(reference_payload(o));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].hashes.size(), 1u);
  EXPECT_TRUE(events[0].tokens_nil);
  const auto lines = expect_lines(o);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("EXPECT no index entries", 0), 0u);
}

TEST(ScriptedScenario, ExpectLinesMatchTheE2EPrompt) {
  scripted_options o;
  o.num_blocks = 2;
  o.events = 2;
  o.start_token = 5000;
  EXPECT_EQ(expect_lines(o),
            (std::vector<std::string>{"EXPECT prefix_hash[0]=3da0ff8dcd1d4e46 token_count=128",
                                      "EXPECT prefix_hash[1]=4c9d2e3832e383a5 token_count=256"}));
}

TEST(ScriptedScenario, ValidationLikeTheReference) {
  scripted_options ok;
  EXPECT_EQ(validate(ok), "");
  auto bad = ok;
  bad.block_size = 0;
  EXPECT_NE(validate(bad), "");
  bad = ok;
  bad.num_blocks = 0;
  EXPECT_NE(validate(bad), "");
  bad = ok;
  bad.block_size = 1 << 13;
  bad.num_blocks = 1 << 12;  // 2^25 tokens
  EXPECT_NE(validate(bad), "");
  bad = ok;
  bad.start_token = -1;
  EXPECT_NE(validate(bad), "");
  bad = ok;
  bad.start_token = 0xFFFFFFFFLL;  // last token 2^32-1+127
  EXPECT_NE(validate(bad), "");
  bad = ok;
  bad.events = 2;  // more events than blocks
  EXPECT_NE(validate(bad), "");
  bad.events = 0;
  EXPECT_NE(validate(bad), "");
  EXPECT_TRUE(scripted_events(bad).empty());
}

// Replays a workload's events against a model of what the engine holds and checks that every
// removal names a resident block and every parent is resident: a consumer with no losses never
// meets an unknown parent from this generator.
const std::pair<std::string, int64_t> gpu0{"GPU", 0};

struct cache_model {
  std::map<std::pair<std::string, int64_t>, std::set<uint64_t>> resident;  // (medium, group)
  size_t bad_parent = 0, bad_remove = 0, stored = 0, removed = 0, cleared = 0;

  void apply(const std::vector<fake_event>& batch) {
    for (const auto& ev : batch) {
      if (ev.t == fake_event::type::cleared) {
        resident.clear();
        ++cleared;
        continue;
      }
      auto& set = resident[{ev.medium.value_or("GPU"), ev.group_idx.value_or(0)}];
      if (ev.t == fake_event::type::stored) {
        // Only the main GPU group must chain to a resident parent: a sliding-window group or a
        // CPU tier may have dropped the parent while the GPU prefix cache still holds it.
        const bool main_gpu = ev.medium.value_or("GPU") == "GPU" && ev.group_idx.value_or(0) == 0;
        if (main_gpu && ev.parent && !set.count(ev.parent->value)) ++bad_parent;
        for (const auto& h : ev.block_hashes) set.insert(h.value);
        stored += ev.block_hashes.size();
        EXPECT_EQ(ev.token_ids.size(),
                  ev.block_hashes.size() * static_cast<size_t>(ev.block_size));
      } else if (ev.t == fake_event::type::removed) {
        for (const auto& h : ev.block_hashes) {
          if (!set.erase(h.value)) ++bad_remove;
        }
        removed += ev.block_hashes.size();
      }
    }
  }
};

TEST(RandomWorkload, DeterministicPerSeed) {
  workload_options o;
  o.seed = 42;
  workload a(o), b(o);
  o.seed = 43;
  workload c(o);
  encode_options eo;
  bool differs = false;
  for (int i = 0; i < 50; ++i) {
    const auto ba = encode_batch(a.next_batch(), eo);
    EXPECT_EQ(ba, encode_batch(b.next_batch(), eo));
    differs = differs || ba != encode_batch(c.next_batch(), eo);
  }
  EXPECT_TRUE(differs);
}

TEST(RandomWorkload, EvictsAtCapacityAndStaysConsistent) {
  workload_options o;
  o.capacity_blocks = 256;
  workload w(o);
  cache_model model;
  for (int i = 0; i < 400; ++i) {
    const auto batch = w.next_batch();
    ASSERT_FALSE(batch.empty());
    model.apply(batch);
    ASSERT_LE(model.resident[gpu0].size(), 256u);
  }
  const auto st = w.stats();
  EXPECT_GT(st.blocks_evicted, 0u);
  EXPECT_GT(st.blocks_hit, 0u);  // Zipf-shared system prompts are reused
  EXPECT_EQ(model.bad_parent, 0u);
  EXPECT_EQ(model.bad_remove, 0u);
  EXPECT_EQ(model.resident[gpu0].size(), st.gpu_resident);
}

TEST(RandomWorkload, ClearAfterBlocksClearsOnceWhenThatManyWereStored) {
  workload_options o;
  o.capacity_blocks = 1'000'000;  // no evictions: the clear is what empties the cache
  o.clear_after_blocks = 500;
  workload w(o);
  cache_model model;
  uint64_t stored_at_clear = 0;
  size_t clears_seen = 0;
  for (int i = 0; i < 300; ++i) {
    const uint64_t before = w.stats().blocks_stored;
    const auto batch = w.next_batch();
    for (const auto& ev : batch) {
      if (ev.t != fake_event::type::cleared) continue;
      ++clears_seen;
      stored_at_clear = before;
      EXPECT_EQ(&ev, &batch.front()) << "a clear heads its batch";
    }
    model.apply(batch);
  }
  EXPECT_EQ(clears_seen, 1u);
  EXPECT_EQ(w.stats().clears, 1u);
  EXPECT_GE(stored_at_clear, 500u);
  EXPECT_LT(stored_at_clear, 500u + 4 * 32) << "the first batch after the threshold clears";
  EXPECT_EQ(model.bad_parent, 0u);
  EXPECT_EQ(model.resident[gpu0].size(), w.stats().gpu_resident);
  EXPECT_LT(w.stats().gpu_resident, w.stats().blocks_stored) << "the clear emptied the cache";
}

TEST(RandomWorkload, ClearAfterBlocksComesEvenAfterRandomClears) {
  workload_options o;
  o.capacity_blocks = 1'000'000;
  o.clear_probability = 0.2;  // several random clears before the threshold
  o.clear_after_blocks = 2000;
  workload w(o);
  while (w.stats().blocks_stored < 2000) w.next_batch();
  ASSERT_GT(w.stats().clears, 0u) << "random clears came first";
  const uint64_t clears = w.stats().clears;
  const auto batch = w.next_batch();  // the first past the threshold
  EXPECT_EQ(w.stats().clears, clears + 1);
  EXPECT_EQ(batch.front().t, fake_event::type::cleared);
}

TEST(RandomWorkload, EvictAllFreesEveryResidentBlockTailBeforeHead) {
  workload_options o;
  o.capacity_blocks = 256;
  workload w(o);
  cache_model model;
  std::map<uint64_t, uint64_t> parent_of;  // block → the block before it in its sequence
  for (int i = 0; i < 200; ++i) {
    const auto batch = w.next_batch();
    model.apply(batch);
    for (const auto& ev : batch) {
      if (ev.t != fake_event::type::stored) continue;
      for (size_t b = 0; b < ev.block_hashes.size(); ++b) {
        if (b > 0) parent_of[ev.block_hashes[b].value] = ev.block_hashes[b - 1].value;
        else if (ev.parent) parent_of[ev.block_hashes[b].value] = ev.parent->value;
      }
    }
  }
  const size_t resident = w.stats().gpu_resident;
  ASSERT_GT(resident, 0u);
  const auto all = w.evict_all();
  EXPECT_EQ(all.t, fake_event::type::removed);
  EXPECT_EQ(all.block_hashes.size(), resident);
  model.apply({all});
  EXPECT_EQ(model.bad_remove, 0u);
  EXPECT_TRUE(model.resident[gpu0].empty());
  EXPECT_EQ(w.stats().gpu_resident, 0u);
  // A block is never freed before the block that extends it: every use of a child walked its
  // parent in the same request, so the parent is at least as recent, and ties free deeper first.
  std::map<uint64_t, size_t> pos;
  for (size_t i = 0; i < all.block_hashes.size(); ++i) pos[all.block_hashes[i].value] = i;
  size_t checked = 0;
  for (const auto& [child, parent] : parent_of) {
    const auto c = pos.find(child), p = pos.find(parent);
    if (c == pos.end() || p == pos.end()) continue;
    EXPECT_LT(c->second, p->second);
    ++checked;
  }
  EXPECT_GT(checked, 0u);
  EXPECT_TRUE(w.evict_all().block_hashes.empty());
}

TEST(RandomWorkload, LoraClearsOffloadAndHybridGroups) {
  workload_options o;
  o.lora_adapters = 3;
  o.lora_fraction = 0.5;
  o.clear_probability = 0.05;
  o.cpu_offload = true;
  o.cpu_capacity_blocks = 512;
  o.capacity_blocks = 128;
  o.hybrid = true;
  o.sliding_window = 32;
  workload w(o);
  cache_model model;
  std::set<std::string> names;
  size_t cpu_events = 0, sliding_removals = 0, sliding_stores = 0;
  for (int i = 0; i < 300; ++i) {
    const auto batch = w.next_batch();
    model.apply(batch);
    for (const auto& ev : batch) {
      if (ev.lora_name) {
        names.insert(*ev.lora_name);
        ASSERT_TRUE(ev.lora_id.has_value());
        EXPECT_EQ("lora-" + std::to_string(*ev.lora_id - 1), *ev.lora_name);
      }
      if (ev.medium == std::optional<std::string>("CPU")) ++cpu_events;
      if (ev.group_idx == std::optional<int64_t>(1)) {
        if (ev.t == fake_event::type::removed) ++sliding_removals;
        if (ev.t == fake_event::type::stored) {
          ++sliding_stores;
          EXPECT_EQ(ev.spec_kind, std::optional<std::string>("sliding_window"));
          EXPECT_EQ(ev.sliding_window, std::optional<int64_t>(32));
        }
      }
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"lora-0", "lora-1", "lora-2"}));
  EXPECT_GT(cpu_events, 0u);
  EXPECT_GT(sliding_stores, 0u);
  EXPECT_GT(sliding_removals, 0u);
  EXPECT_GT(model.cleared, 0u);
  EXPECT_EQ(model.bad_parent, 0u);
  EXPECT_EQ(model.bad_remove, 0u);
}

TEST(RandomWorkload, HashModes) {
  workload_options o;
  o.hashes = hash_mode::bytes;
  workload w(o);
  const auto batch = w.next_batch();
  ASSERT_FALSE(batch.empty());
  const auto& h = batch[0].block_hashes.at(0);
  EXPECT_EQ(h.k, fake_hash::kind::bin);
  EXPECT_EQ(h.bytes.size(), 32u);
  o.hashes = hash_mode::i64;
  workload s(o);
  EXPECT_EQ(s.next_batch()[0].block_hashes.at(0).k, fake_hash::kind::i64);
}

}  // namespace
}  // namespace kvrelay::fake
