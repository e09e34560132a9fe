// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Engine discovery, the pure half (the response shapes and their sources are in
// docs/discovery.md). Given the engine URL and the raw HTTP answers of its discovery endpoints,
// says where its KV-event publishers are, which dialect (and so hash scheme) it speaks, its
// metrics URL and its served model. No sockets, no clock, no CAF: engine_fetch.hpp asks the
// questions, this file reads the answers, and tests feed it answers directly.
//
// Rules:
//  ED1. The engine URL is `http://host[:port][/prefix]`, without query or fragment. Every path
//     below is asked under the prefix; the metrics URL is `<url>/metrics` (trailing '/' dropped).
//  ED2. Dialect: a 2xx `/kv_event_sources` is vLLM (hash scheme "vllm"). A 404 or 405 there (the
//     route does not exist: SGLang, or vLLM before #55844) hands over to `/server_info`, whose
//     2xx answer with `kv_events` or `kv_events_config` is SGLang ("sglang"). Any other status,
//     a transport error, or a 2xx that is neither fails; so does a `/server_info` that is vLLM's
//     dev-mode dump (`vllm_config`: a vLLM too old to say where its publishers are).
//  ED3. vLLM bodies, all accepted: an object keyed by decimal DP rank whose values are publisher
//     configs (#55844 as merged); `{"sources": [...]}`; a bare `[...]`. Elements carry the rank
//     as `data_parallel_rank` (or `dp_rank`, `rank`; missing = position in the list), `endpoint`
//     (or gRPC's `endpoint_addr {host, port, protocol}`), `replay_endpoint` (null or "" = none),
//     `topic` (null/absent = ""). Protobuf's lowerCamelCase JSON names are accepted too.
//  ED4. A source whose `publisher` is "null" or whose `enable_kv_cache_events` is false is off and
//     skipped (with a note when others are on). `publisher` or `transport` other than "zmq"
//     fails. When no source is on, the result is the events-disabled error (ED9).
//  ED5. SGLang: the `kv_events` descriptor gives `endpoint_host`, `endpoint_port_base`, `topic`,
//     `block_size`, `dp_size`; rank r is at base + r, unless `kv_events.publishers` (#38032)
//     lists `{dp_rank, endpoint}` per rank, which then wins (fewer entries than dp_size: only
//     those, with a note). `kv_events: null` is the events-disabled error. Without `kv_events`
//     (SGLang before #25844) the raw `kv_events_config` JSON string is read instead, with
//     `dp_size` and `page_size` (times `dcp_size` when > 1, as #35298 corrects) from the top
//     level; its publisher defaults to "null", as SGLang's does.
//  ED6. Endpoints: only `tcp://`. A wildcard host (`*`, `0.0.0.0`, `::`, `[::]`, empty) becomes the
//     URL's host; an IPv6 host comes out bracketed (`tcp://[::1]:5557`). Port 0 or `*` fails:
//     that is a bind request, not the port the engine bound. A loopback endpoint behind a
//     non-loopback URL is kept, with a note (reachable only from the engine's host).
//  ED7. Replay: vLLM's per source as advertised. SGLang's descriptor has none; it is taken from the
//     raw `kv_events_config` and offset by the rank like the live port (SGLang does both), but
//     only while the live ports follow base + rank; otherwise it is left off with a note.
//  ED8. Publishers: at least one, at most 1024, ranks distinct, endpoints distinct; sorted by rank.
//  ED9. Events disabled on the engine fails with a message starting "KV events are disabled on the
//     engine", so an operator can tell it from a malformed answer.
//  ED10. `/v1/models` (when asked): 2xx `{"data": [{"id": ...}, ...]}`; entries with a non-null
//     `parent` are LoRA adapters and skipped; the first remaining id is the model. 401/403 says
//     the engine wants an API key. Not asked = no model (the caller configured one).
//  ED11. Every failure is `ec::discovery_failed` (an unusable engine URL: `ec::invalid_config`),
//     names the engine URL and the path, and quotes the first 256 bytes of what arrived (control
//     and non-ASCII bytes escaped). JSON nesting deeper than 32 is refused unparsed. Nothing
//     here throws.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace kvrelay::discovery {

enum class dialect : uint8_t { vllm, sglang };
/// "vllm" / "sglang": also the hash scheme the engine's block hashes follow.
const char* to_string(dialect d) noexcept;

/// One KV-event publisher (one DP rank): what an ingress pipeline needs to subscribe.
struct publisher {
  int64_t dp_rank = 0;
  std::string endpoint;               // tcp://host:port a SUB can connect to
  std::string replay_endpoint;        // the rank's replay ROUTER; "" = none advertised
  std::string topic;                  // SUB prefix; "" = every topic
  std::optional<int64_t> block_size;  // tokens per block, where the engine states it (SGLang)
  std::string origin;                 // where it came from, e.g. `GET /kv_event_sources ["1"]`

  bool operator==(const publisher& o) const {
    return dp_rank == o.dp_rank && endpoint == o.endpoint && replay_endpoint == o.replay_endpoint &&
           topic == o.topic && block_size == o.block_size && origin == o.origin;
  }
};

/// Everything one engine said about itself.
struct discovered_engine {
  std::string url;  // the engine URL, trailing '/' dropped
  discovery::dialect dialect = discovery::dialect::vllm;
  std::string hash_scheme;             // to_string(dialect)
  std::vector<publisher> publishers;   // ED8
  std::string metrics_url;             // url + "/metrics"
  std::string model_id;                // first served model; "" when /v1/models was not asked
  std::vector<std::string> model_ids;  // every served model name (aliases), model_id first
  std::vector<std::string> notes;      // what an operator should know; empty when all is plain
};

/// One raw HTTP answer as the fetch got it.
struct http_answer {
  std::string path;  // what was asked, relative to the URL's prefix, e.g. "/server_info"
  int status = 0;    // 0 = no response at all (then `error` says why)
  std::string body;
  std::string error;  // transport error when status == 0
  // Its parts, so the message can name the request once (the context names it already). Empty
  // when no request was made, or in answers made by hand: the `{}` lets tests and the fuzzer
  // leave them out of their braces under -Wmissing-field-initializers.
  std::string url{};  // the URL asked
  std::string why{};  // the error without its request
};

/// The answers the fetch collected; nullopt = not asked.
struct engine_answers {
  std::optional<http_answer> kv_event_sources;  // GET /kv_event_sources
  std::optional<http_answer> server_info;       // GET /server_info (or /get_server_info)
  std::optional<http_answer> models;            // GET /v1/models
};

/// The engine URL taken apart (ED1).
struct engine_base {
  std::string url;     // as given, trailing '/' dropped
  std::string host;    // unbracketed
  std::string prefix;  // "" or "/path" (no trailing '/'); discovery paths go under it
};
outcome<engine_base> parse_engine_url(std::string_view url);

/// Rule 2's hand-over: whether this /kv_event_sources answer means /server_info must be asked.
bool needs_server_info(const http_answer& kv_event_sources);

/// Reads the answers (rules 2-11).
outcome<discovered_engine> discover(std::string_view engine_url, const engine_answers& answers);

/// At most `limit` bytes of `body`, quoted, control and non-ASCII bytes as \xNN, with the total
/// size when cut: "\"{\\\"a\\\": 1\"" or "\"abc\"... (1234 bytes)" or "(empty body)".
std::string quote(std::string_view body, std::size_t limit = 256);

}  // namespace kvrelay::discovery
