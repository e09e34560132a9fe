// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter against the real demo policy server over loopback gRPC: when the server goes away
// and a new, empty one starts on the same port, the reconnect listener hears `reconnected` for
// that target without any unit or stats call being made (the engine is quiet).
// With two servers, only the restarted one's target is reported.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/emitter/emitter_actor.hpp"
#include "messages/system_setup.hpp"
#include "tools/policy-server/service.hpp"

namespace kvrelay {
namespace {

using namespace std::chrono_literals;

struct system_fixture {
  system_fixture() : sys(setup(cfg)) {}
  static caf::actor_system_config& setup(caf::actor_system_config& c) {
    setup_actor_system(c);
    return c;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys;
};

// Waits for one `reconnected` at `self` (target sets are skipped); its target, or "" after
// `limit`.
std::string heard_reconnect(caf::scoped_actor& self, std::chrono::seconds limit) {
  std::string heard;
  bool done = false;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    self->receive([&](atom::reconnected, std::string& t) { heard = std::move(t); done = true; },
                  [&](atom::targets, std::vector<std::string>&) {},
                  caf::after(left.count() > 0 ? left : std::chrono::milliseconds(0)) >>
                      [&] { done = true; });
  }
  return heard;
}

// Every `reconnected` the emitter sent `self` before it answered a status request made now: its
// messages to one receiver arrive in order, so the answer is a barrier behind them.
std::vector<std::string> reconnects_before_barrier(caf::scoped_actor& self,
                                                   const emitter_actor& em) {
  bool answered = false;
  self->request(em, 5s, atom::status_v)
      .receive([&](const actor_status&) { answered = true; }, [](const caf::error&) {});
  EXPECT_TRUE(answered) << "the emitter did not answer its status";
  std::vector<std::string> heard;
  for (std::string t; !(t = heard_reconnect(self, 0s)).empty();) heard.push_back(t);
  return heard;
}

// The channel field of the emitter's status: `key` is "channel" (the first target's) or
// "target[T]" (that target's map).
std::string channel_of(caf::scoped_actor& self, const emitter_actor& em, const std::string& key) {
  std::string out;
  self->request(em, 5s, atom::status_v)
      .receive(
          [&](const actor_status& s) {
            for (const auto& [k, v] : s.fields) {
              if (k != key) continue;
              if (const auto* str = std::get_if<std::string>(&v)) out = *str;
              if (const auto* m = std::get_if<actor_status::string_map>(&v))
                for (const auto& [mk, mv] : *m)
                  if (mk == "channel") out = mv;
            }
          },
          [](const caf::error&) {});
  return out;
}

// Polls the status until every key reports READY; false after ~20 s.
bool all_ready(caf::scoped_actor& self, const emitter_actor& em,
               const std::vector<std::string>& keys) {
  for (int i = 0; i < 1000; ++i) {
    bool ready = true;
    for (const auto& k : keys) ready = ready && channel_of(self, em, k) == "READY";
    if (ready) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// An emitter for `o` (names the pipeline, bounds the reconnect backoff), listened to by `self`.
emitter_actor start_emitter(system_fixture& f, caf::scoped_actor& self, const std::string& name,
                            emitter_options o) {
  pipeline_context ctx;
  ctx.name = name;
  ctx.identity = {name, "m", "t", "vllm"};
  o.client.max_reconnect_backoff = 500ms;  // the test's bound, not its assertion
  std::string err;
  auto em = spawn_emitter(f.sys, ctx, o, err);
  EXPECT_TRUE(em) << err;
  if (em) self->send(em, atom::update_v, caf::actor_cast<reconnect_listener_actor>(self));
  return em;
}

// Stops `first` and starts a new, empty server on its port (nullptr if the port was taken).
std::unique_ptr<policy::policy_server> restart(std::unique_ptr<policy::policy_server> first) {
  const int port = first->port();
  first->stop();
  first.reset();
  policy::server_options so;
  so.listen = "127.0.0.1:" + std::to_string(port);
  auto second = std::make_unique<policy::policy_server>(so);
  if (!second->start()) return nullptr;
  return second;
}

TEST(EmitterReconnect, ANewEmptyServerOnTheSamePortIsToldToTheListener) {
  auto first = std::make_unique<policy::policy_server>();
  ASSERT_TRUE(first->start());
  const std::string target = first->target();

  system_fixture f;
  caf::scoped_actor self{f.sys};
  emitter_options o;
  o.client.target = target;
  auto em = start_emitter(f, self, "reconnect-0", o);
  ASSERT_TRUE(em);

  // Connected (the emitter connects at start), and no reconnect for that first READY.
  ASSERT_TRUE(all_ready(self, em, {"channel"})) << "the emitter never connected";
  EXPECT_EQ(heard_reconnect(self, 0s), "");

  // The server goes away; a new, empty one takes its port.
  auto second = restart(std::move(first));
  ASSERT_TRUE(second) << "the port was taken meanwhile";
  EXPECT_EQ(heard_reconnect(self, 30s), target) << "the listener never heard of the reconnect";
  EXPECT_EQ(second->calls().report_streams + second->calls().publish, 0u)
      << "noticed without any call";

  self->send_exit(em, caf::exit_reason::user_shutdown);
  self->wait_for(em);
}

TEST(EmitterReconnect, OfTwoServersOnlyTheRestartedOneIsReported) {
  policy::policy_server steady;
  ASSERT_TRUE(steady.start());
  auto first = std::make_unique<policy::policy_server>();
  ASSERT_TRUE(first->start());
  const std::string restarted = first->target();

  system_fixture f;
  caf::scoped_actor self{f.sys};
  emitter_options o;
  o.targets = {steady.target(), restarted};
  auto em = start_emitter(f, self, "reconnect-1", o);
  ASSERT_TRUE(em);
  const std::string steady_key = "target[" + steady.target() + "]";
  ASSERT_TRUE(all_ready(self, em, {steady_key, "target[" + restarted + "]"}))
      << "the emitter never connected to both";

  // Restarted twice: after each, the restarted target's reconnect and nothing for the steady
  // one, up to a barrier behind everything the emitter sent until then (the steady channel's
  // watch has fired several times over the two restarts).
  std::vector<std::string> heard;
  for (int i = 0; i < 2; ++i) {
    auto second = restart(std::move(first));
    ASSERT_TRUE(second) << "the port was taken meanwhile";
    const std::string t = heard_reconnect(self, 30s);
    EXPECT_EQ(t, restarted) << "restart " << i << ": the restarted server's target first";
    heard.push_back(t);
    first = std::move(second);
  }
  for (const auto& t : reconnects_before_barrier(self, em)) heard.push_back(t);
  EXPECT_EQ(heard, (std::vector<std::string>{restarted, restarted}))
      << "the steady target was reported, or the restarted one more than once per restart";
  EXPECT_EQ(channel_of(self, em, steady_key), "READY");

  self->send_exit(em, caf::exit_reason::user_shutdown);
  self->wait_for(em);
}

}  // namespace
}  // namespace kvrelay
