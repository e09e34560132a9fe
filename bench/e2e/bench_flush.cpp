// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The debouncer's side of the hot path, which bench/decoder and bench/shard do not cover:
//   DebouncerCoalesce  pending_set::apply of shard ops (a quarter re-touch keys already pending,
//                      one in 16 is an eviction) and a take() per 4096 adds: ns per op
//   DebouncerBacklog1M 1 M fresh adds pile up, then every unit is taken: ns per block
//   DebouncerStoreEvictWindow  a full 16 Ki cache at a catch-up's pace: ns per block stored
//                      and evicted
//   (both with adds that introduce their key logged, /1, and hashed into the map, /0)
//   CsuBuild           filling a CacheStateUpdate with 4096 PrefixEntry as the emitter does
//   CsuSerialize       SerializeToString of that update (what gRPC does before the wire)
// each at block size 16 and 64 (the block size only changes token_count, hence varint widths).
//   bench_flush --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "actors/debouncer/pending_set.hpp"
#include "base/fingerprint.hpp"
#include "proto/inferencecache/v1alpha1/inferencecache.pb.h"

namespace {

namespace ic = inferencecache::v1alpha1;
constexpr size_t k_entries = 4096;

std::vector<kvrelay::shard_ops> make_ops(uint32_t block_size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<kvrelay::shard_ops> out;
  std::vector<uint64_t> recent;
  for (size_t w = 0; w < 16; ++w) {  // 16 works of 256 ops = 4096
    kvrelay::shard_ops ops;
    ops.adapter = (w % 5 == 0) ? "lora-" + std::to_string(w % 8) : "";
    ops.ts_us = 1767225600000000 + static_cast<int64_t>(w);
    ops.had_store = true;
    for (uint32_t i = 0; i < 256; ++i) {
      kvrelay::prefix_op op;
      const uint64_t r = rng();
      op.fingerprint = (!recent.empty() && r % 4 == 0) ? recent[r % recent.size()] : rng();
      op.op = (r % 16 == 1) ? kvrelay::prefix_op::kind::evict : kvrelay::prefix_op::kind::upsert;
      op.token_count = (i + 1) * block_size;
      recent.push_back(op.fingerprint);
      ops.ops.push_back(op);
    }
    out.push_back(std::move(ops));
  }
  return out;
}

void DebouncerCoalesce(benchmark::State& state) {
  const auto works = make_ops(static_cast<uint32_t>(state.range(0)), 7);
  kvrelay::pending_set pending;
  uint64_t id = 0;
  for (auto _ : state) {
    for (const auto& w : works) pending.apply(w);
    auto unit = pending.take(++id);
    benchmark::DoNotOptimize(unit);
  }
  state.counters["ops/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * k_entries, benchmark::Counter::kIsRate);
  state.counters["time_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * k_entries,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(DebouncerCoalesce)->Arg(16)->Arg(64);

// A blast's backlog: 1 M fresh adds (introduces, 370 per shard message as in the e2e workload,
// a fifth on 8 adapters) pile up before the emitter takes a single unit, then every unit is
// taken (16 384 adds each). What the debouncer costs per block when the server is behind.
void DebouncerBacklog1M(benchmark::State& state) {
  constexpr size_t total = size_t{1} << 20, per_msg = 370;
  std::mt19937_64 rng(3);
  std::vector<kvrelay::shard_ops> msgs;
  for (size_t n = 0; n < total; n += per_msg) {
    kvrelay::shard_ops ops;
    ops.adapter = (msgs.size() % 5 == 0) ? "lora-" + std::to_string(msgs.size() % 8) : "";
    ops.had_store = true;
    ops.ts_us = 1767225600000000;
    for (size_t i = 0; i < per_msg; ++i)
      ops.ops.push_back(kvrelay::prefix_op{kvrelay::prefix_op::kind::upsert, rng(),
                                           static_cast<uint32_t>(16 * (i + 1)), kvrelay::tier::t1,
                                           true});
    msgs.push_back(std::move(ops));
  }
  kvrelay::pending_set::options opts;
  opts.log_adds = state.range(0) != 0;
  size_t blocks = 0;
  for (auto _ : state) {
    kvrelay::pending_set pending(opts);
    for (const auto& m : msgs) pending.apply(m);
    uint64_t id = 0;
    while (auto u = pending.take(++id)) benchmark::DoNotOptimize(u->adds.data());
    blocks += msgs.size() * per_msg;
  }
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(DebouncerBacklog1M)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// A full cache at a catch-up's pace: an engine with a 16 Ki-block cache whose every batch stores
// 474 new blocks (introduces) and evicts the 474 stored 16 Ki blocks before, a fifth of the
// batches on 8 adapters; a take per 40 000 blocks (a flush window's worth at 0.2 core). Most
// blocks come and go inside one window (a fresh pair, dropped); the rest go out as an add and,
// a window later, an eviction. ns per block stored (and, later, evicted).
void DebouncerStoreEvictWindow(benchmark::State& state) {
  constexpr size_t cache = 16384, per_batch = 474, window = 40000, batches = 2048;
  std::mt19937_64 rng(5);
  std::vector<kvrelay::shard_ops> msgs;
  std::vector<std::pair<std::string, uint64_t>> resident;  // store order
  size_t oldest = 0;
  for (size_t b = 0; b < batches; ++b) {
    const std::string adapter = (b % 5 == 0) ? "lora-" + std::to_string(b % 8) : "";
    kvrelay::shard_ops stores;
    stores.adapter = adapter;
    stores.had_store = true;
    stores.ts_us = 1767225600000000 + static_cast<int64_t>(b);
    for (size_t i = 0; i < per_batch; ++i) {
      const uint64_t fp = rng();
      stores.ops.push_back(kvrelay::prefix_op{kvrelay::prefix_op::kind::upsert, fp,
                                              static_cast<uint32_t>(16 * (i + 1)),
                                              kvrelay::tier::t1, true});
      resident.emplace_back(adapter, fp);
    }
    msgs.push_back(std::move(stores));
    // The removals of one batch, split by the adapter that held each block, in order.
    while (resident.size() - oldest > cache) {
      kvrelay::shard_ops evicts;
      evicts.adapter = resident[oldest].first;
      evicts.ts_us = 1767225600000000 + static_cast<int64_t>(b);
      while (resident.size() - oldest > cache && resident[oldest].first == evicts.adapter) {
        evicts.ops.push_back(kvrelay::prefix_op{kvrelay::prefix_op::kind::evict,
                                                resident[oldest].second, 0, kvrelay::tier::t1,
                                                false});
        ++oldest;
      }
      msgs.push_back(std::move(evicts));
    }
  }
  kvrelay::pending_set::options opts;
  opts.log_adds = state.range(0) != 0;
  size_t blocks = 0;
  uint64_t id = 0;
  for (auto _ : state) {
    kvrelay::pending_set pending(opts);
    size_t since_take = 0;
    for (const auto& m : msgs) {
      pending.apply(m);
      if (m.had_store) since_take += m.ops.size();
      if (since_take >= window) {
        since_take = 0;
        while (auto u = pending.take(++id)) benchmark::DoNotOptimize(u->adds.data());
      }
    }
    while (auto u = pending.take(++id)) benchmark::DoNotOptimize(u->adds.data());
    blocks += batches * per_batch;
  }
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(DebouncerStoreEvictWindow)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void fill(ic::CacheStateUpdate& u, uint32_t block_size) {
  u.set_replica_id("bench-0");
  u.set_model_id("Qwen/Qwen2.5-7B-Instruct");
  u.set_hash_scheme("vllm");
  u.set_timestamp_us(1767225600000000);
  u.mutable_prefixes()->Reserve(static_cast<int>(k_entries));
  for (size_t i = 0; i < k_entries; ++i) {
    auto* p = u.add_prefixes();
    p->set_prefix_hash(kvrelay::fingerprint::to_be8(0x9e3779b97f4a7c15ULL * (i + 1)));
    p->set_token_count(static_cast<int32_t>((i % 512 + 1) * block_size));
    p->set_tier(ic::CACHE_TIER_T1);
    if (i % 5 == 0) p->set_adapter_id("lora-3");
  }
}

void set_entry_counters(benchmark::State& state) {
  state.counters["entries/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * k_entries, benchmark::Counter::kIsRate);
  state.counters["time_per_entry"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * k_entries,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void CsuBuild(benchmark::State& state) {
  for (auto _ : state) {
    ic::CacheStateUpdate u;
    fill(u, static_cast<uint32_t>(state.range(0)));
    benchmark::DoNotOptimize(u.prefixes_size());
  }
  set_entry_counters(state);
}
BENCHMARK(CsuBuild)->Arg(16)->Arg(64);

void CsuSerialize(benchmark::State& state) {
  ic::CacheStateUpdate u;
  fill(u, static_cast<uint32_t>(state.range(0)));
  std::string out;
  for (auto _ : state) {
    out.clear();
    u.SerializeToString(&out);
    benchmark::DoNotOptimize(out.data());
  }
  set_entry_counters(state);
  state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(CsuSerialize)->Arg(16)->Arg(64);

// What the emitter paid per message: gRPC's own SerializationTraits, which sizes the message and
// then, through a stream, sizes it again (every entry's ByteSizeLong twice) ...
void CsuGrpcTraits(benchmark::State& state) {
  ic::CacheStateUpdate u;
  fill(u, static_cast<uint32_t>(state.range(0)));
  for (auto _ : state) {
    grpc::ByteBuffer b;
    bool own = false;
    benchmark::DoNotOptimize(grpc::SerializationTraits<ic::CacheStateUpdate>::Serialize(u, &b, &own));
    benchmark::DoNotOptimize(b.Length());
  }
  set_entry_counters(state);
}
BENCHMARK(CsuGrpcTraits)->Arg(16)->Arg(64);

// ... and what policy_client::encode pays now: one size pass, the bytes written into one slice.
void CsuSizedOnce(benchmark::State& state) {
  ic::CacheStateUpdate u;
  fill(u, static_cast<uint32_t>(state.range(0)));
  for (auto _ : state) {
    const size_t size = u.ByteSizeLong();
    grpc::Slice slice(size);
    u.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
    grpc::ByteBuffer b(&slice, 1);
    benchmark::DoNotOptimize(b.Length());
  }
  set_entry_counters(state);
}
BENCHMARK(CsuSizedOnce)->Arg(16)->Arg(64);

}  // namespace
