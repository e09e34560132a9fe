// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// "Ask many actors, wait for every answer": the one way it is done here. CAF 0.17 has no
// fan_out_request. A `gather` holds one slot per actor asked; each answer (or its error) fills
// its slot and counts down, and the last one runs `done` with every slot, in the order asked.
// Answers travel through CAF's mailboxes, which ThreadSanitizer cannot see (base/tsan.hpp): `fill`
// consumes before an answer is read, and `done` hands its result on with `deliver_answer`, which
// publishes after the result is built, so a caller never writes those edges itself. Include only
// from actor implementation files (it pulls in CAF's request machinery).

#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "base/tsan.hpp"
#include "messages/actors.hpp"

namespace kvrelay {

/// Delivers an answer built on this thread to an asker on another: publishes first, after
/// everything in it was written (base/tsan.hpp).
template <class Promise, class... Ts>
void deliver_answer(Promise& p, Ts&&... xs) {
  tsan::handoff_publish();
  p.deliver(std::forward<Ts>(xs)...);
}

template <class T>
class gather {
 public:
  using done_fn = std::function<void(std::vector<T>&)>;

  /// `n` slots; with none, `done` runs at once.
  static std::shared_ptr<gather> make(size_t n, done_fn done) {
    auto g = std::shared_ptr<gather>(new gather(n, std::move(done)));
    if (n == 0) g->finish();
    return g;
  }

  /// Slot `i` before any answer: what is known without asking (a name, a default).
  T& slot(size_t i) { return items_[i]; }

  /// An answer for slot `i`: `f(slot)` reads it into the slot, then it counts.
  template <class F>
  void fill(size_t i, F&& f) {
    tsan::handoff_consume();
    f(items_[i]);
    one();
  }

  /// Slot `i` counts as answered as it is (an error, a child that is down).
  void one() {
    if (--remaining_ == 0) finish();
  }

 private:
  gather(size_t n, done_fn done) : items_(n), remaining_(n), done_(std::move(done)) {}
  void finish() { done_(items_); }

  std::vector<T> items_;
  size_t remaining_;
  done_fn done_;
};

struct status_child {
  std::string name;
  supervised_actor hdl;  // may be invalid (child down): reported as such
  std::vector<std::pair<std::string, actor_status::value>> supervision;  // restarts, last error
};

/// Delivers `head` with one child per entry of `children`, in order. A child that is down is
/// reported with state "down"; one that does not answer within `timeout`, "no answer".
template <class Self>
void fan_out_status(Self* self, actor_status head, std::vector<status_child> children,
                    caf::typed_response_promise<actor_status> promise,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(1000)) {
  auto head_ptr = std::make_shared<actor_status>(std::move(head));
  auto g = gather<actor_status>::make(
      children.size(), [head_ptr, promise](std::vector<actor_status>& kids) mutable {
        head_ptr->children = std::move(kids);
        deliver_answer(promise, std::move(*head_ptr));
      });
  for (size_t i = 0; i < children.size(); ++i) {
    auto& slot = g->slot(i);
    slot.name = children[i].name;
    slot.supervision = children[i].supervision;
    if (!children[i].hdl) {
      slot.state = "down";
      g->one();
      continue;
    }
    self->request(children[i].hdl, timeout, atom::status_v)
        .then(
            [g, i](actor_status& body) {
              g->fill(i, [&](actor_status& s) {
                body.name = std::move(s.name);
                body.supervision = std::move(s.supervision);
                s = std::move(body);
              });
            },
            [g, i](caf::error&) {
              g->slot(i).state = "no answer";
              g->one();
            });
  }
}

}  // namespace kvrelay
