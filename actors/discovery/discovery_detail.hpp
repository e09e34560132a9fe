// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Internals shared by the discovery parser's translation units (engine_discovery.cpp for the
// dispatch, vLLM and /v1/models; sglang_server_info.cpp for SGLang). Not for use outside
// actors/discovery: it pulls in nlohmann/json, which the public header keeps out.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/discovery/engine_discovery.hpp"
#include "base/error.hpp"

namespace kvrelay::discovery::detail {

using json = nlohmann::json;

/// Deeper documents are refused before parsing: no engine nests more than a few levels, and a
/// bounded depth bounds the parser's and the destructor's work on hostile input.
constexpr int kMaxJsonDepth = 32;
/// More publishers than this is not an engine we can serve one pipeline each (DESIGN: bounded).
constexpr std::size_t kMaxPublishers = 1024;

/// A discovery_failed failure with this context.
failure failed(std::string context);

/// What the parse of one engine needs to know about the URL it was given.
struct context {
  engine_base base;
  std::vector<std::string>* notes = nullptr;  // where operator notes go

  /// "engine http://h:8000: GET /kv_event_sources: <what>"
  failure fail(std::string_view path, std::string what) const;
  void note(std::string text) const;
};

/// Parses `body` as JSON; nullopt (and *why) when it is not, or nests deeper than kMaxJsonDepth.
std::optional<json> parse_json(std::string_view body, std::string* why);

/// An integer that fits int64 (JSON integers only; 5557.0 and "5557" are not).
std::optional<int64_t> as_int(const json& v);
/// A rank given as a JSON integer or as a decimal string (object keys are strings).
std::optional<int64_t> as_rank(const json& v);
std::optional<int64_t> rank_from_key(std::string_view key);

/// The member `key` of object `o`, or nullptr when absent. (`o` must be an object.)
const json* member(const json& o, std::string_view key);
/// The first present member of the given spellings (snake_case, then protobuf's lowerCamelCase).
const json* member(const json& o, std::string_view key, std::string_view alt);

/// A JSON value as JSON text for messages, ASCII, at most 120 bytes and "...".
std::string show(const json& v);

/// Host/port of a tcp:// endpoint as an engine wrote it. `host` is unbracketed; `port_text` is
/// the text after the last ':' (validated by the caller, so the message can say why).
struct tcp_parts {
  std::string host;
  std::string port_text;
};
/// nullopt (and *why) for anything but tcp://host:port / tcp://[v6]:port.
std::optional<tcp_parts> split_tcp(std::string_view endpoint, std::string* why);

/// True for a host a publisher binds rather than one it can be dialled at.
bool is_wildcard_host(std::string_view host);
bool is_loopback_host(std::string_view host);

/// A port 1..65535 from text; nullopt (and *why) otherwise, with port 0 and '*' called out as a
/// bind request rather than a bound port.
std::optional<int64_t> parse_port(std::string_view text, std::string* why);

/// tcp://host:port with an IPv6 host bracketed.
std::string tcp_endpoint(std::string_view host, int64_t port);

/// A dialable endpoint from what the engine advertised (engine_discovery.hpp ED6): tcp only,
/// a wildcard host replaced by the URL's host, port 1..65535. `what` names it in messages.
outcome<std::string> dialable(const context& cx, std::string_view path, std::string_view what,
                              std::string_view endpoint);
/// The same from separate parts (SGLang's endpoint_host + port, gRPC's endpoint_addr).
outcome<std::string> dialable(const context& cx, std::string_view path, std::string_view what,
                              std::string_view host, int64_t port);

/// Ranks distinct, endpoints distinct, at most kMaxPublishers; sorts by rank.
std::optional<failure> check_and_sort(const context& cx, std::string_view path,
                                      std::vector<publisher>& pubs);

/// The SGLang half (sglang_server_info.cpp): a 2xx /server_info body.
outcome<std::vector<publisher>> parse_server_info(const context& cx, const http_answer& a);

}  // namespace kvrelay::discovery::detail
