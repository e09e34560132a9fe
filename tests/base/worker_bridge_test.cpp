// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The worker bridge (base/worker_bridge.hpp, WB1-WB7) with real threads: every wait is for a
// state (a latch, a count), never for a time.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/worker_bridge.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;

// A one-shot gate threads wait on.
class latch {
 public:
  void open() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, limit, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// What the owner received, in order.
struct received {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> values;
  void add(int v) {
    std::lock_guard<std::mutex> lk(mu);
    values.push_back(v);
    cv.notify_all();
  }
  bool wait_for_count(size_t n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, 10s, [&] { return values.size() >= n; });
  }
  std::vector<int> now() {
    std::lock_guard<std::mutex> lk(mu);
    return values;
  }
};

worker_options opts(worker_options::threads t, worker_options::on_close c, bool skip = false) {
  return worker_options{"kvr.test", t, c, skip};
}

// A result whose end says the worker let go of it (delivered or dropped).
struct tracked {
  std::shared_ptr<latch> gone;
  ~tracked() {
    if (gone) gone->open();
  }
};

TEST(WorkerBridge, WB1NothingIsDeliveredOnceClosed) {
  auto r = std::make_shared<received>();
  latch running, release;
  auto gone = std::make_shared<latch>();
  {
    worker_bridge<std::shared_ptr<tracked>> b(
        opts(worker_options::threads::serial, worker_options::on_close::detach),
        [r](std::shared_ptr<tracked>) { r->add(1); });
    ASSERT_TRUE(b.submit([&] {
      running.open();
      release.wait();
      return std::make_shared<tracked>(tracked{gone});
    }));
    ASSERT_TRUE(running.wait());
  }  // closed while the job runs
  release.open();
  ASSERT_TRUE(gone->wait()) << "the worker never let go of the result";
  EXPECT_TRUE(r->now().empty()) << "a result was delivered after the bridge closed";
}

TEST(WorkerBridge, WB2ClosingReleasesWhatDeliverHolds) {
  auto owner = std::make_shared<int>(7);
  latch running, release;
  auto gone = std::make_shared<latch>();
  {
    worker_bridge<std::shared_ptr<tracked>> b(
        opts(worker_options::threads::serial, worker_options::on_close::detach),
        [owner](std::shared_ptr<tracked>) {});
    ASSERT_TRUE(b.submit([&] {
      running.open();
      release.wait();
      return std::make_shared<tracked>(tracked{gone});
    }));
    ASSERT_TRUE(running.wait());
    EXPECT_EQ(owner.use_count(), 2);
  }
  EXPECT_EQ(owner.use_count(), 1) << "a running job still holds the owner";
  release.open();
  ASSERT_TRUE(gone->wait());
}

TEST(WorkerBridge, WB3SerialRunsInOrderPerJobRunsAlongside) {
  auto r = std::make_shared<received>();
  {
    worker_bridge<int> b(opts(worker_options::threads::serial, worker_options::on_close::join),
                         [r](int v) { r->add(v); });
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(b.submit([i] { return i; }));
    ASSERT_TRUE(r->wait_for_count(50));
  }
  std::vector<int> want(50);
  for (int i = 0; i < 50; ++i) want[static_cast<size_t>(i)] = i;
  EXPECT_EQ(r->now(), want);

  // per_job: the second job is delivered while the first still waits for it.
  auto p = std::make_shared<received>();
  latch first_may_end;
  worker_bridge<int> b(opts(worker_options::threads::per_job, worker_options::on_close::detach),
                       [p](int v) { p->add(v); });
  ASSERT_TRUE(b.submit([&first_may_end] {
    first_may_end.wait();
    return 1;
  }));
  ASSERT_TRUE(b.submit([] { return 2; }));
  ASSERT_TRUE(p->wait_for_count(1));
  EXPECT_EQ(p->now(), (std::vector<int>{2})) << "the second job waited behind the first";
  first_may_end.open();
  ASSERT_TRUE(p->wait_for_count(2));
}

TEST(WorkerBridge, WB4JoinWaitsForTheRunningJobAndQueuedOnesAreDropped) {
  std::atomic<bool> finished{false}, second_ran{false};
  latch running;
  {
    worker_bridge<int> b(opts(worker_options::threads::serial, worker_options::on_close::join),
                         [](int) {});
    ASSERT_TRUE(b.submit([&] {
      running.open();
      // Still busy for a while after the destructor began: one that did not wait for it
      // returns first.
      const auto until = std::chrono::steady_clock::now() + 50ms;
      while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
      finished = true;
      return 1;
    }));
    ASSERT_TRUE(b.submit([&] {
      second_ran = true;
      return 2;
    }));
    ASSERT_TRUE(running.wait());
  }
  EXPECT_TRUE(finished) << "the destructor returned before the running job ended";
  EXPECT_FALSE(second_ran) << "a job queued behind it ran after the close";
}

TEST(WorkerBridge, WB5SkipWhenBusyRefusesRatherThanQueues) {
  auto r = std::make_shared<received>();
  latch running, release;
  worker_bridge<int> b(opts(worker_options::threads::serial, worker_options::on_close::detach,
                            /*skip=*/true),
                       [r](int v) { r->add(v); });
  ASSERT_TRUE(b.submit([&] {
    running.open();
    release.wait();
    return 1;
  }));
  ASSERT_TRUE(running.wait());
  EXPECT_FALSE(b.submit([] { return 2; })) << "busy: the tick is skipped";
  release.open();
  ASSERT_TRUE(r->wait_for_count(1));
  EXPECT_TRUE(b.submit([] { return 3; })) << "idle again once the result is delivered";
  ASSERT_TRUE(r->wait_for_count(2));
  EXPECT_EQ(r->now(), (std::vector<int>{1, 3}));
}

TEST(WorkerBridge, WB6TheNewestReplaceableJobWins) {
  auto r = std::make_shared<received>();
  latch running, release;
  worker_bridge<int> b(opts(worker_options::threads::serial, worker_options::on_close::join),
                       [r](int v) { r->add(v); });
  ASSERT_TRUE(b.submit([&] {
    running.open();
    release.wait();
    return 0;
  }));
  ASSERT_TRUE(running.wait());
  b.submit([] { return 1; }, queueing::replaceable);
  b.submit([] { return 2; }, queueing::replaceable);   // takes 1's place
  b.submit([] { return 3; }, queueing::replacing);     // takes 2's place, not replaceable
  b.submit([] { return 4; }, queueing::replaceable);   // queued behind 3
  b.submit([] { return 5; });                          // appended
  release.open();
  ASSERT_TRUE(r->wait_for_count(4));
  EXPECT_EQ(r->now(), (std::vector<int>{0, 3, 4, 5}));
}

TEST(WorkerBridge, WB7ADeliveryIsOnTheWorkersThreadAfterItsJob) {
  auto r = std::make_shared<received>();
  std::thread::id job_thread, deliver_thread;
  std::mutex mu;
  worker_bridge<int> b(opts(worker_options::threads::serial, worker_options::on_close::join),
                       [&, r](int v) {
                         {
                           std::lock_guard<std::mutex> lk(mu);
                           deliver_thread = std::this_thread::get_id();
                         }
                         r->add(v);
                       });
  ASSERT_TRUE(b.submit([&] {
    std::lock_guard<std::mutex> lk(mu);
    job_thread = std::this_thread::get_id();
    return 1;
  }));
  ASSERT_TRUE(r->wait_for_count(1));
  std::lock_guard<std::mutex> lk(mu);
  EXPECT_EQ(job_thread, deliver_thread);
  EXPECT_NE(job_thread, std::this_thread::get_id());
}

}  // namespace
}  // namespace kvrelay
