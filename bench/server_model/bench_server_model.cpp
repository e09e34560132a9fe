// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// bench_server_model: what one eviction costs the reference policy server in each of kvrelay's
// eviction modes, and how long a LookupRoute waits, on the model in server_model.hpp, at 100 k and
// 1 M resident keys (one tenant and model, 4 replicas, a fifth of the keys under 8 LoRA adapters).
//
// What each mode costs, as the reference does it:
// - expire (an entry of a ReportCacheState message with timestamp_us 1): under the write lock,
//   one keyed upsert per entry; then, once per MESSAGE, the entries gauge: every key visited under
//   the read lock (a reserved-tenant check and a per-model count each). BM_ExpireMessage (1, 64,
//   1024, 16384 entries per message) and BM_ExpireUpsertsOnly (without the gauge pass).
// - rpc (PublishEvent PREFIX_EVICTED): under the write lock, every key visited and compared on
//   tenant, model and prefix (and adapter when set), the matches losing the replica; then the same
//   gauge pass. BM_PrefixEvicted (gauge:1; gauge:0 = the write-locked visit alone).
// - lookups: BM_LookupBehindPrefixEvicted, a LookupRoute arriving as a PREFIX_EVICTED takes the
//   write lock (wall time until answered); BM_LookupBehindGaugePass, one arriving while a gauge
//   pass holds the read lock and a second producer's ingest waits for the write lock (either
//   mode); BM_LookupAlone, uncontended.
// cpu_per_eviction is CPU seconds per eviction with an SI prefix (1.2u = 1.2 µs).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "bench/server_model/server_model.hpp"

namespace {

using namespace kvrelay::server_model;

void per_eviction(benchmark::State& state, size_t per_iteration) {
  state.counters["cpu_per_eviction"] =
      benchmark::Counter(static_cast<double>(state.iterations() * per_iteration),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Messages of k expired entries (timestamp_us 1) of replica 0's resident keys, decoded before
// the clock starts as gRPC hands them over; up to 64 of them, over at least 64 Ki keys.
std::vector<update_in> expire_messages(model_world& w, size_t k) {
  std::vector<update_in> msgs;
  const size_t count = std::clamp<size_t>(65536 / k, 4, 64);
  for (size_t i = 0; i < count; ++i) {
    msgs.push_back(w.report(batch_of(i * k * k_replicas, k, w.n), 1));
  }
  return msgs;
}

// Expire mode: one message of k expired entries (arg 1), gauge pass included.
void BM_ExpireMessage(benchmark::State& state) {
  auto& w = world(static_cast<size_t>(state.range(0)));
  const auto k = static_cast<size_t>(state.range(1));
  const auto msgs = expire_messages(w, k);
  size_t i = 0;
  for (auto _ : state) w.index.ingest(msgs[i++ % msgs.size()]);
  per_eviction(state, k);
  if (w.index.lookup(w.lookup_key(0), k_now_us, k_ttl_us) != 0) {  // key 0 is in msgs[0]
    state.SkipWithError("an expired entry is still visible to a lookup");
  }
}

// The same without the per-message gauge pass: the keyed upserts alone.
void BM_ExpireUpsertsOnly(benchmark::State& state) {
  auto& w = world(static_cast<size_t>(state.range(0)));
  const auto k = static_cast<size_t>(state.range(1));
  const auto msgs = expire_messages(w, k);
  size_t i = 0;
  for (auto _ : state) w.index.ingest(msgs[i++ % msgs.size()], /*gauge=*/false);
  per_eviction(state, k);
}

// Rpc mode: one PREFIX_EVICTED (write-locked visit of every key), gauge pass included. The key
// is put back between iterations, off the clock, so the index keeps its size.
void BM_PrefixEvicted(benchmark::State& state) {
  auto& w = world(static_cast<size_t>(state.range(0)));
  const bool gauge = state.range(1) != 0;
  size_t key = 1;
  for (auto _ : state) {
    state.PauseTiming();
    const auto ev = w.evicted(key);
    const auto back = w.report({key}, k_now_us);
    state.ResumeTiming();
    w.index.prefix_evicted(ev, gauge);
    state.PauseTiming();
    if (w.index.lookup(w.lookup_key(key), k_now_us, k_ttl_us) != 0) {
      state.SkipWithError("the evicted entry is still there");
    }
    w.index.ingest(back, /*gauge=*/false);
    key = (key + 7919) % w.n;
    state.ResumeTiming();
  }
  per_eviction(state, 1);
}

// A LookupRoute that arrives just after a PREFIX_EVICTED took the write lock: wall time from its
// call to its answer (manual time). The eviction runs on another thread.
void BM_LookupBehindPrefixEvicted(benchmark::State& state) {
  auto& w = world(static_cast<size_t>(state.range(0)));
  size_t key = 3;
  const auto probe = w.lookup_key(2);  // a resident key of another replica
  int64_t found = 0;
  for (auto _ : state) {
    const auto ev = w.evicted(key);
    const auto back = w.report({key}, k_now_us);
    std::atomic<bool> locked{false};
    std::thread writer([&] {
      std::unique_lock<go_rwmutex> lock(w.index.mu);
      locked.store(true, std::memory_order_release);
      w.index.evict_range_locked(ev);
    });
    while (!locked.load(std::memory_order_acquire)) std::this_thread::yield();
    const auto t0 = std::chrono::steady_clock::now();
    found += w.index.lookup(probe, k_now_us, k_ttl_us);
    const auto t1 = std::chrono::steady_clock::now();
    writer.join();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    w.index.ingest(back, /*gauge=*/false);
    key = (key + 7919 * 4) % w.n;
  }
  if (found == 0) state.SkipWithError("the probe key was not found");
}

// Either mode: a LookupRoute that arrives while one producer's gauge pass holds the read lock and
// a second producer's ingest (1024 expired entries) waits for the write lock.
void BM_LookupBehindGaugePass(benchmark::State& state) {
  auto& w = world(static_cast<size_t>(state.range(0)));
  const auto probe = w.lookup_key(2);
  const auto msg = w.report(batch_of(4, 1024, w.n), 1);
  int64_t found = 0;
  size_t writer_seen = 0;
  for (auto _ : state) {
    std::atomic<bool> reading{false}, writing{false};
    std::thread gauge([&] {
      std::shared_lock<go_rwmutex> lock(w.index.mu);
      reading.store(true, std::memory_order_release);
      benchmark::DoNotOptimize(w.index.count_by_model_locked());
    });
    while (!reading.load(std::memory_order_acquire)) std::this_thread::yield();
    std::thread ingest([&] {
      writing.store(true, std::memory_order_release);
      w.index.ingest(msg, /*gauge=*/false);
    });
    while (!writing.load(std::memory_order_acquire)) std::this_thread::yield();
    // The writer is queued once a reader can no longer get in (bounded: it may also be done).
    // Polled with short sleeps: on two cores a spinning poller would starve the writer.
    for (int i = 0; i < 20000; ++i) {
      if (!w.index.mu.try_lock_shared()) {
        ++writer_seen;
        break;
      }
      w.index.mu.unlock_shared();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    const auto t0 = std::chrono::steady_clock::now();
    found += w.index.lookup(probe, k_now_us, k_ttl_us);
    const auto t1 = std::chrono::steady_clock::now();
    gauge.join();
    ingest.join();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  if (found == 0) state.SkipWithError("the probe key was not found");
  state.counters["writer_queued"] =
      static_cast<double>(writer_seen) / static_cast<double>(state.iterations());
}

// The same lookup with nobody holding the lock.
void BM_LookupAlone(benchmark::State& state) {
  auto& w = world(static_cast<size_t>(state.range(0)));
  const auto probe = w.lookup_key(2);
  int64_t found = 0;
  for (auto _ : state) found += w.index.lookup(probe, k_now_us, k_ttl_us);
  benchmark::DoNotOptimize(found);
}

constexpr int64_t k100k = 100'000, k1m = 1'000'000;

BENCHMARK(BM_ExpireMessage)
    ->ArgsProduct({{k100k, k1m}, {1, 64, 1024, 16384}})
    ->ArgNames({"keys", "per_msg"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ExpireUpsertsOnly)
    ->ArgsProduct({{k100k, k1m}, {64, 1024, 16384}})
    ->ArgNames({"keys", "per_msg"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefixEvicted)
    ->ArgsProduct({{k100k, k1m}, {1, 0}})
    ->ArgNames({"keys", "gauge"})
    ->Unit(benchmark::kMicrosecond);
// A fixed iteration count: the manual time is the lookup's wait alone, which is microseconds
// when the writer happens to finish first, and benchmark_min_time would then run thousands of
// 0.1 s writer passes (a quiet machine ran one case for over 10 minutes).
BENCHMARK(BM_LookupBehindPrefixEvicted)
    ->Args({k100k})
    ->Args({k1m})
    ->ArgNames({"keys"})
    ->UseManualTime()
    ->Iterations(20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LookupBehindGaugePass)
    ->Args({k100k})
    ->Args({k1m})
    ->ArgNames({"keys"})
    ->UseManualTime()
    ->Iterations(20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LookupAlone)->Args({k100k})->Args({k1m})->ArgNames({"keys"});

}  // namespace
