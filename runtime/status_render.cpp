#include "runtime/status_render.hpp"

#include <nlohmann/json.hpp>

namespace kvrelay {

namespace {

nlohmann::ordered_json value_json(const actor_status::value& v) {
  return std::visit(
      [](const auto& x) -> nlohmann::ordered_json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, actor_status::string_map>) {
          auto obj = nlohmann::ordered_json::object();
          for (const auto& [k, s] : x) obj[k] = s;
          return obj;
        } else {
          return x;
        }
      },
      v);
}

nlohmann::ordered_json to_json(const actor_status& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!s.name.empty()) j["name"] = s.name;
  for (const auto& [k, v] : s.supervision) j[k] = value_json(v);
  j["state"] = s.state;
  if (!s.kind.empty()) {
    j["kind"] = s.kind;
    j["mailbox"] = s.mailbox;
  }
  for (const auto& [k, v] : s.fields) j[k] = value_json(v);
  if (!s.children.empty()) {
    auto& kids = j["children"] = nlohmann::ordered_json::array();
    for (const auto& c : s.children) kids.push_back(to_json(c));
  }
  return j;
}

}  // namespace

std::string render_json(const actor_status& s) {
  // Replace invalid UTF-8 (an adapter name from the wire) instead of throwing.
  return to_json(s).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace kvrelay
