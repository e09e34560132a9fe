// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Asks several actors for `status` and delivers one actor_status with their answers as children.
// CAF 0.17 has no fan_out_request; this is the small version the admin tree needs. Include only
// from actor implementation files (it pulls in CAF's request machinery).

#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.hpp"
#include "base/tsan.hpp"
#include "messages/actors.hpp"

namespace kvrelay {

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
  struct agg {
    actor_status head;
    size_t remaining;
    caf::typed_response_promise<actor_status> promise;
    void done_one() {
      if (--remaining != 0) return;
      tsan::handoff_publish();
      promise.deliver(std::move(head));
    }
  };
  auto a = std::make_shared<agg>(agg{std::move(head), children.size(), std::move(promise)});
  a->head.children.resize(children.size());
  if (children.empty()) {
    tsan::handoff_publish();
    a->promise.deliver(std::move(a->head));
    return;
  }
  for (size_t i = 0; i < children.size(); ++i) {
    auto& slot = a->head.children[i];
    slot.name = children[i].name;
    slot.supervision = children[i].supervision;
    if (!children[i].hdl) {
      slot.state = "down";
      a->done_one();
      continue;
    }
    self->request(children[i].hdl, timeout, atom::status_v)
        .then(
            [a, i](actor_status& body) {
              tsan::handoff_consume();
              auto& s = a->head.children[i];
              body.name = std::move(s.name);
              body.supervision = std::move(s.supervision);
              s = std::move(body);
              a->done_one();
            },
            [a, i](caf::error&) {
              a->head.children[i].state = "no answer";
              a->done_one();
            });
  }
}

}  // namespace kvrelay
