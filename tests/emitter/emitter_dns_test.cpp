// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// DNS fan-out in the emitter, with a fake `resolve` and fake ports on a real actor system (the
// resolver runs on a thread of its own): addresses that appear become links, addresses that
// vanish are dropped (their port destroyed), the listener hears every set, a failed resolve keeps
// the last good set, and a link that leaves READY makes its name resolve again before the
// interval. Waits are for what the emitter says (the listener, a counter), never a sleep.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/emitter/emitter_actor.hpp"
#include "messages/system_setup.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;
using strings = std::vector<std::string>;

const std::string name = "dns:///policy.ns.svc.cluster.local:9090";

// Which ports are alive, by target, and their inboxes (to play a channel's changes).
struct port_registry {
  std::mutex mu;
  std::map<std::string, int> alive;
  std::map<std::string, std::shared_ptr<emitter::port_inbox>> inboxes;

  int count(const std::string& t) {
    std::lock_guard<std::mutex> lk(mu);
    auto it = alive.find(t);
    return it == alive.end() ? 0 : it->second;
  }
  void channel(const std::string& t, emitter::channel_state s) {
    std::shared_ptr<emitter::port_inbox> in;
    {
      std::lock_guard<std::mutex> lk(mu);
      in = inboxes[t];
    }
    ASSERT_TRUE(in) << t;
    emitter::port_event e;
    e.what = emitter::port_event::kind::channel;
    e.state = s;
    in->push(std::move(e));
  }
};

// A port that makes no calls (these tests send no units); it only tells the registry it lives.
class quiet_port final : public emitter::policy_port {
 public:
  quiet_port(std::shared_ptr<port_registry> r, std::string target,
             std::shared_ptr<emitter::port_inbox> inbox)
      : r_(std::move(r)), target_(std::move(target)) {
    std::lock_guard<std::mutex> lk(r_->mu);
    ++r_->alive[target_];
    r_->inboxes[target_] = std::move(inbox);
  }
  ~quiet_port() override {
    std::lock_guard<std::mutex> lk(r_->mu);
    if (--r_->alive[target_] == 0) {
      r_->alive.erase(target_);
      r_->inboxes.erase(target_);
    }
  }
  void clear(uint64_t, int64_t) override {}
  void stream(uint64_t, emit_unit_ptr, bool) override {}
  void evict(uint64_t, const prefix_evict&) override {}
  void stats(uint64_t, const stats_sample&, int64_t) override {}
  void set_deadline(int64_t) override {}
  void start() override {}
  size_t in_flight() const override { return 0; }

 private:
  std::shared_ptr<port_registry> r_;
  std::string target_;
};

// What the name resolves to; the test changes it between resolves.
struct fake_dns {
  std::mutex mu;
  std::condition_variable cv;
  strings addresses;
  std::string error;
  int calls = 0;

  void set(strings a, std::string err = "") {
    std::lock_guard<std::mutex> lk(mu);
    addresses = std::move(a);
    error = std::move(err);
  }
  resolve_result resolve(const std::string& spec) {
    std::lock_guard<std::mutex> lk(mu);
    ++calls;
    cv.notify_all();
    if (spec != name) return {{}, "unexpected name " + spec};
    return {addresses, error};
  }
};

struct fixture {
  explicit fixture(std::chrono::milliseconds interval) : sys(setup(cfg)), self(sys) {
    ctx.name = "dns-0";
    emitter_options o;
    o.targets = {name};
    o.resolve_interval = interval;
    o.resolve = [d = dns](const std::string& spec) { return d->resolve(spec); };
    o.make_port = [r = ports](const emitter::port_config& c,
                              std::shared_ptr<emitter::port_inbox> in, std::string&) {
      return std::make_unique<quiet_port>(r, c.client.target, std::move(in));
    };
    start_options = o;
  }
  ~fixture() {
    if (em) {
      self->send_exit(em, caf::exit_reason::user_shutdown);
      self->wait_for(em);
    }
  }
  static caf::actor_system_config& setup(caf::actor_system_config& c) {
    setup_actor_system(c);
    return c;
  }
  void start() {
    std::string err;
    em = spawn_emitter(sys, ctx, start_options, err);
    ASSERT_TRUE(em) << err;
    self->send(em, atom::update_v, caf::actor_cast<reconnect_listener_actor>(self));
  }
  // Waits until the listener hears `want` (sets heard on the way are kept in `heard`).
  bool hear(const strings& want, std::chrono::seconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      bool timed_out = false;
      self->receive([&](atom::targets, strings& s) { heard.push_back(std::move(s)); },
                    [&](atom::reconnected, std::string&) {},
                    caf::after(std::chrono::duration_cast<std::chrono::milliseconds>(
                        until - std::chrono::steady_clock::now())) >>
                        [&] { timed_out = true; });
      if (!heard.empty() && heard.back() == want) return true;
      if (timed_out) break;
    }
    return false;
  }
  double resolve_failures() const {
    return ctx.metrics->value("kvrelay_target_resolve_failures_total", {{"replica", "dns-0"}});
  }
  int64_t targets_in_status() {
    int64_t n = -1;
    self->request(em, 5s, atom::status_v)
        .receive([&](const actor_status& s) { n = s.integer("targets"); },
                 [](const caf::error&) {});
    return n;
  }

  std::shared_ptr<fake_dns> dns = std::make_shared<fake_dns>();
  std::shared_ptr<port_registry> ports = std::make_shared<port_registry>();
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  pipeline_context ctx;
  emitter_options start_options;
  emitter_actor em;
  std::vector<strings> heard;
};

TEST(EmitterDns, LinksFollowTheSetAcrossResolves) {
  fixture f(50ms);
  f.dns->set({"10.0.0.2:9090", "10.0.0.1:9090"});
  f.start();
  ASSERT_TRUE(f.hear({"10.0.0.1:9090", "10.0.0.2:9090"}));
  EXPECT_EQ(f.ports->count("10.0.0.1:9090"), 1);
  EXPECT_EQ(f.ports->count("10.0.0.2:9090"), 1);

  f.dns->set({"10.0.0.1:9090", "10.0.0.2:9090", "10.0.0.3:9090"});
  ASSERT_TRUE(f.hear({"10.0.0.1:9090", "10.0.0.2:9090", "10.0.0.3:9090"}));
  EXPECT_EQ(f.ports->count("10.0.0.3:9090"), 1) << "an address that appears becomes a link";
  EXPECT_EQ(f.ports->count("10.0.0.1:9090"), 1) << "the others are kept as they are";

  f.dns->set({"10.0.0.3:9090", "10.0.0.1:9090"});
  ASSERT_TRUE(f.hear({"10.0.0.1:9090", "10.0.0.3:9090"}));
  EXPECT_EQ(f.ports->count("10.0.0.2:9090"), 0) << "a vanished address' port is destroyed";
  EXPECT_EQ(f.targets_in_status(), 2);
  for (const auto& s : f.heard) EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
}

TEST(EmitterDns, AFailedResolveKeepsTheLastGoodSet) {
  fixture f(50ms);
  f.dns->set({"10.0.0.1:9090", "10.0.0.2:9090"});
  f.start();
  ASSERT_TRUE(f.hear({"10.0.0.1:9090", "10.0.0.2:9090"}));
  f.dns->set({}, "SERVFAIL");
  // Two failures counted: the emitter handled at least the first after it failed.
  for (int i = 0; i < 1000 && f.resolve_failures() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GE(f.resolve_failures(), 2);
  EXPECT_EQ(f.targets_in_status(), 2) << "the last good set is kept";
  EXPECT_EQ(f.ports->count("10.0.0.1:9090"), 1);
  EXPECT_EQ(f.ports->count("10.0.0.2:9090"), 1);
  // An answer with no address is no set either.
  const double before = f.resolve_failures();
  f.dns->set({});
  for (int i = 0; i < 1000 && f.resolve_failures() < before + 1; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(f.targets_in_status(), 2);
  // Resolving works again: the set moves on.
  f.dns->set({"10.0.0.2:9090"});
  ASSERT_TRUE(f.hear({"10.0.0.2:9090"}));
  EXPECT_EQ(f.ports->count("10.0.0.1:9090"), 0);
}

TEST(EmitterDns, ALostLinkResolvesItsNameBeforeTheInterval) {
  fixture f(std::chrono::hours(1));
  f.dns->set({"10.0.0.1:9090", "10.0.0.2:9090"});
  f.start();
  ASSERT_TRUE(f.hear({"10.0.0.1:9090", "10.0.0.2:9090"}));
  f.dns->set({"10.0.0.1:9090", "10.0.0.2:9090", "10.0.0.3:9090"});
  f.ports->channel("10.0.0.2:9090", emitter::channel_state::ready);
  f.ports->channel("10.0.0.2:9090", emitter::channel_state::transient_failure);
  ASSERT_TRUE(f.hear({"10.0.0.1:9090", "10.0.0.2:9090", "10.0.0.3:9090"}))
      << "the loss of 10.0.0.2 made the name resolve again (interval: one hour)";
}

TEST(EmitterDns, StaticTargetsAndANameTogether) {
  fixture f(50ms);
  f.start_options.targets = {"static:1", name};
  f.dns->set({"10.0.0.1:9090"});
  f.start();
  ASSERT_TRUE(f.hear({"10.0.0.1:9090", "static:1"}));
  f.dns->set({}, "NXDOMAIN");
  for (int i = 0; i < 1000 && f.resolve_failures() < 1; ++i) std::this_thread::sleep_for(10ms);
  f.dns->set({"10.0.0.2:9090"});
  ASSERT_TRUE(f.hear({"10.0.0.2:9090", "static:1"}));
  EXPECT_EQ(f.ports->count("static:1"), 1) << "a static target is never dropped";
}

}  // namespace
}  // namespace kvrelay
