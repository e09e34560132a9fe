// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The emitter against the real demo policy server over loopback gRPC: when the server goes away
// and a new, empty one starts on the same port, the reconnect listener hears `reconnected`
// without any unit or stats call being made (the engine is quiet: issue 12 item 3).
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <chrono>
#include <memory>
#include <string>

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

// Waits for one `reconnected` at `self`; false after `limit`.
bool heard_reconnect(caf::scoped_actor& self, std::chrono::seconds limit) {
  bool heard = false;
  self->receive([&](atom::reconnected) { heard = true; },
                caf::after(limit) >> [] {});
  return heard;
}

TEST(EmitterReconnect, ANewEmptyServerOnTheSamePortIsToldToTheListener) {
  auto first = std::make_unique<policy::policy_server>();
  ASSERT_TRUE(first->start());
  const int port = first->port();
  const std::string target = first->target();

  system_fixture f;
  pipeline_context ctx;
  ctx.name = "reconnect-0";
  ctx.identity = {"r-0", "m", "t", "vllm"};
  emitter_options o;
  o.client.target = target;
  o.client.max_reconnect_backoff = 500ms;  // the test's bound, not its assertion
  std::string err;
  auto em = spawn_emitter(f.sys, ctx, o, err);
  ASSERT_TRUE(em) << err;
  caf::scoped_actor self{f.sys};
  self->send(em, atom::update_v, caf::actor_cast<reconnect_listener_actor>(self));

  // Connected (the emitter connects at start), and no reconnect for that first READY.
  bool ready = false;
  for (int i = 0; i < 1000 && !ready; ++i) {
    self->request(em, 5s, atom::status_v)
        .receive(
            [&](const actor_status& s) {
              for (const auto& [k, v] : s.fields)
                if (k == "channel" && std::holds_alternative<std::string>(v) &&
                    std::get<std::string>(v) == "READY")
                  ready = true;
            },
            [](const caf::error&) {});
    if (!ready) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(ready) << "the emitter never connected";
  EXPECT_FALSE(heard_reconnect(self, 0s));

  // The server goes away; a new, empty one takes its port.
  first->stop();
  first.reset();
  policy::server_options so;
  so.listen = "127.0.0.1:" + std::to_string(port);
  policy::policy_server second(so);
  ASSERT_TRUE(second.start()) << "port " << port << " taken meanwhile";
  EXPECT_TRUE(heard_reconnect(self, 30s)) << "the listener never heard of the reconnect";
  EXPECT_EQ(second.calls().report_streams + second.calls().publish, 0u)
      << "noticed without any call";

  self->send_exit(em, caf::exit_reason::user_shutdown);
  self->wait_for(em);
}

}  // namespace
}  // namespace kvrelay
