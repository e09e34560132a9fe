// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// How long the ingress' ZMQ thread takes to stop while the engine publishes as fast as it can:
// a real XPUB on loopback TCP, a real zmq_source crediting every batch it hands over, and the
// time of stop() alone, once the source has taken 1 000 batches. The test suite asserts only
// that the stop returns and leaves the engine (tests/ingress/zmq_source_test.cpp); this is where
// its time is measured.
//
//   build/default/bench/ingress/bench_ingress_stop --benchmark_repetitions=5

#include <benchmark/benchmark.h>
#include <zmq.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/ingress/zmq_source.hpp"
#include "base/big_endian.hpp"

namespace {

using namespace std::chrono_literals;
using kvrelay::ingress::ingress_event;
using kvrelay::raw_batch_ptr;
using kvrelay::ingress::zmq_source;

struct batch_counter {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t batches = 0;
  zmq_source* source = nullptr;
  void operator()(ingress_event e) {
    if (!std::holds_alternative<raw_batch_ptr>(e)) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      ++batches;
    }
    if (source) source->credit(1);
    cv.notify_all();
  }
  bool wait(uint64_t n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, 30s, [&] { return batches >= n; });
  }
};

// Until the XPUB saw a subscription (kind 1) or an unsubscription (kind 0).
bool wait_subscription(zmq::socket_t& pub, uint8_t kind) {
  std::array<zmq_pollitem_t, 1> it{{{pub.handle(), 0, ZMQ_POLLIN, 0}}};
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::poll(it, 50ms);
    zmq::message_t m;
    while (pub.recv(m, zmq::recv_flags::dontwait))
      if (m.size() >= 1 && static_cast<const uint8_t*>(m.data())[0] == kind) return true;
  }
  return false;
}

void StopUnderLoad(benchmark::State& state) {
  for (auto _ : state) {
    auto ctx = std::make_shared<zmq::context_t>(1);
    zmq::socket_t pub(*ctx, zmq::socket_type::xpub);
    pub.bind("tcp://127.0.0.1:*");
    kvrelay::ingress::zmq_source_options o;
    o.endpoint = pub.get(zmq::sockopt::last_endpoint);
    o.context = ctx;
    o.reconnect_interval = 50ms;
    batch_counter sink;
    zmq_source src(o, [&sink](ingress_event e) { sink(std::move(e)); });
    sink.source = &src;
    std::string err;
    if (!src.start(&err) || !wait_subscription(pub, 1)) {
      state.SkipWithError(("the source did not subscribe: " + err).c_str());
      return;
    }
    std::atomic<bool> done{false};
    std::thread publisher([&] {
      std::array<unsigned char, 8> seq{};
      const std::string payload(512, 'x');
      for (uint64_t s = 0; !done.load(std::memory_order_relaxed); ++s) {
        kvrelay::store_be64(s, seq.data());
        pub.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
        pub.send(zmq::buffer(seq), zmq::send_flags::sndmore);
        pub.send(zmq::buffer(payload), zmq::send_flags::none);
      }
    });
    if (!sink.wait(1000)) {
      done = true;
      publisher.join();
      state.SkipWithError("the source did not take 1000 batches");
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    src.stop();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    done = true;
    publisher.join();
    // The engine socket outlives the source's session for it (see the test's wait_unsubscribed).
    wait_subscription(pub, 0);
  }
}
BENCHMARK(StopUnderLoad)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace
