// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Which targets DNS fan-out names give, driven directly (actors/emitter/target_membership.hpp,
// TM1-TM7): answers and clock in, actions out; no resolver, no actor, no sleep.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "actors/emitter/target_membership.hpp"

namespace kvrelay::emitter {
namespace {

using tm_t = target_membership;
using kind = tm_t::action::kind;

// The actions as short words: "resolve 0", "later 1 400", "add a:1", "drop a:1", "changed",
// "failed 0".
std::vector<std::string> words(const tm_t::actions& acts) {
  std::vector<std::string> out;
  for (const auto& a : acts) {
    switch (a.what) {
      case kind::resolve: out.push_back("resolve " + std::to_string(a.name_index)); break;
      case kind::resolve_later:
        out.push_back("later " + std::to_string(a.name_index) + " " + std::to_string(a.wait_ms));
        break;
      case kind::resolve_failed: out.push_back("failed " + std::to_string(a.name_index)); break;
      case kind::add_target: out.push_back("add " + a.target); break;
      case kind::drop_target: out.push_back("drop " + a.target); break;
      case kind::targets_changed: out.push_back("changed"); break;
    }
  }
  return out;
}

using W = std::vector<std::string>;

tm_t::actions take(tm_t::actions& acts) { return std::exchange(acts, {}); }

TEST(TargetMembership, TM1EveryNameIsResolvedAtStartAndEveryInterval) {
  tm_t m({"static:1"}, {"dns:///a:1", "dns:///b:1"});
  tm_t::actions acts;
  m.start(0, acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0", "resolve 1"}));
  m.on_resolved(0, {"10.0.0.1:1"}, "", acts);
  take(acts);
  m.on_interval(30000, acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0"})) << "name 1 is still being resolved (TM2)";
}

TEST(TargetMembership, TM2OneResolveAtATimePerName) {
  tm_t m({}, {"dns:///a:1"});
  tm_t::actions acts;
  m.start(0, acts);
  take(acts);
  EXPECT_TRUE(m.resolving(0));
  m.on_interval(30000, acts);
  EXPECT_TRUE(acts.empty());
  m.on_resolved(0, {}, "timeout", acts);
  EXPECT_FALSE(m.resolving(0));
  take(acts);
  m.on_interval(60000, acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0"}));
}

TEST(TargetMembership, TM3ALostLinkResolvesItsNamesAtMostOncePerSecond) {
  tm_t m({"static:1"}, {"dns:///a:1", "dns:///b:1"}, 1000);
  tm_t::actions acts;
  m.start(0, acts);
  m.on_resolved(0, {"10.0.0.1:1"}, "", acts);
  m.on_resolved(1, {"10.0.0.1:1", "10.0.0.2:1"}, "", acts);
  take(acts);
  // 10.0.0.1 is named by both: both are asked again, each after its own last start.
  m.on_link_lost("10.0.0.1:1", 400, acts);
  EXPECT_EQ(words(take(acts)), (W{"later 0 600", "later 1 600"}));
  m.on_link_lost("10.0.0.1:1", 500, acts);
  EXPECT_TRUE(acts.empty()) << "a deferred resolve is not deferred again";
  m.on_deferred_due(0, 1000, acts);
  m.on_deferred_due(1, 1000, acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0", "resolve 1"}));
  m.on_resolved(0, {"10.0.0.1:1"}, "", acts);
  m.on_resolved(1, {"10.0.0.1:1", "10.0.0.2:1"}, "", acts);
  take(acts);
  m.on_link_lost("10.0.0.2:1", 2500, acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 1"})) << "a second after the last start: at once";
  m.on_link_lost("static:1", 2600, acts);
  EXPECT_TRUE(acts.empty()) << "a static target has no name to resolve";
  m.on_link_lost("unknown:1", 2600, acts);
  EXPECT_TRUE(acts.empty());
}

TEST(TargetMembership, TM4AFailedResolveKeepsTheLastGoodSet) {
  tm_t m({}, {"dns:///a:1"});
  tm_t::actions acts;
  m.start(0, acts);
  m.on_resolved(0, {"10.0.0.1:1", "10.0.0.2:1"}, "", acts);
  take(acts);
  m.on_interval(30000, acts);
  m.on_resolved(0, {}, "NXDOMAIN", acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0", "failed 0"}));
  m.on_interval(60000, acts);
  m.on_resolved(0, {}, "", acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0", "failed 0"})) << "no address is a failure too";
  EXPECT_EQ(m.targets(), (W{"10.0.0.1:1", "10.0.0.2:1"}));
}

TEST(TargetMembership, TM5AnAddressNoNameGivesIsDroppedButNeverAStaticOne) {
  tm_t m({"10.0.0.9:1"}, {"dns:///a:1", "dns:///b:1"});
  tm_t::actions acts;
  m.start(0, acts);
  m.on_resolved(0, {"10.0.0.1:1", "10.0.0.2:1", "10.0.0.9:1"}, "", acts);
  m.on_resolved(1, {"10.0.0.2:1"}, "", acts);
  take(acts);
  m.on_interval(30000, acts);
  m.on_resolved(0, {"10.0.0.3:1"}, "", acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0", "resolve 1", "drop 10.0.0.1:1", "add 10.0.0.3:1",
                                  "changed"}))
      << "10.0.0.2 is still b's; 10.0.0.9 is static";
  EXPECT_EQ(m.targets(), (W{"10.0.0.2:1", "10.0.0.3:1", "10.0.0.9:1"}));
  m.on_resolved(1, {"10.0.0.3:1"}, "", acts);
  EXPECT_EQ(words(take(acts)), (W{"drop 10.0.0.2:1", "changed"}));
}

TEST(TargetMembership, TM6ANewAddressIsAddedOnceWhoeverNamesIt) {
  tm_t m({"10.0.0.9:1"}, {"dns:///a:1", "dns:///b:1"});
  tm_t::actions acts;
  m.start(0, acts);
  take(acts);
  m.on_resolved(0, {"10.0.0.2:1", "10.0.0.1:1", "10.0.0.1:1", "10.0.0.9:1"}, "", acts);
  EXPECT_EQ(words(take(acts)), (W{"add 10.0.0.1:1", "add 10.0.0.2:1", "changed"}))
      << "sorted, the duplicate gone, the static one not added again";
  EXPECT_EQ(m.addresses(0), (W{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.9:1"}));
  m.on_resolved(1, {"10.0.0.1:1"}, "", acts);
  EXPECT_TRUE(acts.empty()) << "b only joins 10.0.0.1's sources";
  // a leaves 10.0.0.1: b still names it, nothing is dropped.
  m.on_interval(30000, acts);
  take(acts);
  m.on_resolved(0, {"10.0.0.2:1"}, "", acts);
  EXPECT_TRUE(acts.empty());
  EXPECT_EQ(m.targets(), (W{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.9:1"}));
}

TEST(TargetMembership, TM6ATargetWhoseLinkCouldNotBeMadeIsTriedAgainOnTheNextAnswer) {
  tm_t m({}, {"dns:///a:1"});
  tm_t::actions acts;
  m.start(0, acts);
  m.on_resolved(0, {"10.0.0.1:1"}, "", acts);
  take(acts);
  m.on_add_failed("10.0.0.1:1");
  EXPECT_TRUE(m.targets().empty());
  m.on_interval(30000, acts);
  m.on_resolved(0, {"10.0.0.1:1"}, "", acts);
  EXPECT_EQ(words(take(acts)), (W{"resolve 0", "add 10.0.0.1:1", "changed"}));
}

TEST(TargetMembership, TM7TheSameSetAgainChangesNothing) {
  tm_t m({}, {"dns:///a:1"});
  tm_t::actions acts;
  m.start(0, acts);
  m.on_resolved(0, {"10.0.0.2:1", "10.0.0.1:1"}, "", acts);
  take(acts);
  m.on_interval(30000, acts);
  take(acts);
  m.on_resolved(0, {"10.0.0.1:1", "10.0.0.2:1", "10.0.0.2:1"}, "", acts);
  EXPECT_TRUE(acts.empty()) << words(acts).size();
  m.on_resolved(7, {"10.0.0.3:1"}, "", acts);
  EXPECT_TRUE(acts.empty()) << "an answer for no name is ignored";
}

}  // namespace
}  // namespace kvrelay::emitter
