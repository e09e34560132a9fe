// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// A pipeline's health and readiness, driven directly (supervision/pipeline_health.hpp, PH1-PH6):
// facts in, answers out, no actors.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "supervision/pipeline_health.hpp"

namespace kvrelay {
namespace {

using ctx = pipeline_health::context;

TEST(PipelineHealth, PH1ReadyNeedsAStartedIndexAndAnAcknowledgingServer) {
  pipeline_health h;
  EXPECT_FALSE(h.ready({}));
  h.on_fact(health_fact::server_ok);
  EXPECT_FALSE(h.ready({})) << "no batch decoded, no catch-up finished";
  h.on_fact(health_fact::batch_decoded);
  EXPECT_TRUE(h.ready({}));
  h.on_fact(health_fact::server_failed);
  EXPECT_FALSE(h.ready({})) << "the server failed its last call";
  h.on_fact(health_fact::server_ok);
  EXPECT_TRUE(h.ready({}));

  pipeline_health caught_up;  // a catch-up that decoded nothing starts the index too
  caught_up.on_fact(health_fact::catchup_done);
  caught_up.on_fact(health_fact::server_ok);
  EXPECT_TRUE(caught_up.ready({}));
}

TEST(PipelineHealth, PH1RestartPolicyAndOverloadMakeItUnready) {
  pipeline_health h;
  h.on_fact(health_fact::batch_decoded);
  h.on_fact(health_fact::server_ok);
  ctx unhealthy;
  unhealthy.unhealthy = true;
  EXPECT_FALSE(h.ready(unhealthy));
  ctx overloaded;
  overloaded.overloaded = true;
  EXPECT_FALSE(h.ready(overloaded));
}

TEST(PipelineHealth, PH2EachCauseIsOneLineInOrder) {
  pipeline_health h;
  ctx all;
  all.unhealthy = true;
  all.overloaded = true;
  const auto lines = h.not_ready_reasons(all);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("no batch decoded"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("policy server has not acknowledged"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("intensity limit"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("overloaded"), std::string::npos) << lines[3];
  h.on_fact(health_fact::batch_decoded);
  h.on_fact(health_fact::server_ok);
  EXPECT_TRUE(h.not_ready_reasons({}).empty());
}

TEST(PipelineHealth, PH3TheLastFactAboutTheIndexIsItsState) {
  pipeline_health h;
  EXPECT_FALSE(h.incomplete());
  EXPECT_STREQ(h.index_incomplete(), "");
  const struct {
    health_fact f;
    const char* says;  // "" = complete
  } steps[] = {
      {health_fact::history_skipped, "since start"},
      {health_fact::history_complete, ""},
      {health_fact::history_lost, "history was lost"},
      {health_fact::engine_cleared, ""},
      {health_fact::removal_lost, "BlockRemoved"},
      {health_fact::index_over_budget, "memory budget"},
      {health_fact::engine_asleep, ""},
  };
  for (const auto& s : steps) {
    h.on_fact(s.f);
    const std::string now = h.index_incomplete();
    if (*s.says == '\0')
      EXPECT_FALSE(h.incomplete()) << static_cast<int>(s.f) << ": " << now;
    else
      EXPECT_NE(now.find(s.says), std::string::npos) << now;
  }
  EXPECT_TRUE(h.engine_asleep());
  h.on_fact(health_fact::engine_awake);
  EXPECT_FALSE(h.engine_asleep());
}

TEST(PipelineHealth, PH4AnIncompleteIndexIsDegradedNotUnready) {
  pipeline_health h;
  h.on_fact(health_fact::batch_decoded);
  h.on_fact(health_fact::server_ok);
  h.on_fact(health_fact::history_lost);
  ctx c;
  c.durable_line = "durable index snapshot discarded: ring_moved_on";
  EXPECT_TRUE(h.ready(c));
  const auto lines = h.not_ready_reasons(c);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("degraded (still ready): ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1], c.durable_line);
  h.on_fact(health_fact::engine_cleared);
  EXPECT_TRUE(h.not_ready_reasons(c).empty())
      << "the durable line is said only while the index is incomplete";
}

TEST(PipelineHealth, PH5AServerOnceReachedStaysReached) {
  pipeline_health h;
  EXPECT_FALSE(h.server_ever_ok());
  h.on_fact(health_fact::server_failed);
  EXPECT_FALSE(h.server_ever_ok());
  h.on_fact(health_fact::server_ok);
  h.on_fact(health_fact::server_failed);
  EXPECT_FALSE(h.server_ok());
  EXPECT_TRUE(h.server_ever_ok());
}

TEST(PipelineHealth, PH6OnFactSaysWhenCompletenessChanged) {
  pipeline_health h;
  EXPECT_FALSE(h.on_fact(health_fact::batch_decoded));
  EXPECT_TRUE(h.on_fact(health_fact::history_skipped));
  EXPECT_FALSE(h.on_fact(health_fact::history_skipped)) << "the same line again: no change";
  EXPECT_TRUE(h.on_fact(health_fact::history_lost)) << "another reason is a change";
  EXPECT_FALSE(h.on_fact(health_fact::engine_connected));
  EXPECT_TRUE(h.on_fact(health_fact::engine_cleared));
  EXPECT_FALSE(h.on_fact(health_fact::history_complete)) << "already complete";
}

TEST(PipelineHealth, ConnectionFollowsTheLastFact) {
  pipeline_health h;
  EXPECT_FALSE(h.engine_connected());
  h.on_fact(health_fact::engine_connected);
  EXPECT_TRUE(h.engine_connected());
  h.on_fact(health_fact::engine_disconnected);
  EXPECT_FALSE(h.engine_connected());
}

}  // namespace
}  // namespace kvrelay
