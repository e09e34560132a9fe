// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The port's inbox and rpc mode's deferred eviction completions: completions wake the actor a
// batch at a time, and the end of a burst always wakes it, whatever order RPC threads run in.
#include "actors/emitter/policy_port.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

namespace kvrelay::emitter {
namespace {

struct woken_inbox {
  woken_inbox() {
    inbox->bind([this] { wakes.fetch_add(1); });
  }
  std::shared_ptr<port_inbox> inbox = std::make_shared<port_inbox>();
  std::atomic<int> wakes{0};
};

port_event completion(uint64_t call, int code = 0) {
  port_event e;
  e.call = call;
  e.code = code;
  return e;
}

TEST(PortInbox, DeferredPushesWaitForTheBatchThenOneWakeUp) {
  woken_inbox w;
  w.inbox->push(completion(1), 3);
  w.inbox->push(completion(2), 3);
  EXPECT_EQ(w.wakes.load(), 0);
  w.inbox->push(completion(3), 3);
  EXPECT_EQ(w.wakes.load(), 1);
  w.inbox->push(completion(4), 1);
  EXPECT_EQ(w.wakes.load(), 1) << "a wake-up is already on its way";
  std::vector<port_event> got;
  w.inbox->take(got);
  EXPECT_EQ(got.size(), 4u);
}

TEST(PortInbox, FlushWakesForWhatWaitsAndOnlyThen) {
  woken_inbox w;
  w.inbox->flush();
  EXPECT_EQ(w.wakes.load(), 0) << "nothing waits";
  w.inbox->push(completion(1), 16);
  EXPECT_EQ(w.wakes.load(), 0);
  w.inbox->flush();
  EXPECT_EQ(w.wakes.load(), 1);
  w.inbox->flush();
  EXPECT_EQ(w.wakes.load(), 1) << "not twice for one batch";
}

TEST(DeferredCompletions, TheLastCompletionWakesForEveryOneBeforeIt) {
  woken_inbox w;
  deferred_completions c(w.inbox, 16);
  for (int i = 0; i < 3; ++i) c.issued();
  c.completed(completion(1));
  c.completed(completion(2));
  EXPECT_EQ(w.wakes.load(), 0) << "deferred: two of a batch of 16";
  c.completed(completion(3));
  EXPECT_EQ(w.wakes.load(), 1) << "nothing left in flight: the burst is over";
  std::vector<port_event> got;
  w.inbox->take(got);
  EXPECT_EQ(got.size(), 3u);
}

TEST(DeferredCompletions, AFailureWakesAtOnce) {
  woken_inbox w;
  deferred_completions c(w.inbox, 16);
  for (int i = 0; i < 3; ++i) c.issued();
  c.completed(completion(1, 14));
  EXPECT_EQ(w.wakes.load(), 1);
}

// Every interleaving of three calls' two steps (each call arrives before it departs, as
// completed() does): at the end the actor was woken, once, and gets all three. Deciding "the
// last one" before pushing, as the port once did, lost the wake-up in one of these orders.
TEST(DeferredCompletions, EveryInterleavingOfABurstEndsWithOneWakeUpForAllOfIt) {
  std::vector<int> steps{0, 0, 1, 1, 2, 2};  // call i appears twice: arrive, then depart
  size_t orders = 0;
  do {
    woken_inbox w;
    deferred_completions c(w.inbox, 16);
    for (int i = 0; i < 3; ++i) c.issued();
    int seen[3] = {0, 0, 0};
    for (int call : steps) {
      if (seen[call]++ == 0)
        c.arrive(completion(static_cast<uint64_t>(call)));
      else
        c.depart();
    }
    ASSERT_EQ(w.wakes.load(), 1) << "order " << orders;
    std::vector<port_event> got;
    w.inbox->take(got);
    ASSERT_EQ(got.size(), 3u) << "order " << orders;
    ++orders;
  } while (std::next_permutation(steps.begin(), steps.end()));
  EXPECT_EQ(orders, 90u);
}

}  // namespace
}  // namespace kvrelay::emitter
