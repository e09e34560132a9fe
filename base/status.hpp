// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What an actor says about itself when the admin port asks (`status`): a typed value that
// travels as a message and is rendered to JSON only at the edge (admin/status_render). Fields keep
// the order they were added in, so the rendered object reads the way the actor wrote it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace kvrelay {

struct actor_status {
  using string_list = std::vector<std::string>;
  using string_map = std::vector<std::pair<std::string, std::string>>;  // a JSON object
  using value = std::variant<bool, int64_t, uint64_t, double, std::string, string_list, string_map>;

  std::string name;               // given by the parent: "ingress", "shard[sql-lora]"
  std::string state = "running";  // "running", "down", "no answer", ...
  std::string kind;               // the actor's kind: "debouncer"
  uint64_t mailbox = 0;
  /// Set by the supervisor for a supervised child (restarts, last error, uptime), shown first.
  std::vector<std::pair<std::string, value>> supervision;
  std::vector<std::pair<std::string, value>> fields;
  std::vector<actor_status> children;

  actor_status() = default;
  actor_status(std::string kind_, size_t mailbox_)
      : kind(std::move(kind_)), mailbox(static_cast<uint64_t>(mailbox_)) {}

  actor_status& add(std::string key, value v) {
    fields.emplace_back(std::move(key), std::move(v));
    return *this;
  }
  actor_status& add(std::string key, const char* v) {
    return add(std::move(key), value(std::string(v)));
  }
  actor_status& add(std::string key, std::string_view v) {
    return add(std::move(key), value(std::string(v)));
  }
  actor_status& add(std::string key, const std::string& v) { return add(std::move(key), value(v)); }
  template <class T, class = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  actor_status& add(std::string key, T v) {
    if constexpr (std::is_signed_v<T>)
      return add(std::move(key), value(static_cast<int64_t>(v)));
    else
      return add(std::move(key), value(static_cast<uint64_t>(v)));
  }

  /// The field's value, or nullptr.
  const value* find(std::string_view key) const {
    for (const auto& [k, v] : fields)
      if (k == key) return &v;
    return nullptr;
  }
  /// An integer field as int64 (`fallback` when absent or not an integer).
  int64_t integer(std::string_view key, int64_t fallback = -1) const {
    const value* v = find(key);
    if (!v) return fallback;
    if (const auto* i = std::get_if<int64_t>(v)) return *i;
    if (const auto* u = std::get_if<uint64_t>(v)) return static_cast<int64_t>(*u);
    return fallback;
  }
  /// A boolean field (`fallback` when absent or not a boolean).
  bool flag(std::string_view key, bool fallback = false) const {
    const value* v = find(key);
    const auto* b = v ? std::get_if<bool>(v) : nullptr;
    return b ? *b : fallback;
  }
  /// A child by name, or nullptr.
  const actor_status* child(std::string_view child_name) const {
    for (const auto& c : children)
      if (c.name == child_name) return &c;
    return nullptr;
  }
};

}  // namespace kvrelay
