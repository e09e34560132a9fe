// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// SGLang's /server_info: the `kv_events` descriptor (sglang #25844), its per-rank `publishers`
// list (#38032), and the raw `kv_events_config` string before either (rules 5, 7 and 9 of
// engine_discovery.hpp).
#include <utility>

#include "actors/discovery/discovery_detail.hpp"

namespace kvrelay::discovery::detail {
namespace {

// SGLang's KVEventsConfig as its CLI JSON gives it; the defaults are SGLang's own.
struct raw_config {
  std::string publisher = "null";
  std::string endpoint = "tcp://*:5557";
  std::string replay;  // "" = none
  std::string topic;
};

// nullopt with *why empty: unset. nullopt with *why: present but not understood.
std::optional<raw_config> read_raw(const json* v, std::string* why) {
  why->clear();
  if (v == nullptr || v->is_null()) return std::nullopt;
  json parsed;
  const json* o = v;
  if (v->is_string()) {
    const auto& text = v->get_ref<const std::string&>();
    if (text.empty()) return std::nullopt;
    auto p = parse_json(text, why);
    if (!p) return std::nullopt;
    parsed = std::move(*p);
    o = &parsed;
  }
  if (!o->is_object()) {
    *why = "is not a JSON object: " + show(*v);
    return std::nullopt;
  }
  raw_config c;
  auto text = [&](const char* key, std::string& out) {
    const json* f = member(*o, key);
    if (f == nullptr || f->is_null()) return true;
    if (!f->is_string()) return false;
    out = f->get<std::string>();
    return true;
  };
  if (!text("publisher", c.publisher) || !text("endpoint", c.endpoint) ||
      !text("replay_endpoint", c.replay) || !text("topic", c.topic)) {
    *why = "has a field that is not a string: " + show(*v);
    return std::nullopt;
  }
  return c;
}

failure disabled(const context& cx, std::string_view path, const std::string& why) {
  return failed("KV events are disabled on the engine " + cx.base.url + " (GET " + cx.base.prefix +
                std::string(path) + " " + why + ")");
}

// An optional positive integer field; *bad is set when it is present but not one.
std::optional<int64_t> positive(const json& o, const char* key, bool* bad) {
  const json* f = member(o, key);
  if (f == nullptr || f->is_null()) return std::nullopt;
  auto v = as_int(*f);
  if (!v || *v <= 0) {
    *bad = true;
    return std::nullopt;
  }
  return v;
}

// What both the descriptor and the raw fallback boil down to.
struct descriptor {
  std::string host;                  // endpoint_host as given (may be a wildcard)
  std::optional<int64_t> port_base;  // endpoint_port_base
  std::string topic;
  std::optional<int64_t> block_size;
  int64_t dp_size = 1;
  const json* list = nullptr;  // kv_events.publishers, when non-empty
  std::string origin;          // "kv_events" or "kv_events_config"
};

// The block size SGLang emits at when only the top level says: page_size times dcp_size (#35298).
std::optional<int64_t> page_block_size(const json& root) {
  bool bad = false;
  auto page = positive(root, "page_size", &bad);
  auto dcp = positive(root, "dcp_size", &bad);
  if (!page) return std::nullopt;
  return *page * (dcp && *dcp > 1 ? *dcp : 1);
}

outcome<std::vector<publisher>> build(const context& cx, const std::string& path,
                                      const descriptor& d, const json* raw_json) {
  std::vector<publisher> pubs;
  const std::string from = "GET " + cx.base.prefix + path + " ";
  bool arithmetic = true;  // every live port is base + rank (ED7's condition for replay)
  if (d.list != nullptr) {
    if (d.list->size() > kMaxPublishers) {
      return cx.fail(path, "kv_events.publishers has more than " + std::to_string(kMaxPublishers) +
                               " entries");
    }
    for (std::size_t i = 0; i < d.list->size(); ++i) {
      const json& e = (*d.list)[i];
      const std::string where = "kv_events.publishers[" + std::to_string(i) + "]";
      const json* r = e.is_object() ? member(e, "dp_rank") : nullptr;
      const json* ep = e.is_object() ? member(e, "endpoint") : nullptr;
      std::optional<int64_t> rank = r != nullptr ? as_rank(*r) : std::nullopt;
      if (!rank || ep == nullptr || !ep->is_string()) {
        return cx.fail(path, where + " is not {dp_rank, endpoint}: " + show(e));
      }
      if (*rank >= d.dp_size) {
        return cx.fail(path, where + " has DP rank " + std::to_string(*rank) + " but dp_size is " +
                                 std::to_string(d.dp_size));
      }
      auto dial = dialable(cx, path, where + " endpoint", ep->get_ref<const std::string&>());
      if (!dial) return dial.error();
      std::string why;
      auto parts = split_tcp(dial.value(), &why);
      if (!d.port_base || !parts || parts->port_text != std::to_string(*d.port_base + *rank)) {
        arithmetic = false;
      }
      publisher p;
      p.dp_rank = *rank;
      p.endpoint = std::move(dial.value());
      p.origin = from + where;
      pubs.push_back(std::move(p));
    }
    if (static_cast<int64_t>(pubs.size()) < d.dp_size) {
      cx.note(from + "kv_events.publishers lists " + std::to_string(pubs.size()) + " of dp_size " +
              std::to_string(d.dp_size) + " ranks; only those are subscribed");
    }
  } else {
    if (!d.port_base) return cx.fail(path, d.origin + " has no endpoint_port_base");
    if (*d.port_base < 1 || *d.port_base + d.dp_size - 1 > 65535) {
      return cx.fail(path, d.origin + " port base " + std::to_string(*d.port_base) +
                               " with dp_size " + std::to_string(d.dp_size) +
                               " runs outside 1..65535");
    }
    for (int64_t r = 0; r < d.dp_size; ++r) {
      auto dial = dialable(cx, path, d.origin + " endpoint", d.host, *d.port_base + r);
      if (!dial) return dial.error();
      publisher p;
      p.dp_rank = r;
      p.endpoint = std::move(dial.value());
      p.origin = from + d.origin + " (port " + std::to_string(*d.port_base) + " + rank " +
                 std::to_string(r) + ")";
      pubs.push_back(std::move(p));
    }
  }
  for (auto& p : pubs) {
    p.topic = d.topic;
    p.block_size = d.block_size;
  }

  // Replay (ED7): from the raw config, offset by rank like the live port.
  std::string why;
  auto raw = read_raw(raw_json, &why);
  if (!raw || raw->replay.empty()) return pubs;
  auto parts = split_tcp(raw->replay, &why);
  std::optional<int64_t> base = parts ? parse_port(parts->port_text, &why) : std::nullopt;
  if (!base) {
    cx.note(from + "kv_events_config replay endpoint " + quote(raw->replay, 120) + " " + why +
            "; replay is off");
    return pubs;
  }
  if (!arithmetic) {
    cx.note(from +
            "kv_events.publishers does not follow endpoint_port_base + rank, so the "
            "ranks' replay ports are unknown; replay is off");
    return pubs;
  }
  if (*base + pubs.back().dp_rank > 65535) {
    cx.note(from + "kv_events_config replay ports run past 65535; replay is off");
    return pubs;
  }
  for (auto& p : pubs) {
    std::string host = parts->host;
    if (is_wildcard_host(host)) {
      auto live = split_tcp(p.endpoint, &why);  // the rank's own (already dialable) host
      host = live ? live->host : cx.base.host;
    }
    auto dial = dialable(cx, path, "kv_events_config replay endpoint", host, *base + p.dp_rank);
    if (!dial) return dial.error();
    p.replay_endpoint = std::move(dial.value());
  }
  return pubs;
}

}  // namespace

outcome<std::vector<publisher>> parse_server_info(const context& cx, const http_answer& a) {
  std::string why;
  auto doc = parse_json(a.body, &why);
  if (!doc || !doc->is_object()) {
    return cx.fail(a.path, "answered HTTP " + std::to_string(a.status) + " but the body is " +
                               (doc ? std::string("not a JSON object") : why) + ": " +
                               quote(a.body));
  }
  const json& root = *doc;
  const json* kv = member(root, "kv_events");
  const json* raw_json = member(root, "kv_events_config");
  descriptor d;
  bool bad = false;

  if (kv != nullptr && kv->is_null()) {
    // SGLang says null both when events are off and when its config is unusable; say which.
    auto raw = read_raw(raw_json, &why);
    std::string hint;
    if (raw && raw->publisher == "zmq") {
      hint = ", although kv_events_config asks for zmq at " + quote(raw->endpoint, 120) +
             ": SGLang advertises only a routable tcp:// endpoint with a positive page size";
    }
    return disabled(cx, a.path, "has kv_events: null" + hint);
  }
  if (kv != nullptr) {
    if (!kv->is_object()) return cx.fail(a.path, "kv_events is not an object: " + show(*kv));
    const json* pub = member(*kv, "publisher");
    if (pub != nullptr && !pub->is_null()) {
      if (*pub == "null") return disabled(cx, a.path, "has kv_events.publisher \"null\"");
      if (*pub != "zmq") {
        return cx.fail(a.path, "kv_events.publisher " + show(*pub) + " is not zmq");
      }
    }
    const json* host = member(*kv, "endpoint_host");
    const json* base = member(*kv, "endpoint_port_base");
    const json* topic = member(*kv, "topic");
    const json* list = member(*kv, "publishers");
    if (host != nullptr && !host->is_null()) {
      if (!host->is_string()) return cx.fail(a.path, "kv_events.endpoint_host is " + show(*host));
      d.host = host->get<std::string>();
    }
    if (base != nullptr && !base->is_null()) {
      d.port_base = as_int(*base);
      if (!d.port_base) {
        return cx.fail(a.path, "kv_events.endpoint_port_base is " + show(*base));
      }
    }
    if (topic != nullptr && !topic->is_null()) {
      if (!topic->is_string()) return cx.fail(a.path, "kv_events.topic is " + show(*topic));
      d.topic = topic->get<std::string>();
    }
    d.block_size = positive(*kv, "block_size", &bad);
    if (bad) return cx.fail(a.path, "kv_events.block_size is " + show(*member(*kv, "block_size")));
    if (!d.block_size) d.block_size = page_block_size(root);
    auto dp = positive(*kv, "dp_size", &bad);
    if (!dp && !bad) dp = positive(root, "dp_size", &bad);
    if (bad) return cx.fail(a.path, "dp_size is not a positive integer: " + quote(a.body));
    d.dp_size = dp.value_or(1);
    if (list != nullptr && !list->is_null()) {
      if (!list->is_array()) return cx.fail(a.path, "kv_events.publishers is " + show(*list));
      if (!list->empty()) d.list = list;
    }
    d.origin = "kv_events";
  } else if (raw_json != nullptr) {
    // SGLang before #25844: only the raw CLI JSON, with dp_size and page_size beside it.
    auto raw = read_raw(raw_json, &why);
    if (!raw && !why.empty()) return cx.fail(a.path, "kv_events_config " + why);
    if (!raw) return disabled(cx, a.path, "has no kv_events_config");
    if (raw->publisher == "null") {
      return disabled(cx, a.path, "has kv_events_config with publisher \"null\"");
    }
    if (raw->publisher != "zmq") {
      return cx.fail(a.path,
                     "kv_events_config publisher " + quote(raw->publisher, 40) + " is not zmq");
    }
    auto parts = split_tcp(raw->endpoint, &why);
    std::optional<int64_t> port = parts ? parse_port(parts->port_text, &why) : std::nullopt;
    if (!port) {
      return cx.fail(a.path, "kv_events_config endpoint " + quote(raw->endpoint, 120) + " " + why);
    }
    d.host = parts->host;
    d.port_base = port;
    d.topic = raw->topic;
    d.block_size = page_block_size(root);
    auto dp = positive(root, "dp_size", &bad);
    if (bad) return cx.fail(a.path, "dp_size is not a positive integer: " + quote(a.body));
    d.dp_size = dp.value_or(1);
    d.origin = "kv_events_config";
  } else if (member(root, "vllm_config") != nullptr) {
    return cx.fail(a.path,
                   "this is vLLM's dev-mode /server_info and /kv_event_sources does not "
                   "exist: this vLLM predates vllm-project/vllm #55844 (configure the "
                   "endpoint explicitly)");
  } else {
    return cx.fail(a.path,
                   "has neither kv_events nor kv_events_config, so it is not SGLang's "
                   "/server_info: " +
                       quote(a.body));
  }
  if (d.dp_size > static_cast<int64_t>(kMaxPublishers)) {
    return cx.fail(a.path, "dp_size " + std::to_string(d.dp_size) + " is over " +
                               std::to_string(kMaxPublishers));
  }
  return build(cx, a.path, d, raw_json);
}

}  // namespace kvrelay::discovery::detail
