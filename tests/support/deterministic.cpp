// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "tests/support/deterministic.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/message_view.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>

#include "messages/system_setup.hpp"

namespace kvrelay::testing {

struct deterministic_system::impl {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::vector<caf::actor> to_stop;

  impl() {
    setup_actor_system(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }
};

deterministic_system::deterministic_system() : impl_(std::make_unique<impl>()) {}

deterministic_system::~deterministic_system() {
  for (auto& h : impl_->to_stop) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  impl_->to_stop.clear();
  // Actors may still hold timers or each other; run until everything that can go has gone.
  for (int i = 0; i < 100 && (impl_->sched->has_job() || impl_->sched->has_pending_timeout());
       ++i) {
    run();
    impl_->sched->trigger_timeouts();
  }
  run();
}

caf::actor_system& deterministic_system::sys() { return *impl_->sys; }
caf::scheduler::test_coordinator& deterministic_system::sched() { return *impl_->sched; }

size_t deterministic_system::run() {
  size_t n = 0;
  while (impl_->sched->has_job()) n += impl_->sched->run();
  return n;
}

size_t deterministic_system::advance(std::chrono::milliseconds d) {
  impl_->sched->advance_time(std::chrono::duration_cast<caf::timespan>(d));
  return run();
}

bool deterministic_system::fire_next_timer() {
  if (!impl_->sched->trigger_timeout()) return false;
  run();
  return true;
}

bool deterministic_system::has_timer() const { return impl_->sched->has_pending_timeout(); }

void deterministic_system::stop_at_end(caf::actor hdl) { impl_->to_stop.push_back(std::move(hdl)); }

struct recorder::shared {
  std::vector<caf::message> received;
  std::function<caf::message(const caf::message&)> reply;
};

recorder::recorder(deterministic_system& t) : shared_(std::make_shared<shared>()) {
  auto s = shared_;
  hdl_ = t.sys().spawn([s](caf::event_based_actor* self) -> caf::behavior {
    self->set_default_handler(
        [s](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
          auto msg = x.move_content_to_message();
          s->received.push_back(msg);
          if (s->reply) return s->reply(msg);
          return caf::message{};
        });
    // Never sent: everything goes to the default handler (an empty behavior would quit).
    return {[](caf::atom_constant<caf::atom("rec_never")>) {}};
  });
  t.stop_at_end(hdl_);
}

recorder::~recorder() = default;

const std::vector<caf::message>& recorder::received() const { return shared_->received; }
void recorder::clear() { shared_->received.clear(); }
void recorder::reply_with(std::function<caf::message(const caf::message&)> f) {
  shared_->reply = std::move(f);
}

}  // namespace kvrelay::testing
