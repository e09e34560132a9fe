// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/discovery/engine_fetch.hpp"

#include <string>
#include <utility>

#include "net/http_fetch.hpp"

namespace kvrelay::discovery {
namespace {

http_answer ask(http_fetcher& f, const std::string& prefix, std::string path) {
  fetch_result r = f.get(prefix + path);
  http_answer a;
  a.path = std::move(path);
  if (r.ok) {
    a.status = r.status;
    a.body = std::move(r.body);
  } else {
    a.error = std::move(r.error);
    a.url = std::move(r.url);
    a.why = std::move(r.why);
  }
  return a;
}

}  // namespace

engine_answers fetch_answers(std::string_view engine_url, const fetch_options& opts) {
  engine_answers out;
  auto base = parse_engine_url(engine_url);
  if (!base) return out;
  const std::string& prefix = base.value().prefix;
  http_fetcher f(base.value().url, http_fetch_options{opts.timeout, opts.max_body});

  out.kv_event_sources = ask(f, prefix, "/kv_event_sources");
  if (out.kv_event_sources->status == 0) return out;
  if (needs_server_info(*out.kv_event_sources)) {
    out.server_info = ask(f, prefix, "/server_info");
    if (out.server_info->status == 0) return out;
    if (needs_server_info(*out.server_info)) {
      http_answer older = ask(f, prefix, "/get_server_info");
      // Keep the newer name's 404 unless the older one answered: the message then names it.
      const bool lost = older.status == 0;
      if (lost || !needs_server_info(older)) out.server_info = std::move(older);
      if (lost) return out;
    }
  }
  if (opts.want_model) out.models = ask(f, prefix, "/v1/models");
  return out;
}

outcome<discovered_engine> fetch_and_discover(std::string_view engine_url,
                                              const fetch_options& opts) {
  return discover(engine_url, fetch_answers(engine_url, opts));
}

}  // namespace kvrelay::discovery
