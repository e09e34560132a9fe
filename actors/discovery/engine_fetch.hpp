// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Engine discovery, the fetching half: asks an engine's HTTP server the questions
// engine_discovery.hpp reads the answers to, over the shared HTTP client (net/: one kept-alive
// connection, bounded time and body). Blocking; run it off any actor thread.
//
// Order (engine_discovery.hpp ED2): GET <url>/kv_event_sources; when that route does not
// exist, GET <url>/server_info, and <url>/get_server_info (SGLang's older name) when that does
// not exist either; then GET <url>/v1/models unless the model is not wanted. A transport failure
// stops the fetch (the parser reports it).

#include <chrono>
#include <cstddef>
#include <string_view>

#include "actors/discovery/engine_discovery.hpp"
#include "base/error.hpp"

namespace kvrelay::discovery {

struct fetch_options {
  std::chrono::milliseconds timeout{2000};  // per request: connect, and the whole answer
  std::size_t max_body = 4u << 20;          // SGLang's /server_info carries every server arg
  bool want_model = true;                   // false when the model id is configured
};

/// The raw answers; the parser decides what they mean. An unusable URL asks nothing.
engine_answers fetch_answers(std::string_view engine_url, const fetch_options& opts = {});

/// fetch_answers, then discover.
outcome<discovered_engine> fetch_and_discover(std::string_view engine_url,
                                              const fetch_options& opts = {});

}  // namespace kvrelay::discovery
