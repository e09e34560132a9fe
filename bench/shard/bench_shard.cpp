// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Positional index: update cost per block and heap per resident block.
//   bench_shard --benchmark_counters_tabular=true
// time_per_block is CPU time per block (an inverted rate counter, printed as e.g. "120ns");
// FingerprintOnly is the hashing floor of the same events, so the index's own cost is the
// difference within one run (docs/spec/design-rules.md DR38: ratios in one run). The machine is shared: compare
// numbers from the same run only.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/fingerprint.hpp"
#include "actors/shard/partition_set.hpp"
#include "actors/shard/positional_index.hpp"

namespace {

using kvrelay::block_removed;
using kvrelay::block_stored;
using kvrelay::engine_hash;
using kvrelay::index_op;
using kvrelay::index_options;
using kvrelay::partition_set;
using kvrelay::positional_index;

constexpr int64_t block_size = 16;
constexpr size_t blocks_per_event = 4;

// Chains of events of 4 random 16-token blocks; each event after a chain's first names the
// previous event's last block as its parent, so most blocks take the chained path (P01).
std::vector<block_stored> make_events(size_t count, size_t events_per_chain, uint64_t seed,
                                     size_t blocks = blocks_per_event) {
  std::mt19937_64 rng(seed);
  std::vector<block_stored> events(count);
  for (size_t e = 0; e < count; ++e) {
    block_stored& ev = events[e];
    for (size_t b = 0; b < blocks; ++b) ev.block_hashes.push_back(engine_hash::from_int(rng()));
    ev.token_ids.resize(blocks * block_size);
    for (auto& t : ev.token_ids) t = static_cast<uint32_t>(rng() % 151936);
    ev.block_size = block_size;
    ev.first_tainted_block = static_cast<uint32_t>(blocks);
    if (e % events_per_chain != 0) ev.parent = events[e - 1].block_hashes.back();
  }
  return events;
}

// malloc's chunks in use, its own mappings included. A table array of 2 MiB or more maps itself
// (probe_table rule PT6) and shows only in resident_bytes().
size_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

size_t resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Fresh inserts into an index that grows to Arg × 4 blocks per iteration (the small size keeps
// the table in cache, the large one does not).
void IndexStoreFresh(benchmark::State& state) {
  const auto events = make_events(static_cast<size_t>(state.range(0)), 16, 1);
  std::vector<index_op> out;
  out.reserve(16);
  size_t blocks = 0;
  for (auto _ : state) {
    state.PauseTiming();
    positional_index idx;
    state.ResumeTiming();
    for (const auto& ev : events) {
      out.clear();
      idx.stored(ev, out);
    }
    benchmark::DoNotOptimize(out.data());
    blocks += events.size() * blocks_per_event;
    state.PauseTiming();
    {  // destroy outside the timed region
      positional_index gone(std::move(idx));
    }
    state.ResumeTiming();
  }
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(blocks));
}
BENCHMARK(IndexStoreFresh)->Arg(4096)->Arg(65536)->Unit(benchmark::kMillisecond);

// 1 M fresh blocks into one index that grows as they come (Arg 0) or that was first told the
// engine holds 1 M (Arg 1: reserve, timed too, as a start that sized it pays it once): what
// growth costs on the add path, rehashes and page faults together.
void IndexStoreFresh1M(benchmark::State& state) {
  const auto events = make_events(size_t{1} << 18, 16, 1);
  const bool reserved = state.range(0) != 0;
  std::vector<index_op> out;
  out.reserve(16);
  size_t blocks = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto idx = std::make_unique<positional_index>();
    state.ResumeTiming();
    if (reserved) idx->reserve(events.size() * blocks_per_event);
    for (const auto& ev : events) {
      out.clear();
      idx->stored(ev, out);
    }
    benchmark::DoNotOptimize(out.data());
    blocks += events.size() * blocks_per_event;
    state.PauseTiming();
    idx.reset();  // destroy outside the timed region
    state.ResumeTiming();
  }
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(blocks));
}
BENCHMARK(IndexStoreFresh1M)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// 1 M fresh blocks through the shard's protocol, as the decoder hands them over: works of ~512
// blocks, events of Arg(0) blocks (4: decode steps of many requests; 128: long prefills, the
// e2e bench's shape), over Arg(1) adapter partitions (2+: the removal directory is kept too).
// At this size every table probe misses the cache: what partition_set's prefetching is for.
void PartitionStoreFresh1M(benchmark::State& state) {
  const auto per_event = static_cast<size_t>(state.range(0));
  const auto partitions = static_cast<uint32_t>(state.range(1));
  constexpr size_t total = size_t{1} << 20;
  const size_t per_work = std::max<size_t>(1, 512 / per_event);
  const auto events = make_events(total / per_event, 16, 5, per_event);
  std::vector<kvrelay::shard_work> works;
  for (size_t e = 0; e < events.size(); e += per_work) {
    kvrelay::shard_work w;
    w.epoch = 1;
    for (size_t k = e; k < std::min(events.size(), e + per_work); ++k) {
      kvrelay::kv_event ev;
      ev.type = kvrelay::event_type::stored;
      ev.stored = events[k];
      w.events.push_back(std::move(ev));
      w.partitions.push_back(static_cast<uint32_t>((k / 16) % partitions));  // a chain: one
    }
    works.push_back(std::move(w));
  }
  kvrelay::shard_work declare;
  for (uint32_t p = 0; p < partitions; ++p) declare.new_partitions.push_back("lora-" + std::to_string(p));
  size_t blocks = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto ps = std::make_unique<partition_set>();
    ps->declare(declare);
    state.ResumeTiming();
    for (const auto& w : works) benchmark::DoNotOptimize(ps->apply(w).data());
    blocks += total;
    state.PauseTiming();
    ps.reset();  // destroy outside the timed region
    state.ResumeTiming();
  }
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(blocks));
}
BENCHMARK(PartitionStoreFresh1M)
    ->Args({4, 1})->Args({128, 1})->Args({4, 8})->Args({128, 8})
    ->Unit(benchmark::kMillisecond);

uint64_t mix(uint64_t x) {  // splitmix64: engine-like random hashes, recomputable by index
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The steady-state stream: event e stores blocks mix(4e)..mix(4e+3), chained to the previous
// event except every 16th; removal_of(e) names the blocks of event e.
struct steady_stream {
  std::vector<block_stored> payloads = make_events(4096, 1, 2);
  void store(uint64_t e, block_stored& ev) const {
    ev.block_hashes.resize(blocks_per_event);
    ev.block_size = block_size;
    ev.first_tainted_block = blocks_per_event;
    for (size_t b = 0; b < blocks_per_event; ++b) ev.block_hashes[b].value = mix(e * 4 + b);
    if (e % 16 == 0)
      ev.parent.reset();
    else
      ev.parent = engine_hash::from_int(mix(e * 4 - 1));
    ev.token_ids = payloads[e % payloads.size()].token_ids;
  }
  static void removal_of(uint64_t e, block_removed& rm) {
    rm.block_hashes.resize(blocks_per_event);
    for (size_t b = 0; b < blocks_per_event; ++b) rm.block_hashes[b].value = mix(e * 4 + b);
  }
};

// Steady state at 1M resident blocks: each 4-block store is paired with the removal of the
// event stored 2^18 events earlier, so the table neither grows nor stays cache-warm. The event
// itself is hot, as it is right after the decoder: hashes are recomputed, token payloads come
// from a small pool.
void IndexStoreEvictSteady(benchmark::State& state) {
  constexpr uint64_t resident_events = uint64_t{1} << 18;
  const steady_stream stream;
  block_stored ev;
  block_removed rm;
  positional_index idx;
  std::vector<index_op> out;
  out.reserve(16);
  uint64_t e = 0;
  for (; e < resident_events; ++e) {
    stream.store(e, ev);
    out.clear();
    idx.stored(ev, out);
  }
  size_t blocks = 0;
  for (auto _ : state) {
    steady_stream::removal_of(e - resident_events, rm);
    stream.store(e, ev);
    out.clear();
    idx.removed(rm, out);
    idx.stored(ev, out);
    benchmark::DoNotOptimize(out.data());
    ++e;
    blocks += blocks_per_event;
  }
  state.counters["resident"] = static_cast<double>(idx.size());
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(blocks));
}
BENCHMARK(IndexStoreEvictSteady);

// The same steady state through the shard's protocol, with the stores spread over Arg adapter
// partitions (round robin by chain) and the removals naming none: at 1 partition every removal
// goes to it; at more, the hash directory routes each removed hash to its holder. Compare the
// two in one run (removal routing for LoRA fleets).
void partition_store_evict(benchmark::State& state, uint64_t resident_events) {
  const auto partitions = static_cast<uint32_t>(state.range(0));
  const steady_stream stream;
  kvrelay::shard_work w;
  w.epoch = 1;
  w.events.resize(2);
  w.partitions = {0, 0};
  w.events[0].type = kvrelay::event_type::stored;
  w.events[1].type = kvrelay::event_type::removed;
  // A chain (16 events) stays in one partition, as a request does.
  auto make_store = [&](uint64_t e) {
    stream.store(e, w.events[0].stored);
    w.partitions[0] = static_cast<uint32_t>((e / 16) % partitions);
  };
  partition_set ps;
  kvrelay::shard_work declare;
  for (uint32_t p = 0; p < partitions; ++p) declare.new_partitions.push_back("lora-" + std::to_string(p));
  ps.declare(declare);
  kvrelay::shard_work fill = w;
  fill.events.resize(1);
  fill.partitions.resize(1);
  uint64_t e = 0;
  for (; e < resident_events; ++e) {
    make_store(e);
    fill.events[0].stored = w.events[0].stored;
    fill.partitions[0] = w.partitions[0];
    ps.apply(fill);
  }
  size_t blocks = 0;
  for (auto _ : state) {
    steady_stream::removal_of(e - resident_events, w.events[1].removed);
    make_store(e);
    benchmark::DoNotOptimize(ps.apply(w).data());
    ++e;
    blocks += blocks_per_event;
  }
  size_t resident = 0;
  for (uint32_t p = 0; p < ps.size(); ++p) resident += ps.index(p).size();
  state.counters["resident"] = static_cast<double>(resident);
  state.counters["directory"] = static_cast<double>(ps.directory_size());
  state.counters["bytes_per_block"] =
      static_cast<double>(ps.heap_bytes()) / static_cast<double>(resident);
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(blocks));
}
void PartitionStoreEvictSteady(benchmark::State& state) {
  partition_store_evict(state, uint64_t{1} << 16);
}
BENCHMARK(PartitionStoreEvictSteady)->Arg(1)->Arg(2)->Arg(256);

// A catch-up's table sizes: an engine cache of 16 Ki blocks over 9 adapter partitions (the first
// is home), each block stored and evicted again, so the tables fit the caches. Round robin sends
// 8 of 9 removals through the directory; a catch-up's engine sends about a fifth.
void PartitionStoreEvictSteady16Ki(benchmark::State& state) {
  partition_store_evict(state, uint64_t{1} << 12);
}
BENCHMARK(PartitionStoreEvictSteady16Ki)->Arg(1)->Arg(9);

// The hashing floor for the same events: content + chain, no map.
void FingerprintOnly(benchmark::State& state) {
  const auto events = make_events(65536, 16, 1);
  size_t blocks = 0;
  for (auto _ : state) {
    uint64_t prefix = 0;
    for (const auto& ev : events) {
      for (size_t b = 0; b < blocks_per_event; ++b) {
        const uint64_t c = kvrelay::fingerprint::content(
            ev.token_ids.data() + b * block_size, static_cast<size_t>(block_size));
        prefix = kvrelay::fingerprint::chain(prefix, c);
      }
    }
    benchmark::DoNotOptimize(prefix);
    blocks += events.size() * blocks_per_event;
  }
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(blocks));
}
BENCHMARK(FingerprintOnly)->Unit(benchmark::kMillisecond);

// One 4-block event whose hashes and tokens a loop refills in place.
block_stored event_to_refill() {
  block_stored ev;
  ev.token_ids.resize(blocks_per_event * block_size);
  ev.block_size = block_size;
  ev.first_tainted_block = blocks_per_event;
  ev.block_hashes.resize(blocks_per_event);
  return ev;
}

// Memory per resident block with 1M int-hash 16-token blocks: what the process's resident set
// grew by (which would also count outgrown arrays an arena kept: the second case runs after the
// first freed its index, as a rebuild after a clear does), what malloc handed out (mallinfo2
// delta; the big arrays are not malloc's), and the index's own estimate. Arg: max_resident (0 = no cap; 2M = cap set, never reached).
void IndexMemory1M(benchmark::State& state) {
  constexpr size_t events = 250000;  // × 4 blocks
  index_options opts;
  opts.max_resident = static_cast<size_t>(state.range(0));
  std::vector<index_op> out;
  out.reserve(16);
  block_stored ev = event_to_refill();
  std::mt19937_64 rng(3);
  for (auto _ : state) {
    malloc_trim(0);
    const size_t before = heap_in_use();
    const size_t rss_before = resident_bytes();
    auto idx = std::make_unique<positional_index>(opts);
    for (size_t e = 0; e < events; ++e) {
      for (auto& h : ev.block_hashes) h.value = rng();
      for (auto& t : ev.token_ids) t = static_cast<uint32_t>(rng() % 151936);
      out.clear();
      idx->stored(ev, out);
    }
    const size_t after = heap_in_use();
    const size_t rss_after = resident_bytes();
    const double n = static_cast<double>(idx->size());
    state.counters["resident"] = n;
    state.counters["malloc_bytes_per_block"] = static_cast<double>(after - before) / n;
    state.counters["rss_bytes_per_block"] = static_cast<double>(rss_after - rss_before) / n;
    state.counters["estimated_bytes_per_block"] = static_cast<double>(idx->heap_bytes()) / n;
  }
}
BENCHMARK(IndexMemory1M)->Arg(0)->Arg(2000000)->Iterations(1)->Unit(benchmark::kMillisecond);

// A burst of 1 M blocks drained back to an engine cache of 16 Ki (memory comes back
// after an overload): resident memory with the burst held, then once all but 16 Ki blocks were
// removed. probe_table rule PT7 rebuilds a table left under 1/16 full, and its big arrays are
// mappings of their own (PT6), so the drained index should hold about what a 16 Ki index does.
void BurstDrained(benchmark::State& state) {
  constexpr size_t events = 250000;  // × 4 blocks
  constexpr size_t keep_events = 4096;  // 16 Ki blocks
  index_options opts;
  std::vector<index_op> out;
  out.reserve(16);
  block_stored ev = event_to_refill();
  std::mt19937_64 rng(11);
  for (auto _ : state) {
    // The burst's hashes, kept for its removals: resident before the first measure.
    std::vector<std::array<uint64_t, blocks_per_event>> hashes(events);
    malloc_trim(0);
    const size_t rss0 = resident_bytes();
    auto idx = std::make_unique<positional_index>(opts);
    for (size_t e = 0; e < events; ++e) {
      for (size_t b = 0; b < blocks_per_event; ++b)
        ev.block_hashes[b].value = hashes[e][b] = rng();
      for (auto& t : ev.token_ids) t = static_cast<uint32_t>(rng() % 151936);
      out.clear();
      idx->stored(ev, out);
    }
    const size_t rss_full = resident_bytes();
    const size_t heap_full = idx->heap_bytes();
    block_removed rm;
    rm.block_hashes.resize(blocks_per_event);
    for (size_t e = keep_events; e < events; ++e) {
      for (size_t b = 0; b < blocks_per_event; ++b) rm.block_hashes[b].value = hashes[e][b];
      out.clear();
      idx->removed(rm, out);
    }
    malloc_trim(0);
    const size_t rss_drained = resident_bytes();
    state.counters["resident_after"] = static_cast<double>(idx->size());
    state.counters["rss_full_MiB"] = static_cast<double>(rss_full - rss0) / (1 << 20);
    state.counters["rss_drained_MiB"] = static_cast<double>(rss_drained - rss0) / (1 << 20);
    state.counters["est_full_MiB"] = static_cast<double>(heap_full) / (1 << 20);
    state.counters["est_drained_MiB"] = static_cast<double>(idx->heap_bytes()) / (1 << 20);
  }
}
BENCHMARK(BurstDrained)->Iterations(1)->Unit(benchmark::kMillisecond);

// A source that stores at T2 and never removes (LMCache's multi-process mode, #5076), fed ten
// times the tier's bound of 100 k blocks: resident blocks and memory after 1x and after 10x the
// bound (positional_index rule I8). Arg 0: no bound (what kvrelay did before), for comparison.
void StoreOnlyTier(benchmark::State& state) {
  constexpr size_t bound = 100000;
  constexpr size_t events = 10 * bound / blocks_per_event;
  index_options opts;
  opts.max_t2_blocks = state.range(0) != 0 ? bound : 0;
  std::vector<index_op> out;
  out.reserve(16);
  block_stored ev = event_to_refill();
  ev.medium.id = kvrelay::medium_id::cpu;
  ev.medium.tier = kvrelay::tier::t2;
  std::mt19937_64 rng(5);
  for (auto _ : state) {
    malloc_trim(0);
    const size_t rss0 = resident_bytes();
    auto idx = std::make_unique<positional_index>(opts);
    size_t rss1 = 0, est1 = 0, evicts = 0;
    for (size_t e = 0; e < events; ++e) {
      for (auto& h : ev.block_hashes) h.value = rng();
      for (auto& t : ev.token_ids) t = static_cast<uint32_t>(rng() % 151936);
      out.clear();
      idx->stored(ev, out);
      for (const auto& op : out) evicts += op.op == index_op::kind::evict ? 1 : 0;
      if ((e + 1) * blocks_per_event == bound) {
        rss1 = resident_bytes();
        est1 = idx->heap_bytes();
      }
    }
    const size_t rss10 = resident_bytes();
    state.counters["resident"] = static_cast<double>(idx->size());
    state.counters["evictions_sent"] = static_cast<double>(evicts);
    state.counters["rss_mb_at_1x"] = static_cast<double>(rss1 - rss0) / 1e6;
    state.counters["rss_mb_at_10x"] = static_cast<double>(rss10 - rss0) / 1e6;
    state.counters["est_mb_at_1x"] = static_cast<double>(est1) / 1e6;
    state.counters["est_mb_at_10x"] = static_cast<double>(idx->heap_bytes()) / 1e6;
    state.counters["time_per_block"] = benchmark::Counter(
        static_cast<double>(events * blocks_per_event),
        benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  }
}
BENCHMARK(StoreOnlyTier)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
