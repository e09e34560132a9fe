// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter's protocol driven directly: ordering (UQ1-UQ4), failures (UQ5, UQ6 = U3), answers
// (UQ7), stats (UQ8), reconnects (UQ9), rate-limited logs (UQ10) and the deadline back-off (UQ11).
#include "actors/emitter/unit_sequencer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

namespace kvrelay::emitter {
namespace {

using kind = emit_action::kind;

emit_unit_ptr make_unit(uint64_t id, bool clear, size_t adds, size_t evicts,
                        size_t downgrades = 0) {
  auto u = std::make_shared<emit_unit>();
  u->id = id;
  u->clear = clear;
  u->clear_ts_us = 5;
  u->adds_ts_us = 1000 + static_cast<int64_t>(id);
  for (size_t i = 0; i < adds; ++i) u->adds.push_back({100 + i, 16, tier::t1, ""});
  if (downgrades > 0) {
    u->downgrades.emplace_back();
    u->downgrades.back().ts_us = 7;
    for (size_t i = 0; i < downgrades; ++i)
      u->downgrades.back().entries.push_back({300 + i, 16, tier::t2, ""});
  }
  for (size_t i = 0; i < evicts; ++i) u->evicts.push_back({200 + i, "", 9});
  return u;
}

/// Drives a sequencer and keeps every action it returned.
struct driver {
  explicit driver(sequencer_options o = {}) : seq(o) {}

  emit_actions unit(uint64_t ticket, emit_unit_ptr u) {
    emit_actions out;
    seq.on_unit(ticket, std::move(u), out);
    return out;
  }
  emit_actions complete(uint64_t call, int code = 0, int64_t now_ms = 0,
                        int64_t latency_us = 0) {
    emit_actions out;
    last_info =
        seq.on_completed(call, code, code == 0 ? "" : "boom", true, now_ms, out, latency_us);
    return out;
  }
  emit_actions stats(uint64_t ticket) {
    emit_actions out;
    seq.on_stats(ticket, out);
    return out;
  }
  emit_actions channel(channel_state s) {
    emit_actions out;
    seq.on_channel(s, out);
    return out;
  }

  unit_sequencer seq;
  completion_info last_info;
};

std::vector<emit_action> only(const emit_actions& a, kind k) {
  std::vector<emit_action> out;
  std::copy_if(a.begin(), a.end(), std::back_inserter(out),
               [k](const emit_action& x) { return x.what == k; });
  return out;
}

sequencer_options rpc_mode(size_t cap = 4) {
  sequencer_options o;
  o.mode = eviction_mode::rpc;
  o.max_evictions_in_flight = cap;
  return o;
}

TEST(UnitSequencer, AddsOnlyUnitIsOneStreamThenOneAnswer) {
  driver d;
  auto a = d.unit(1, make_unit(11, false, 3, 0));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::start_stream);
  EXPECT_EQ(a[0].unit->id, 11u);
  a = d.complete(a[0].call);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::answer_unit);
  EXPECT_EQ(a[0].ticket, 1u);
  EXPECT_EQ(a[0].result.id, 11u);
  EXPECT_TRUE(a[0].result.ok);
  EXPECT_TRUE(a[0].result.sent);
  EXPECT_TRUE(d.last_info.known);
  EXPECT_EQ(d.last_info.kind, call_kind::stream);
  EXPECT_EQ(d.last_info.adds_ts_us, 1011) << "the adds' batch time, for the event age";
}

TEST(UnitSequencer, EmptyUnitIsAnsweredAtOnce) {
  driver d;
  auto a = d.unit(3, make_unit(1, false, 0, 0));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::answer_unit);
  EXPECT_TRUE(a[0].result.ok);
}

TEST(UnitSequencer, NullUnitIsStillAnswered) {
  driver d;
  auto a = d.unit(4, nullptr);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::answer_unit);
  EXPECT_EQ(a[0].ticket, 4u);
  EXPECT_FALSE(a[0].result.ok);
  EXPECT_FALSE(a[0].result.sent);
}

// U1: clear, then adds and downgrades, then evictions; a unit finished before the next.
TEST(UnitSequencer, ClearGoesAloneAndTheStreamWaitsForIt) {
  driver d;
  auto a = d.unit(1, make_unit(1, true, 2, 2));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::start_clear);
  EXPECT_EQ(a[0].unit->clear_ts_us, 5);
  a = d.complete(a[0].call);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::start_stream);
  EXPECT_TRUE(a[0].with_expirations) << "expire mode: the evictions ride in the stream";
  a = d.complete(a[0].call);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].result.ok);
}

// U2: in expire mode evictions are entries of the unit's stream, no PublishEvent.
TEST(UnitSequencer, ExpireModeUnitOfEvictionsOnlyIsOneStreamAndNoPublish) {
  driver d;
  auto a = d.unit(1, make_unit(1, false, 0, 50));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::start_stream);
  EXPECT_TRUE(a[0].with_expirations);
  a = d.complete(a[0].call);
  EXPECT_TRUE(only(a, kind::start_evict).empty());
  ASSERT_EQ(only(a, kind::answer_unit).size(), 1u);
  EXPECT_EQ(d.last_info.adds_ts_us, 0) << "no adds: no event age";
}

TEST(UnitSequencer, DowngradesAloneStillOpenAStream) {
  driver d(rpc_mode());
  auto a = d.unit(1, make_unit(1, false, 0, 0, 3));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::start_stream);
  EXPECT_FALSE(a[0].with_expirations);
}

TEST(UnitSequencer, ClearFailureAbandonsTheUnit) {
  driver d;
  auto a = d.unit(1, make_unit(1, true, 5, 5));
  ASSERT_EQ(a[0].what, kind::start_clear);
  a = d.complete(a[0].call, 14);
  EXPECT_TRUE(only(a, kind::start_stream).empty()) << "nothing after a failed clear";
  auto answers = only(a, kind::answer_unit);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].result.ok);
  EXPECT_TRUE(answers[0].result.sent);
  EXPECT_EQ(answers[0].result.failed_rpcs, 1u);
  EXPECT_NE(answers[0].result.last_error.find("UNAVAILABLE"), std::string::npos);
  EXPECT_TRUE(d.seq.holding_back());
}

TEST(UnitSequencer, AfterAFailureQueuedUnitsFailUnsentUntilAClearLedUnit) {
  driver d(rpc_mode(2));
  auto first = d.unit(1, make_unit(1, false, 2, 5));
  ASSERT_EQ(first.size(), 3u) << "the stream and the first two evictions right behind it";
  EXPECT_EQ(first[0].what, kind::start_stream);
  // Queued behind the head: nothing starts for them yet (UQ1).
  EXPECT_TRUE(d.unit(2, make_unit(2, false, 2, 0)).empty());
  EXPECT_TRUE(d.unit(3, make_unit(3, false, 0, 4)).empty());
  auto a = d.complete(first[0].call, 14);  // UNAVAILABLE (a timeout would also move UQ11)
  EXPECT_TRUE(a.empty() || only(a, kind::start_evict).empty()) << "nothing more of it (UQ5)";
  EXPECT_TRUE(only(a, kind::answer_unit).empty()) << "its evictions in flight are awaited";
  d.complete(first[1].call);
  a = d.complete(first[2].call);
  EXPECT_TRUE(only(a, kind::start_evict).empty()) << "the three left are never sent";
  auto answers = only(a, kind::answer_unit);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].ticket, 1u);
  EXPECT_TRUE(answers[0].result.sent);
  EXPECT_FALSE(answers[0].result.ok);
  for (int i : {1, 2}) {
    EXPECT_FALSE(answers[i].result.ok);
    EXPECT_FALSE(answers[i].result.sent) << "failed without anything on the wire (U3)";
    EXPECT_EQ(answers[i].result.failed_rpcs, 0u);
  }
  EXPECT_EQ(answers[1].ticket, 2u);
  EXPECT_EQ(answers[2].ticket, 3u);
  // Arriving later, still no clear: still failed unsent, at once.
  a = d.unit(4, make_unit(4, false, 1, 0));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::answer_unit);
  EXPECT_FALSE(a[0].result.sent);
  // The resync's clear-led unit runs normally, and everything after it again.
  a = d.unit(5, make_unit(5, true, 1, 0));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::start_clear);
  EXPECT_FALSE(d.seq.holding_back());
  a = d.complete(a[0].call);
  a = d.complete(a[0].call);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].result.ok);
  a = d.unit(6, make_unit(6, false, 1, 0));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::start_stream);
  EXPECT_EQ(d.seq.counters().units_unsent, 3u);
}

TEST(UnitSequencer, AFailedResyncClearHoldsBackAgain) {
  driver d;
  auto a = d.unit(1, make_unit(1, false, 1, 0));
  d.complete(a[0].call, 14);
  a = d.unit(2, make_unit(2, true, 1, 0));
  ASSERT_EQ(a[0].what, kind::start_clear);
  d.unit(3, make_unit(3, false, 1, 0));
  a = d.complete(a[0].call, 14);
  auto answers = only(a, kind::answer_unit);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_TRUE(answers[0].result.sent);
  EXPECT_FALSE(answers[1].result.sent);
  EXPECT_TRUE(only(a, kind::start_stream).empty());
}

// U2: in rpc mode one PublishEvent per eviction, after the unit's updates.
TEST(UnitSequencer, RpcEvictionsFollowTheStreamUpToTheCap) {
  driver d(rpc_mode(4));
  auto a = d.unit(1, make_unit(1, false, 2, 10));
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(a[0].what, kind::start_stream) << "the stream is issued first (U2)";
  EXPECT_FALSE(a[0].with_expirations);
  const uint64_t stream = a[0].call;
  auto ev = only(a, kind::start_evict);
  ASSERT_EQ(ev.size(), 4u) << "the cap";
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(ev[i].index, i);
  EXPECT_EQ(d.seq.calls_in_flight(), 5u);
  // Completions in any order: each frees a slot for the next eviction.
  std::vector<uint64_t> live{ev[0].call, ev[1].call, ev[2].call, ev[3].call};
  std::vector<size_t> issued{0, 1, 2, 3};
  size_t answered = 0;
  while (!live.empty()) {
    const uint64_t c = live.back();  // newest first
    live.pop_back();
    a = d.complete(c);
    EXPECT_EQ(d.last_info.kind, call_kind::evict);
    for (auto& e : only(a, kind::start_evict)) {
      live.insert(live.begin(), e.call);
      issued.push_back(e.index);
    }
    EXPECT_LE(d.seq.calls_in_flight(), 5u) << "4 evictions and the stream";
    answered += only(a, kind::answer_unit).size();
  }
  EXPECT_EQ(answered, 0u) << "the stream is still in flight";
  a = d.complete(stream);
  EXPECT_EQ(only(a, kind::answer_unit).size(), 1u);
  std::sort(issued.begin(), issued.end());
  ASSERT_EQ(issued.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(issued[i], i) << "each eviction exactly once";
}

TEST(UnitSequencer, RpcEvictionFailureStopsIssuingAndAwaitsThoseInFlight) {
  driver d(rpc_mode(3));
  auto a = d.unit(1, make_unit(1, false, 0, 20));
  auto ev = only(a, kind::start_evict);
  ASSERT_EQ(ev.size(), 3u) << "no stream: evictions at once";
  a = d.complete(ev[1].call, 14);
  EXPECT_TRUE(a.empty() || only(a, kind::start_evict).empty()) << "UQ5: nothing more issued";
  EXPECT_TRUE(only(a, kind::answer_unit).empty()) << "two still in flight";
  a = d.complete(ev[0].call);
  EXPECT_TRUE(only(a, kind::answer_unit).empty());
  a = d.complete(ev[2].call);
  auto answers = only(a, kind::answer_unit);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].result.ok);
  EXPECT_EQ(answers[0].result.failed_rpcs, 1u);
}

// U5: the restores go once every eviction of the unit completed.
TEST(UnitSequencer, UQ12_RestoresGoAfterEveryEvictionCompletedAsAStreamOfTheirOwn) {
  driver d(rpc_mode(2));
  auto u = std::const_pointer_cast<emit_unit>(make_unit(11, false, 1, 3));
  u->restores.push_back({200, 32, tier::t2, "sql"});
  u->restores_ts_us = 77;
  auto a = d.unit(1, u);
  ASSERT_EQ(only(a, kind::start_stream).size(), 1u);
  auto evicts = only(a, kind::start_evict);
  ASSERT_EQ(evicts.size(), 2u);
  const uint64_t stream = only(a, kind::start_stream)[0].call;
  EXPECT_TRUE(d.complete(stream).empty());
  a = d.complete(evicts[0].call);
  ASSERT_EQ(only(a, kind::start_evict).size(), 1u) << "the third eviction";
  const uint64_t third = only(a, kind::start_evict)[0].call;
  a = d.complete(evicts[1].call);
  EXPECT_TRUE(only(a, kind::start_stream).empty()) << "an eviction is still in flight";
  a = d.complete(third);
  auto restore = only(a, kind::start_stream);
  ASSERT_EQ(restore.size(), 1u) << "the restores once the last eviction completed";
  EXPECT_FALSE(restore[0].with_expirations);
  ASSERT_EQ(restore[0].unit->adds.size(), 1u);
  EXPECT_EQ(restore[0].unit->adds[0].adapter, "sql");
  EXPECT_EQ(restore[0].unit->adds[0].t, tier::t2);
  EXPECT_EQ(restore[0].unit->adds_ts_us, 77);
  EXPECT_TRUE(restore[0].unit->evicts.empty());
  EXPECT_TRUE(only(a, kind::answer_unit).empty()) << "answered after the restores";
  a = d.complete(restore[0].call);
  EXPECT_EQ(d.last_info.kind, call_kind::restore);
  EXPECT_EQ(d.last_info.adds_ts_us, 0) << "a restore is no new add: not an event age";
  ASSERT_EQ(only(a, kind::answer_unit).size(), 1u);
  EXPECT_TRUE(only(a, kind::answer_unit)[0].result.ok);
}

TEST(UnitSequencer, UQ12_AFailedEvictionSkipsTheRestoresAndAFailedRestoreFailsTheUnit) {
  driver d(rpc_mode(4));
  auto u = std::const_pointer_cast<emit_unit>(make_unit(11, false, 0, 1));
  u->restores.push_back({200, 16, tier::t1, "sql"});
  auto a = d.unit(1, u);
  auto ev = only(a, kind::start_evict);
  ASSERT_EQ(ev.size(), 1u);
  a = d.complete(ev[0].call, 14);
  EXPECT_TRUE(only(a, kind::start_stream).empty());
  ASSERT_EQ(only(a, kind::answer_unit).size(), 1u);
  EXPECT_FALSE(only(a, kind::answer_unit)[0].result.ok);

  driver e(rpc_mode(4));
  a = e.unit(2, u);
  a = e.complete(only(a, kind::start_evict)[0].call);
  auto restore = only(a, kind::start_stream);
  ASSERT_EQ(restore.size(), 1u);
  a = e.complete(restore[0].call, 14);
  ASSERT_EQ(only(a, kind::answer_unit).size(), 1u);
  EXPECT_FALSE(only(a, kind::answer_unit)[0].result.ok);
  EXPECT_TRUE(e.seq.holding_back()) << "UQ6 as for any failed unit: the resync repairs it";
}

TEST(UnitSequencer, UQ12_ExpireModeNeverSendsRestores) {
  driver d;
  auto u = std::const_pointer_cast<emit_unit>(make_unit(11, false, 0, 1));
  u->restores.push_back({200, 16, tier::t1, "sql"});
  auto a = d.unit(1, u);
  auto st = only(a, kind::start_stream);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_TRUE(st[0].with_expirations);
  a = d.complete(st[0].call);
  EXPECT_TRUE(only(a, kind::start_stream).empty());
  EXPECT_EQ(only(a, kind::answer_unit).size(), 1u);
}

TEST(UnitSequencer, NextUnitStartsOnlyWhenTheHeadIsAnswered) {
  driver d(rpc_mode(2));
  auto a = d.unit(1, make_unit(1, false, 1, 2));
  EXPECT_TRUE(d.unit(2, make_unit(2, true, 1, 0)).empty());
  auto ev = only(a, kind::start_evict);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(d.complete(a[0].call).empty()) << "the stream done, two evictions still out";
  a = d.complete(ev[0].call);
  EXPECT_TRUE(a.empty()) << "unit 2's clear waits for unit 1's last eviction";
  a = d.complete(ev[1].call);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].what, kind::answer_unit);
  EXPECT_EQ(a[0].ticket, 1u);
  EXPECT_EQ(a[1].what, kind::start_clear);
  EXPECT_EQ(a[1].unit->id, 2u);
}

TEST(UnitSequencer, StatsInterleaveWithUnitsAndAreNotHeldBack) {
  driver d;
  auto u = d.unit(1, make_unit(1, true, 1, 0));
  auto s1 = d.stats(100);
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].what, kind::start_stats);
  auto s2 = d.stats(101);
  // The stats answer in any order relative to the unit's calls.
  auto a = d.complete(s2[0].call);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::answer_stats);
  EXPECT_EQ(a[0].ticket, 101u);
  EXPECT_TRUE(a[0].ok);
  EXPECT_EQ(d.last_info.kind, call_kind::stats);
  a = d.complete(u[0].call, 14);  // the clear fails: UQ6
  a = d.complete(s1[0].call, 14);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].what, kind::log);
  EXPECT_EQ(a[0].log.message, "stats report failed");
  EXPECT_EQ(a[1].what, kind::answer_stats);
  EXPECT_FALSE(a[1].ok);
  auto s3 = d.stats(102);
  ASSERT_EQ(s3.size(), 1u) << "stats still go out while units are held back";
  EXPECT_EQ(s3[0].what, kind::start_stats);
}

TEST(UnitSequencer, StatsNotAcceptedIsAFailureForTheScraper) {
  driver d;
  auto s = d.stats(7);
  emit_actions out;
  d.seq.on_completed(s[0].call, 0, "", false, 0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].ok);
}

TEST(UnitSequencer, UnknownCompletionsAreIgnored) {
  driver d;
  auto a = d.unit(1, make_unit(1, false, 1, 0));
  auto stale = d.complete(a[0].call + 1000);
  EXPECT_TRUE(stale.empty());
  EXPECT_FALSE(d.last_info.known);
  a = d.complete(a[0].call);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].result.ok);
  EXPECT_TRUE(d.complete(a[0].call).empty()) << "a second completion of the same call";
}

TEST(UnitSequencer, FailureLogsAreRateLimitedWithCounts) {
  sequencer_options o = rpc_mode(64);
  o.log_period_ms = 1000;
  driver d(o);
  auto a = d.unit(1, make_unit(1, false, 0, 10));
  auto ev = only(a, kind::start_evict);
  ASSERT_EQ(ev.size(), 10u);
  size_t logs = 0;
  for (size_t i = 0; i < ev.size(); ++i) {
    a = d.complete(ev[i].call, 14, /*now_ms=*/100 + static_cast<int64_t>(i));
    for (auto& l : only(a, kind::log)) {
      ++logs;
      EXPECT_EQ(l.log.message, "publish event failed; dropping");
      EXPECT_EQ(*l.log.find("code"), "UNAVAILABLE");
      EXPECT_EQ(*l.log.find("suppressed"), "0") << "the first line of a burst";
    }
  }
  EXPECT_EQ(logs, 1u);
  // The next period's first line says how many were held back.
  a = d.unit(2, make_unit(2, true, 0, 0));
  a = d.complete(a[0].call, 14, 5000);
  auto l = only(a, kind::log);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(*l[0].log.find("suppressed"), "9");
  // Report failures have their own budget.
  a = d.unit(3, make_unit(3, true, 1, 0));
  a = d.complete(a[0].call, 0, 5001);
  a = d.complete(a[0].call, 14, 5002);
  l = only(a, kind::log);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].log.message, "report send failed; dropping batch");
}

TEST(UnitSequencer, ReconnectIsReadyAfterALoss) {
  driver d;
  EXPECT_TRUE(d.channel(channel_state::connecting).empty());
  EXPECT_TRUE(d.channel(channel_state::transient_failure).empty()) << "never ready yet";
  EXPECT_TRUE(d.channel(channel_state::ready).empty()) << "the first READY is no reconnect";
  EXPECT_TRUE(d.channel(channel_state::transient_failure).empty());
  EXPECT_TRUE(d.channel(channel_state::connecting).empty());
  auto a = d.channel(channel_state::ready);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].what, kind::reconnected);
  // IDLE after READY (a GOAWAY, a keepalive failure) is a loss too.
  EXPECT_TRUE(d.channel(channel_state::idle).empty());
  EXPECT_TRUE(d.channel(channel_state::connecting).empty());
  EXPECT_EQ(d.channel(channel_state::ready).size(), 1u);
  // READY → CONNECTING can only be seen when the state between them was missed: a loss.
  EXPECT_TRUE(d.channel(channel_state::connecting).empty());
  EXPECT_EQ(d.channel(channel_state::ready).size(), 1u);
  // READY reported twice without a loss between: nothing.
  EXPECT_TRUE(d.channel(channel_state::ready).empty());
  EXPECT_EQ(d.seq.counters().reconnects, 3u);
}

TEST(UnitSequencer, ASucceededCallProvesAReadyTheWatchMissed) {
  driver d;
  auto a = d.stats(1);
  ASSERT_EQ(only(a, kind::start_stats).size(), 1u);
  // The connection came and went before the watch looked: it reports IDLE, never READY.
  EXPECT_TRUE(d.channel(channel_state::idle).empty());
  d.complete(only(a, kind::start_stats)[0].call);
  EXPECT_TRUE(d.channel(channel_state::transient_failure).empty());
  a = d.channel(channel_state::ready);
  ASSERT_EQ(a.size(), 1u) << "the call answered, so the channel had been READY: a reconnect";
  EXPECT_EQ(a[0].what, kind::reconnected);
}

constexpr int deadline_exceeded = 4;  // grpc::StatusCode

size_t position(const emit_actions& a, kind k) {
  return static_cast<size_t>(
      std::find_if(a.begin(), a.end(), [k](const emit_action& x) { return x.what == k; }) -
      a.begin());
}

sequencer_options deadline_400ms(uint32_t max_scale = 4) {
  sequencer_options o;
  o.deadline_ms = 400;
  o.max_deadline_scale = max_scale;
  return o;
}

TEST(UnitSequencer, ATimedOutCallDoublesTheDeadlineOfTheCallsAfterItUpToTheCap) {
  driver d(deadline_400ms(4));
  EXPECT_EQ(d.seq.deadline_ms(), 400);
  auto a = d.unit(1, make_unit(1, false, 2, 0));
  const uint64_t stream = a[0].call;
  d.unit(2, make_unit(2, true, 2, 0));  // the resync the failure will call for, already queued
  a = d.complete(stream, deadline_exceeded, 0, 400'000);
  const auto set = only(a, kind::set_deadline);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set[0].deadline_ms, 800);
  EXPECT_EQ(d.seq.deadline_ms(), 800);
  ASSERT_LT(position(a, kind::set_deadline), a.size());
  ASSERT_LT(position(a, kind::start_clear), a.size()) << "unit 2 starts in the same step";
  EXPECT_LT(position(a, kind::set_deadline), position(a, kind::start_clear))
      << "the new deadline is set before the call it applies to starts";
  // The resync's clear times out too (a slow server): 1600 ms, which is the cap (4 x 400).
  a = d.complete(only(a, kind::start_clear)[0].call, deadline_exceeded, 0, 800'000);
  ASSERT_EQ(only(a, kind::set_deadline).size(), 1u);
  EXPECT_EQ(only(a, kind::set_deadline)[0].deadline_ms, 1600);
  a = d.unit(3, make_unit(3, true, 1, 0));
  a = d.complete(only(a, kind::start_clear)[0].call, deadline_exceeded, 0, 1'600'000);
  EXPECT_TRUE(only(a, kind::set_deadline).empty()) << "at the cap";
  EXPECT_EQ(d.seq.deadline_ms(), 1600);
  EXPECT_EQ(d.seq.counters().deadline_raised, 2u);
}

TEST(UnitSequencer, ASuccessUnderAQuarterOfTheDeadlineHalvesItBackToTheConfiguredOne) {
  driver d(deadline_400ms(4));
  auto a = d.unit(1, make_unit(1, false, 1, 0));
  a = d.complete(a[0].call, deadline_exceeded);
  a = d.unit(2, make_unit(2, true, 1, 0));
  a = d.complete(only(a, kind::start_clear)[0].call, deadline_exceeded);
  ASSERT_EQ(d.seq.deadline_ms(), 1600);
  a = d.unit(3, make_unit(3, true, 1, 0));
  // 500 ms of a 1600 ms deadline: the server is still slow; the deadline stays.
  a = d.complete(only(a, kind::start_clear)[0].call, 0, 0, 500'000);
  EXPECT_TRUE(only(a, kind::set_deadline).empty());
  ASSERT_EQ(only(a, kind::start_stream).size(), 1u);
  // 100 ms: under a quarter of 1600, then of 800.
  a = d.complete(only(a, kind::start_stream)[0].call, 0, 0, 100'000);
  ASSERT_EQ(only(a, kind::set_deadline).size(), 1u);
  EXPECT_EQ(only(a, kind::set_deadline)[0].deadline_ms, 800);
  a = d.unit(4, make_unit(4, false, 1, 0));
  a = d.complete(a[0].call, 0, 0, 100'000);
  ASSERT_EQ(only(a, kind::set_deadline).size(), 1u);
  EXPECT_EQ(only(a, kind::set_deadline)[0].deadline_ms, 400);
  a = d.unit(5, make_unit(5, false, 1, 0));
  a = d.complete(a[0].call, 0, 0, 1'000);
  EXPECT_TRUE(only(a, kind::set_deadline).empty()) << "never below the configured deadline";
  EXPECT_EQ(d.seq.deadline_ms(), 400);
}

TEST(UnitSequencer, TimeoutsOfCallsIssuedAtOneDeadlineDoubleItOnce) {
  auto o = rpc_mode(4);
  o.deadline_ms = 400;
  driver d(o);
  auto a = d.unit(1, make_unit(1, false, 0, 10));
  auto ev = only(a, kind::start_evict);
  ASSERT_EQ(ev.size(), 4u);
  auto st = d.stats(9);
  size_t sets = 0;
  for (const auto& e : ev) sets += only(d.complete(e.call, deadline_exceeded), kind::set_deadline).size();
  EXPECT_EQ(sets, 1u) << "four calls issued at 400 ms say one thing: 400 ms is too short";
  EXPECT_EQ(d.seq.deadline_ms(), 800);
  // The stats call was issued at 400 ms as well: its timeout says nothing new.
  EXPECT_TRUE(only(d.complete(st[0].call, deadline_exceeded), kind::set_deadline).empty());
  // A stats call issued at 800 ms that times out is heard (UQ11 covers every call).
  st = d.stats(10);
  a = d.complete(st[0].call, deadline_exceeded);
  ASSERT_EQ(only(a, kind::set_deadline).size(), 1u);
  EXPECT_EQ(only(a, kind::set_deadline)[0].deadline_ms, 1600);
}

TEST(UnitSequencer, OtherFailuresLeaveTheDeadlineAlone) {
  driver d(deadline_400ms());
  auto a = d.unit(1, make_unit(1, false, 1, 0));
  a = d.complete(a[0].call, 14);  // UNAVAILABLE: an outage, not a slow server
  EXPECT_TRUE(only(a, kind::set_deadline).empty());
  EXPECT_EQ(d.seq.deadline_ms(), 400);
}

}  // namespace
}  // namespace kvrelay::emitter
