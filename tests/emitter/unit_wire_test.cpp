// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/emitter/unit_wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "actors/emitter/unit_sequencer.hpp"
#include "base/fingerprint.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.pb.h"

namespace kvrelay::emitter {
namespace {

namespace ic = inferencecache::v1alpha1;

replica_identity identity() { return {"replica-7", "llama-3-8b", "tenant-a", "vllm"}; }

std::vector<std::string> wire(const replica_identity& id, size_t max_entries, size_t max_bytes,
                              const emit_unit& u, bool with_expirations) {
  unit_wire w(id, max_entries, max_bytes, std::make_shared<emit_unit>(u), with_expirations);
  std::vector<std::string> out;
  while (const size_t n = w.next_size()) {
    std::string m(n, '\xee');  // a byte the writer leaves unwritten shows
    w.write(reinterpret_cast<uint8_t*>(m.data()));
    out.push_back(std::move(m));
  }
  return out;
}

// The same stream built with protobuf's own message classes and serializer, UW1-UW4 as the
// header states them: what the wire must equal byte for byte.
std::vector<std::string> with_protobuf(const replica_identity& id, size_t max_entries,
                                       size_t max_bytes, const emit_unit& u,
                                       bool with_expirations) {
  struct section {
    int64_t ts;
    std::vector<const prefix_add*> adds;
    std::vector<const prefix_evict*> evicts;
  };
  std::vector<section> sections;
  sections.push_back({std::max<int64_t>(u.adds_ts_us, 0), {}, {}});
  for (const auto& a : u.adds) sections.back().adds.push_back(&a);
  for (const auto& g : u.downgrades) {
    sections.push_back({std::max<int64_t>(g.ts_us, 0), {}, {}});
    for (const auto& a : g.entries) sections.back().adds.push_back(&a);
  }
  if (with_expirations) {
    sections.push_back({expired_ts_us, {}, {}});
    for (const auto& e : u.evicts) sections.back().evicts.push_back(&e);
  }
  std::vector<std::string> out;
  for (const section& s : sections) {
    const size_t n = s.adds.size() + s.evicts.size();
    size_t i = 0;
    while (i < n) {
      ic::CacheStateUpdate m;
      m.set_replica_id(id.replica_id);
      m.set_model_id(id.model_id);
      m.set_tenant_id(id.tenant_id);
      m.set_hash_scheme(id.hash_scheme);
      m.set_timestamp_us(s.ts);
      size_t rough = 0;
      for (size_t taken = 0; i < n && taken < std::max<size_t>(max_entries, 1) &&
                             (taken == 0 || rough < max_bytes);
           ++taken, ++i) {
        ic::PrefixEntry* p = m.add_prefixes();
        char key[8];
        if (i < s.adds.size()) {
          const prefix_add& a = *s.adds[i];
          fingerprint::write_be8(a.fingerprint, key);
          p->set_prefix_hash(key, sizeof key);
          p->set_token_count(static_cast<int32_t>(a.token_count));
          p->set_tier(static_cast<ic::CacheTier>(static_cast<int>(a.t)));
          p->set_adapter_id(a.adapter);
          rough += 24 + a.adapter.size();
        } else {
          const prefix_evict& e = *s.evicts[i - s.adds.size()];
          fingerprint::write_be8(e.fingerprint, key);
          p->set_prefix_hash(key, sizeof key);
          p->set_adapter_id(e.adapter);
          rough += 24 + e.adapter.size();
        }
      }
      out.push_back(m.SerializeAsString());
    }
  }
  return out;
}

prefix_add add(std::mt19937_64& rng) {
  // The last one is past 127 bytes: its entry's length takes two varint bytes.
  static const std::string adapters[] = {"", "", "", "lora-3", std::string(140, 'x')};
  prefix_add a;
  a.fingerprint = rng();
  const auto kind = rng() % 8;
  a.token_count = kind == 0 ? 0 : kind == 1 ? 0x80000000u + static_cast<uint32_t>(rng() % 99)
                                            : static_cast<uint32_t>(rng() % 100000);
  a.t = static_cast<tier>(rng() % 4);
  a.adapter = adapters[rng() % 5];
  return a;
}

emit_unit random_unit(std::mt19937_64& rng) {
  emit_unit u;
  u.adds_ts_us = static_cast<int64_t>(rng() % 3 == 0 ? 0 : rng() % (int64_t{1} << 52)) -
                 (rng() % 7 == 0 ? int64_t{1} << 53 : 0);
  for (size_t i = rng() % 300; i > 0; --i) u.adds.push_back(add(rng));
  for (size_t g = rng() % 3; g > 0; --g) {
    emit_unit::downgrade_group d;
    d.ts_us = static_cast<int64_t>(rng() % 1000000) - 250000;  // zero or negative: taken as 0
    for (size_t i = rng() % 50; i > 0; --i) d.entries.push_back(add(rng));
    u.downgrades.push_back(std::move(d));
  }
  for (size_t i = rng() % 200; i > 0; --i)
    u.evicts.push_back(prefix_evict{rng(), rng() % 3 ? "" : "lora-9", 5});
  return u;
}

// UW1-UW4 byte for byte: every message is what protobuf writes for the same content and cut.
TEST(UnitWire, EveryMessageIsProtobufsOwnSerialisationOfTheSameCut) {
  std::mt19937_64 rng(20261207);
  const size_t cuts[][2] = {{16384, size_t{1} << 20}, {7, size_t{1} << 20}, {1000, 100},
                            {1, 1}, {0, 0}, {64, 2000}};
  size_t messages = 0;
  for (int round = 0; round < 300; ++round) {
    const emit_unit u = random_unit(rng);
    for (const auto& c : cuts) {
      for (bool expirations : {false, true}) {
        const auto got = wire(identity(), c[0], c[1], u, expirations);
        const auto want = with_protobuf(identity(), c[0], c[1], u, expirations);
        ASSERT_EQ(got.size(), want.size()) << "round " << round << " cut " << c[0] << "/" << c[1];
        for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "message " << i;
        messages += got.size();
      }
    }
  }
  EXPECT_GT(messages, 10000u);  // the cuts were exercised, not only empty units
}

// A long identity: its fields' lengths take two varint bytes, in every message.
TEST(UnitWire, ALongIdentityIsWrittenAsProtobufWritesIt) {
  std::mt19937_64 rng(7);
  const replica_identity long_id{std::string(200, 'r'), std::string(130, 'm'), "t", "sglang"};
  for (int round = 0; round < 20; ++round) {
    const emit_unit u = random_unit(rng);
    EXPECT_EQ(wire(long_id, 50, 4000, u, true), with_protobuf(long_id, 50, 4000, u, true));
  }
}

// UW2: a message takes at least one entry, whatever max_bytes says.
TEST(UnitWire, AMessageHoldsOneEntryAtLeast) {
  emit_unit u;
  for (uint64_t i = 1; i <= 3; ++i) u.adds.push_back(prefix_add{i, 16, tier::t1, "lora-1"});
  const auto got = wire(identity(), 100, 0, u, false);
  ASSERT_EQ(got.size(), 3u);
  for (const auto& bytes : got) {
    ic::CacheStateUpdate m;
    ASSERT_TRUE(m.ParseFromString(bytes));
    EXPECT_EQ(m.prefixes_size(), 1);
  }
}

TEST(UnitWire, AnEmptyIdentityAndTimestampAreLeftOutAsProtobufDoes) {
  emit_unit u;
  u.adds.push_back(prefix_add{0x0102030405060708ull, 0, tier::t1, ""});
  const replica_identity none{"", "", "", ""};
  const auto got = wire(none, 16, 1 << 20, u, false);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], with_protobuf(none, 16, 1 << 20, u, false)[0]);
  ic::CacheStateUpdate m;
  ASSERT_TRUE(m.ParseFromString(got[0]));
  EXPECT_EQ(m.timestamp_us(), 0);
  ASSERT_EQ(m.prefixes_size(), 1);
  EXPECT_EQ(m.prefixes(0).prefix_hash(), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
}

TEST(UnitWire, SectionsNeverShareAMessageAndEmptyOnesMakeNone) {
  emit_unit u;
  u.adds_ts_us = 10;
  for (uint64_t i = 1; i <= 3; ++i) u.adds.push_back(prefix_add{i, 16, tier::t1, ""});
  u.downgrades.push_back({20, {}});  // empty: no message
  u.downgrades.push_back({30, {prefix_add{9, 32, tier::t2, ""}}});
  u.evicts.push_back(prefix_evict{11, "", 5});
  const auto got = wire(identity(), 100, 1 << 20, u, true);
  ASSERT_EQ(got.size(), 3u);
  std::vector<std::pair<int64_t, int>> seen;
  for (const auto& bytes : got) {
    ic::CacheStateUpdate m;
    ASSERT_TRUE(m.ParseFromString(bytes));
    EXPECT_EQ(m.replica_id(), "replica-7");
    seen.emplace_back(m.timestamp_us(), m.prefixes_size());
  }
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int>>{{10, 3}, {30, 1}, {expired_ts_us, 1}}));
  EXPECT_EQ(wire(identity(), 100, 1 << 20, u, false).size(), 2u);  // no expirations section
  EXPECT_TRUE(wire(identity(), 100, 1 << 20, emit_unit{}, true).empty());
}

}  // namespace
}  // namespace kvrelay::emitter
