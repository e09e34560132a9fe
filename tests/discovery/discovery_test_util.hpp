// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Building discovery answers in tests, and reading the parser's verdicts.

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/discovery/engine_discovery.hpp"

namespace kvrelay::discovery {

inline http_answer answer(std::string path, std::string body, int status = 200) {
  http_answer a;
  a.path = std::move(path);
  a.status = status;
  a.body = std::move(body);
  return a;
}

inline engine_answers vllm(std::string body, int status = 200) {
  engine_answers a;
  a.kv_event_sources = answer("/kv_event_sources", std::move(body), status);
  return a;
}

inline engine_answers sglang(std::string body) {
  engine_answers a;
  a.kv_event_sources = answer("/kv_event_sources", R"({"detail":"Not Found"})", 404);
  a.server_info = answer("/server_info", std::move(body));
  return a;
}

inline discovered_engine ok(std::string_view url, const engine_answers& a) {
  auto r = discover(url, a);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().render());
  return r.ok() ? r.value() : discovered_engine{};
}

inline std::string fails(std::string_view url, const engine_answers& a) {
  auto r = discover(url, a);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return {};
  EXPECT_EQ(r.error().code, ec::discovery_failed) << r.error().render();
  return r.error().context;
}

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline std::vector<std::string> endpoints(const discovered_engine& e) {
  std::vector<std::string> out;
  for (const auto& p : e.publishers) out.push_back(p.endpoint);
  return out;
}

/// A body that must fail, and a part of the message it must fail with.
struct bad_case {
  const char* body;
  const char* why;
};

/// Each case's body, made into answers by `make`, fails mentioning its `why`.
template <class Make>
void expect_failures(std::string_view url, const std::vector<bad_case>& cases, Make make) {
  for (const auto& c : cases) {
    const auto why = fails(url, make(c.body));
    EXPECT_TRUE(has(why, c.why)) << c.body << ": " << why;
  }
}

inline constexpr const char* kUrl = "http://10.0.0.5:8000";

}  // namespace kvrelay::discovery
