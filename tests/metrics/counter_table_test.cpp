// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/counter_table.hpp"

#include <gtest/gtest.h>

#include <memory>

namespace kvrelay {
namespace {

struct toy_counters {
  uint64_t sent = 0;
  uint64_t failed = 0;
  uint64_t dropped = 0;
};

constexpr counter_row<toy_counters> toy_rows[] = {
    {"kvrelay_toy_sent_total", "Sent", nullptr, nullptr, &toy_counters::sent},
    {"kvrelay_toy_outcomes_total", "Outcomes", "outcome", "failed", &toy_counters::failed},
    {"kvrelay_toy_outcomes_total", "Outcomes", "outcome", "dropped", &toy_counters::dropped},
};

TEST(CounterTable, AtOnceMakesEverySeriesAtZeroWithTheTableLabelsThenTheRowLabel) {
  auto m = std::make_shared<metrics_registry>();
  counter_table<toy_counters> t(toy_rows, m, {{"replica", "r"}});
  EXPECT_EQ(m->value("kvrelay_toy_sent_total", {{"replica", "r"}}), 0);
  EXPECT_EQ(m->value("kvrelay_toy_outcomes_total", {{"replica", "r"}, {"outcome", "failed"}}), 0);
  EXPECT_EQ(m->value("kvrelay_toy_outcomes_total", {{"replica", "r"}, {"outcome", "dropped"}}),
            0);
  const std::string text = m->render();
  EXPECT_NE(text.find("# HELP kvrelay_toy_outcomes_total Outcomes\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kvrelay_toy_outcomes_total{replica=\"r\",outcome=\"failed\"} 0\n"),
            std::string::npos)
      << text;
}

TEST(CounterTable, PublishAddsEachFieldsGrowthSinceTheLastPublish) {
  auto m = std::make_shared<metrics_registry>();
  counter_table<toy_counters> t(toy_rows, m, {});
  toy_counters c;
  c.sent = 5;
  c.failed = 1;
  t.publish(c);
  c.sent = 7;
  t.publish(c);
  t.publish(c);  // nothing grew: nothing added
  EXPECT_EQ(m->value("kvrelay_toy_sent_total"), 7);
  EXPECT_EQ(m->value("kvrelay_toy_outcomes_total", {{"outcome", "failed"}}), 1);
  EXPECT_EQ(m->value("kvrelay_toy_outcomes_total", {{"outcome", "dropped"}}), 0);
  EXPECT_EQ(t.published().sent, 7u);
}

TEST(CounterTable, ACountThatWentBackIsTakenAsTheNewBaseNeverSubtracted) {
  auto m = std::make_shared<metrics_registry>();
  counter_table<toy_counters> t(toy_rows, m, {});
  toy_counters c;
  c.sent = 5;
  t.publish(c);
  c.sent = 2;  // a protocol restarted from zero
  t.publish(c);
  c.sent = 4;
  t.publish(c);
  EXPECT_EQ(m->value("kvrelay_toy_sent_total"), 7);
}

TEST(CounterTable, OnFirstCountMakesASeriesOnlyWhenItsFieldFirstGrows) {
  auto m = std::make_shared<metrics_registry>();
  using table = counter_table<toy_counters>;
  table t(toy_rows, m, {{"adapter", "a"}}, table::create::on_first_count);
  toy_counters c;
  t.publish(c);
  EXPECT_EQ(m->value("kvrelay_toy_sent_total", {{"adapter", "a"}}), -1) << "no series yet";
  c.dropped = 3;
  t.publish(c);
  EXPECT_EQ(m->value("kvrelay_toy_outcomes_total", {{"adapter", "a"}, {"outcome", "dropped"}}),
            3);
  EXPECT_EQ(m->value("kvrelay_toy_outcomes_total", {{"adapter", "a"}, {"outcome", "failed"}}), -1);
  EXPECT_EQ(m->value("kvrelay_toy_sent_total", {{"adapter", "a"}}), -1);
}

}  // namespace
}  // namespace kvrelay
