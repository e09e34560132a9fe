// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Builds the small JSON object each actor returns for `status` (the admin tree). Hand-rolled on
// purpose: every actor includes it, and a JSON library header would cost every actor TU seconds.

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace kvrelay {

class status_json {
 public:
  /// An object without the kind/mailbox header (members for another object).
  status_json() : out_("{") {}
  status_json(std::string_view kind, size_t mailbox) {
    out_ = "{";
    add("kind", kind);
    add("mailbox", mailbox);
  }
  void add(std::string_view key, std::string_view v) {
    key_(key);
    out_ += '"';
    escape(v);
    out_ += '"';
  }
  void add(std::string_view key, const char* v) { add(key, std::string_view(v)); }
  void add(std::string_view key, const std::string& v) { add(key, std::string_view(v)); }
  void add(std::string_view key, bool v) {
    key_(key);
    out_ += v ? "true" : "false";
  }
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  void add(std::string_view key, T v) {
    key_(key);
    out_ += std::to_string(v);
  }
  /// Inserts pre-rendered JSON (an object or array) under `key`.
  void add_raw(std::string_view key, std::string_view json) {
    key_(key);
    out_ += json;
  }
  std::string str() const { return out_ + "}"; }
  /// The members alone, "a":1,"b":2, to splice into another object.
  std::string members() const { return out_.substr(1); }

 private:
  void key_(std::string_view k) {
    if (out_.size() > 1) out_ += ',';
    out_ += '"';
    escape(k);
    out_ += "\":";
  }
  void escape(std::string_view v) {
    for (char c : v) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        static const char* hex = "0123456789abcdef";
        out_ += "\\u00";
        out_ += hex[(c >> 4) & 0xf];
        out_ += hex[c & 0xf];
      } else {
        out_ += c;
      }
    }
  }
  std::string out_;
};

}  // namespace kvrelay
