#pragma once
// Asks several actors for `status` and delivers one JSON object built from their answers. CAF
// 0.17 has no fan_out_request; this is the small version the admin tree needs. Include only from
// actor implementation files (it pulls in CAF's request machinery).

#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "messages/actors.hpp"
#include "base/status_json.hpp"

namespace kvrelay {

struct status_child {
  std::string name;
  status_client_actor hdl;  // may be invalid (child down): reported as such
  std::string extra;        // pre-rendered JSON members to merge (e.g. "\"restarts\":2"), or ""
};

/// `head` is a status_json for the asking actor itself; each child's answer goes into a
/// "children" array with its name. Answers that time out are reported as
/// {"name":..,"state":"no answer"}.
template <class Self>
void fan_out_status(Self* self, status_json head, std::vector<status_child> children,
                    caf::typed_response_promise<std::string> promise,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(1000)) {
  struct agg {
    status_json head;
    std::vector<std::string> parts;
    size_t remaining;
    caf::typed_response_promise<std::string> promise;
    void finish() {
      std::string arr = "[";
      for (size_t i = 0; i < parts.size(); ++i) {
        if (i) arr += ',';
        arr += parts[i];
      }
      arr += ']';
      head.add_raw("children", arr);
      promise.deliver(head.str());
    }
  };
  auto a = std::make_shared<agg>(agg{std::move(head), {}, children.size(), std::move(promise)});
  a->parts.resize(children.size());
  if (children.empty()) {
    a->finish();
    return;
  }
  const auto merge = [](const std::string& name, const std::string& extra,
                        const std::string& body) {
    // body is "{...}": splice name and extra members in front.
    std::string out = "{\"name\":\"" + name + "\"";
    if (!extra.empty()) out += "," + extra;
    if (body.size() > 2) out += "," + body.substr(1, body.size() - 2);
    out += "}";
    return out;
  };
  for (size_t i = 0; i < children.size(); ++i) {
    auto c = children[i];
    if (!c.hdl) {
      a->parts[i] = merge(c.name, c.extra, "{\"state\":\"down\"}");
      if (--a->remaining == 0) a->finish();
      continue;
    }
    self->request(c.hdl, timeout, atom::status_v)
        .then(
            [a, i, c, merge](std::string& body) {
              a->parts[i] = merge(c.name, c.extra, "{\"state\":\"running\"," + body.substr(1));
              if (--a->remaining == 0) a->finish();
            },
            [a, i, c, merge](caf::error&) {
              a->parts[i] = merge(c.name, c.extra, "{\"state\":\"no answer\"}");
              if (--a->remaining == 0) a->finish();
            });
  }
}

}  // namespace kvrelay
