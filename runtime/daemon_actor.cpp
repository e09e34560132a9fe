#include "runtime/daemon_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <functional>
#include <memory>

#include "base/tsan.hpp"


namespace kvrelay {

namespace {

using std::chrono::milliseconds;

// A pipeline's status tree waits up to 1 s for its slowest child; the root waits a little longer.
constexpr milliseconds pipeline_status_timeout{2000};
constexpr milliseconds pipeline_ready_timeout{1000};
// After its budget a pipeline still reads its own status for the drain report (≤ 0.5 s).
constexpr milliseconds drain_report_slack{1000};

struct daemon_state {
  static inline constexpr const char* name = "daemon";
  std::vector<daemon_pipeline> pipelines;

  // Stopping the root stops the daemon: every pipeline tears down its children in order.
  ~daemon_state() {
    for (auto& p : pipelines)
      if (p.hdl) caf::anon_send_exit(p.hdl, caf::exit_reason::user_shutdown);
  }
};

using daemon_self = daemon_actor::stateful_pointer<daemon_state>;

// Collects one answer per pipeline, in order, and delivers them all at once.
template <class T>
struct gather {
  std::vector<T> items;
  size_t remaining;
  std::function<void(std::vector<T>&)> done;
  void one() {
    if (--remaining == 0) done(items);
  }
};

void status_of(daemon_self self, caf::typed_response_promise<std::vector<pipeline_view>> rp) {
  const auto& ps = self->state.pipelines;
  auto views = std::make_shared<std::vector<pipeline_view>>();
  for (const auto& p : ps) views->push_back(p.facts);
  auto g = std::make_shared<gather<actor_status>>();
  g->items.resize(ps.size());
  g->remaining = ps.size();
  g->done = [views, rp](std::vector<actor_status>& items) mutable {
    for (size_t i = 0; i < items.size(); ++i) (*views)[i].status = std::move(items[i]);
    tsan::handoff_publish();
    rp.deliver(std::move(*views));
  };
  if (ps.empty()) {
    rp.deliver(std::vector<pipeline_view>{});
    return;
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    self->request(ps[i].hdl, pipeline_status_timeout, atom::status_v)
        .then(
            [g, i](actor_status& s) {
              tsan::handoff_consume();
              g->items[i] = std::move(s);
              g->one();
            },
            [g, i, name = ps[i].facts.name](caf::error& err) {
              auto& s = g->items[i];
              s.kind = "pipeline";
              s.state = "no answer: " + caf::to_string(err);
              s.add("pipeline", name);
              g->one();
            });
  }
}

daemon_actor::behavior_type daemon_fn(daemon_self self, std::vector<daemon_pipeline> ps) {
  self->state.pipelines = std::move(ps);
  return {
      [=](atom::status) -> caf::result<std::vector<pipeline_view>> {
        auto rp = self->make_response_promise<std::vector<pipeline_view>>();
        status_of(self, rp);
        return rp;
      },
      [=](atom::ready) -> caf::result<bool, std::vector<std::string>> {
        const auto& ps = self->state.pipelines;
        auto rp = self->make_response_promise<bool, std::vector<std::string>>();
        if (ps.empty()) {
          rp.deliver(false, std::vector<std::string>{"no pipeline configured"});
          return rp;
        }
        struct answer {
          bool ok = false;
          std::vector<std::string> reasons;
        };
        auto g = std::make_shared<gather<answer>>();
        g->items.resize(ps.size());
        g->remaining = ps.size();
        g->done = [rp](std::vector<answer>& items) mutable {
          bool all = true;
          std::vector<std::string> reasons;
          for (auto& a : items) {
            all = all && a.ok;
            for (auto& r : a.reasons) reasons.push_back(std::move(r));
          }
          tsan::handoff_publish();
          rp.deliver(all, std::move(reasons));
        };
        for (size_t i = 0; i < ps.size(); ++i) {
          const auto name = ps[i].facts.name;
          self->request(ps[i].hdl, pipeline_ready_timeout, atom::ready_v)
              .then(
                  [g, i, name](bool ok, std::vector<std::string>& why) {
                    tsan::handoff_consume();
                    g->items[i].ok = ok;
                    for (auto& r : why) g->items[i].reasons.push_back(name + ": " + r);
                    g->one();
                  },
                  [g, i, name](caf::error& err) {
                    g->items[i].reasons.push_back(name + ": no answer (" + caf::to_string(err) +
                                                  ")");
                    g->one();
                  });
        }
        return rp;
      },
      [=](atom::crash, const std::string& pipeline, actor_kind who) -> caf::result<bool> {
        for (auto& p : self->state.pipelines)
          if (p.facts.name == pipeline) return self->delegate(p.hdl, atom::crash_v, who);
        return false;
      },
      [=](atom::adapter, const std::string& replica, int64_t id,
          const std::string& name) -> caf::result<bool> {
        std::vector<pipeline_actor> targets;
        for (auto& p : self->state.pipelines)
          if (replica.empty() || p.facts.replica_id == replica) targets.push_back(p.hdl);
        if (targets.empty()) return false;
        // Answers after every matching decoder applied it (or did not answer in time: the
        // pipeline has kept the mapping for its next decoder either way).
        auto rp = self->make_response_promise<bool>();
        auto g = std::make_shared<gather<bool>>();
        g->items.resize(targets.size());
        g->remaining = targets.size();
        g->done = [rp](std::vector<bool>&) mutable { rp.deliver(true); };
        for (auto& t : targets)
          self->request(t, pipeline_ready_timeout, atom::adapter_v, id, name)
              .then([g](bool) { g->one(); }, [g](caf::error&) { g->one(); });
        return rp;
      },
      [=](atom::drain, caf::timespan budget) -> caf::result<std::vector<drain_report>> {
        const auto& ps = self->state.pipelines;
        auto rp = self->make_response_promise<std::vector<drain_report>>();
        if (ps.empty()) {
          rp.deliver(std::vector<drain_report>{});
          return rp;
        }
        auto g = std::make_shared<gather<drain_report>>();
        g->items.resize(ps.size());
        g->remaining = ps.size();
        g->done = [rp](std::vector<drain_report>& items) mutable {
          tsan::handoff_publish();
          rp.deliver(std::move(items));
        };
        // Every pipeline at once, so they drain in parallel within one budget.
        for (size_t i = 0; i < ps.size(); ++i) {
          const auto name = ps[i].facts.name;
          self->request(ps[i].hdl, budget + drain_report_slack, atom::drain_v, budget)
              .then(
                  [g, i](drain_report& r) {
                    tsan::handoff_consume();
                    g->items[i] = std::move(r);
                    g->one();
                  },
                  [g, i, name](caf::error& err) {
                    auto& r = g->items[i];
                    r.pipeline = name;
                    r.timed_out = true;
                    r.failed_step = "pipeline: " + caf::to_string(err);
                    g->one();
                  });
        }
        return rp;
      },
  };
}

}  // namespace

daemon_actor spawn_daemon_actor(caf::actor_system& sys, std::vector<daemon_pipeline> pipelines) {
  return sys.spawn(daemon_fn, std::move(pipelines));
}

// -- daemon_client: blocking calls from threads outside CAF -----------------------------------

std::optional<std::vector<pipeline_view>> daemon_client::status(ms timeout) const {
  caf::scoped_actor self{sys_};
  std::optional<std::vector<pipeline_view>> out;
  self->request(root_, timeout, atom::status_v)
      .receive(
          [&](std::vector<pipeline_view>& v) {
            tsan::handoff_consume();
            out = std::move(v);
          },
          [](caf::error&) {});
  return out;
}

std::pair<bool, std::vector<std::string>> daemon_client::ready(ms timeout) const {
  caf::scoped_actor self{sys_};
  std::pair<bool, std::vector<std::string>> out{false, {}};
  self->request(root_, timeout, atom::ready_v)
      .receive(
          [&](bool ok, std::vector<std::string>& why) {
            tsan::handoff_consume();
            out = {ok, std::move(why)};
          },
               [&](caf::error& err) { out.second.push_back("no answer: " + caf::to_string(err)); });
  return out;
}

bool daemon_client::crash(const std::string& pipeline, actor_kind who) const {
  caf::scoped_actor self{sys_};
  bool ok = false;
  self->request(root_, ms(2000), atom::crash_v, pipeline, who)
      .receive([&](bool r) { ok = r; }, [](caf::error&) {});
  return ok;
}

bool daemon_client::add_adapter(const std::string& replica_id, int64_t id,
                                const std::string& name) const {
  caf::scoped_actor self{sys_};
  bool ok = false;
  self->request(root_, ms(2000), atom::adapter_v, replica_id, id, name)
      .receive([&](bool r) { ok = r; }, [](caf::error&) {});
  return ok;
}

std::vector<drain_report> daemon_client::drain(ms budget) const {
  caf::scoped_actor self{sys_};
  std::vector<drain_report> out;
  const caf::timespan b = budget;
  self->request(root_, budget + 2 * drain_report_slack, atom::drain_v, b)
      .receive(
          [&](std::vector<drain_report>& r) {
            tsan::handoff_consume();
            out = std::move(r);
          },
          [](caf::error&) {});
  return out;
}

}  // namespace kvrelay
