// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The dispatch between dialects, vLLM's /kv_event_sources shapes and /v1/models. SGLang's
// /server_info is in sglang_server_info.cpp; shared helpers in discovery_detail.cpp.
#include "actors/discovery/engine_discovery.hpp"

#include <exception>
#include <set>
#include <string_view>
#include <utility>

#include "actors/discovery/discovery_detail.hpp"
#include "net/http_url.hpp"

namespace kvrelay::discovery {

using detail::context;
using detail::json;
using detail::member;

const char* to_string(dialect d) noexcept { return d == dialect::sglang ? "sglang" : "vllm"; }

std::string quote(std::string_view body, std::size_t limit) {
  if (body.empty()) return "(empty body)";
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  const std::string_view shown = body.substr(0, limit);
  for (unsigned char c : shown) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (shown.size() < body.size()) out += "... (" + std::to_string(body.size()) + " bytes)";
  return out;
}

outcome<engine_base> parse_engine_url(std::string_view url) {
  std::string err;
  auto u = parse_http_url(url, &err, "engine URL");
  if (!u) return failure{ec::invalid_config, err, {}};
  if (url.find_first_of("?#") != std::string_view::npos) {
    return failure{
        ec::invalid_config,
        "invalid engine URL \"" + std::string(url) + "\": a base URL has no query or fragment",
        {}};
  }
  engine_base b;
  b.url = std::string(url);
  while (!b.url.empty() && b.url.back() == '/') b.url.pop_back();
  b.host = u->host;
  b.prefix = u->path;
  while (!b.prefix.empty() && b.prefix.back() == '/') b.prefix.pop_back();
  return b;
}

bool needs_server_info(const http_answer& a) { return a.status == 404 || a.status == 405; }

namespace {

bool is_2xx(int status) { return status >= 200 && status < 300; }

// The failure for an answer that is not a 2xx (ED2).
failure not_ok(const context& cx, const http_answer& a) {
  if (a.status == 0) {
    // Not a.error: it is "GET <url>: why", and the context names the request already.
    if (!a.url.empty() && !a.why.empty())
      return cx.fail(a.path, "no answer from " + a.url + ": " + a.why);
    return cx.fail(a.path, "no answer: " + a.error);
  }
  return cx.fail(a.path, "answered HTTP " + std::to_string(a.status) + ": " + quote(a.body));
}

outcome<json> body_json(const context& cx, const http_answer& a) {
  std::string why;
  auto v = detail::parse_json(a.body, &why);
  if (!v) {
    return cx.fail(a.path, "answered HTTP " + std::to_string(a.status) + " but the body is " + why +
                               ": " + quote(a.body));
  }
  return std::move(*v);
}

// One vLLM source (ED3, ED4). nullopt: the source is off.
// `rank` is the key of the rank-keyed shape; a list element without a rank field is numbered by
// its `position`.
outcome<std::optional<publisher>> read_source(const context& cx, const std::string& path,
                                              std::optional<int64_t> rank, int64_t position,
                                              const json& o, const std::string& where) {
  using result = std::optional<publisher>;
  if (!o.is_object()) return cx.fail(path, where + " is not an object: " + detail::show(o));
  if (!rank) {
    const json* r = member(o, "data_parallel_rank", "dataParallelRank");
    if (r == nullptr) r = member(o, "dp_rank");
    if (r == nullptr) r = member(o, "rank");
    if (r != nullptr && !r->is_null()) {
      rank = detail::as_rank(*r);
      if (!rank) return cx.fail(path, where + " has DP rank " + detail::show(*r));
    } else {
      rank = position;
    }
  }
  const std::string who = where + " (DP rank " + std::to_string(*rank) + ")";
  if (const json* p = member(o, "publisher"); p != nullptr && !p->is_null()) {
    if (!p->is_string()) return cx.fail(path, who + " has publisher " + detail::show(*p));
    const auto& name = p->get_ref<const std::string&>();
    if (name == "null") return result{};
    if (name != "zmq") {
      return cx.fail(path, who + " uses publisher " + quote(name, 40) + "; only zmq is dialled");
    }
  }
  if (const json* t = member(o, "transport"); t != nullptr && !t->is_null()) {
    if (!t->is_string() || (!t->get_ref<const std::string&>().empty() && *t != "zmq")) {
      return cx.fail(path, who + " uses transport " + detail::show(*t) + "; only zmq is dialled");
    }
  }
  if (const json* e = member(o, "enable_kv_cache_events", "enableKvCacheEvents");
      e != nullptr && !e->is_null()) {
    if (!e->is_boolean()) {
      return cx.fail(path, who + " has enable_kv_cache_events " + detail::show(*e));
    }
    if (!e->get<bool>()) return result{};
  }

  publisher pub;
  pub.origin = "GET " + cx.base.prefix + path + " " + where;
  const json* ep = member(o, "endpoint");
  const json* addr = member(o, "endpoint_addr", "endpointAddr");
  if (ep != nullptr && ep->is_string() && !ep->get_ref<const std::string&>().empty()) {
    auto d = detail::dialable(cx, path, who + " endpoint", ep->get_ref<const std::string&>());
    if (!d) return d.error();
    pub.endpoint = std::move(d.value());
  } else if (addr != nullptr && addr->is_object()) {
    const json* host = member(*addr, "host");
    const json* port = member(*addr, "port");
    const json* proto = member(*addr, "protocol");
    std::optional<int64_t> p = port != nullptr ? detail::as_int(*port) : std::nullopt;
    if (host == nullptr || !host->is_string() || !p) {
      return cx.fail(path, who + " has endpoint_addr " + detail::show(*addr));
    }
    if (proto != nullptr && !proto->is_null() &&
        !(proto->is_string() &&
          (proto->get_ref<const std::string&>().empty() || *proto == "tcp"))) {
      return cx.fail(path, who + " endpoint_addr protocol " + detail::show(*proto) +
                               " is not tcp: discovery dials TCP only");
    }
    auto d = detail::dialable(cx, path, who + " endpoint", host->get_ref<const std::string&>(), *p);
    if (!d) return d.error();
    pub.endpoint = std::move(d.value());
  } else {
    return cx.fail(path, who + " has no endpoint: " + detail::show(o));
  }
  if (const json* r = member(o, "replay_endpoint", "replayEndpoint");
      r != nullptr && !r->is_null()) {
    if (!r->is_string()) return cx.fail(path, who + " has replay_endpoint " + detail::show(*r));
    if (!r->get_ref<const std::string&>().empty()) {
      auto d =
          detail::dialable(cx, path, who + " replay endpoint", r->get_ref<const std::string&>());
      if (!d) return d.error();
      pub.replay_endpoint = std::move(d.value());
    }
  }
  if (const json* t = member(o, "topic"); t != nullptr && !t->is_null()) {
    if (!t->is_string()) return cx.fail(path, who + " has topic " + detail::show(*t));
    pub.topic = t->get<std::string>();
  }
  pub.dp_rank = *rank;
  return result{std::move(pub)};
}

// A 2xx /kv_event_sources (ED3, ED4, ED9).
outcome<std::vector<publisher>> parse_kv_event_sources(const context& cx, const http_answer& a) {
  auto doc = body_json(cx, a);
  if (!doc) return doc.error();
  const json& v = doc.value();

  // Normalise the three shapes to (rank or none, element, where).
  struct item {
    std::optional<int64_t> rank;
    const json* value;
    std::string where;
  };
  std::vector<item> items;
  const json* list = nullptr;
  std::string list_name;
  if (v.is_array()) {
    list = &v;
  } else if (v.is_object() && member(v, "sources") != nullptr) {
    list = member(v, "sources");
    list_name = "sources";
    if (!list->is_array()) {
      return cx.fail(a.path, "\"sources\" is not a list: " + quote(a.body));
    }
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      auto rank = detail::rank_from_key(it.key());
      if (!rank) {
        return cx.fail(a.path,
                       "a JSON object that is neither keyed by DP rank nor "
                       "{\"sources\": [...]}: " +
                           quote(a.body));
      }
      items.push_back({rank, &it.value(), "[\"" + it.key() + "\"]"});
      if (items.size() > detail::kMaxPublishers) break;
    }
  } else {
    return cx.fail(a.path, "neither a JSON object nor a list: " + quote(a.body));
  }
  if (list != nullptr) {
    for (std::size_t i = 0; i < list->size() && items.size() <= detail::kMaxPublishers; ++i) {
      items.push_back({std::nullopt, &(*list)[i], list_name + "[" + std::to_string(i) + "]"});
    }
  }
  if (items.size() > detail::kMaxPublishers) {
    return cx.fail(a.path, "more than " + std::to_string(detail::kMaxPublishers) +
                               " sources; at most that many are supported");
  }

  std::vector<publisher> pubs;
  std::vector<std::string> off;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto s = read_source(cx, a.path, items[i].rank, static_cast<int64_t>(i), *items[i].value,
                         items[i].where);
    if (!s) return s.error();
    if (s.value())
      pubs.push_back(std::move(*s.value()));
    else
      off.push_back(items[i].where);
  }
  if (pubs.empty()) {
    return detail::failed("KV events are disabled on the engine " + cx.base.url + " (GET " +
                          cx.base.prefix + a.path + " " +
                          (items.empty() ? "lists no publisher: " + quote(a.body)
                                         : "lists only publishers that are off: " + quote(a.body)) +
                          ")");
  }
  for (const auto& w : off) {
    cx.note("GET " + cx.base.prefix + a.path + " " + w + " is off; not subscribed");
  }
  return pubs;
}

// A /v1/models answer (ED10).
std::optional<failure> parse_models(const context& cx, const http_answer& a,
                                    discovered_engine& out) {
  if (a.status == 401 || a.status == 403) {
    return cx.fail(a.path, "answered HTTP " + std::to_string(a.status) +
                               ": the engine wants an API key for /v1/*; configure the model id "
                               "(it cannot be discovered): " +
                               quote(a.body));
  }
  if (!is_2xx(a.status)) return not_ok(cx, a);
  auto doc = body_json(cx, a);
  if (!doc) return doc.error();
  const json* data = member(doc.value(), "data");
  if (data == nullptr || !data->is_array()) {
    return cx.fail(a.path, "not an OpenAI model list ({\"data\": [...]}): " + quote(a.body));
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < data->size() && i < 4096; ++i) {
    const json& m = (*data)[i];
    const json* id = member(m, "id");
    if (!m.is_object() || id == nullptr || !id->is_string() ||
        id->get_ref<const std::string&>().empty()) {
      return cx.fail(a.path, "data[" + std::to_string(i) + "] has no model id: " + detail::show(m));
    }
    const json* parent = member(m, "parent");
    if (parent != nullptr && parent->is_string() && !parent->get_ref<const std::string&>().empty())
      continue;  // a LoRA adapter of a served model
    if (seen.insert(id->get<std::string>()).second) out.model_ids.push_back(id->get<std::string>());
  }
  if (out.model_ids.empty()) return cx.fail(a.path, "lists no served model: " + quote(a.body));
  out.model_id = out.model_ids.front();
  return std::nullopt;
}

outcome<discovered_engine> discover_impl(std::string_view engine_url, const engine_answers& a) {
  auto base = parse_engine_url(engine_url);
  if (!base) return base.error();
  discovered_engine out;
  out.url = base.value().url;
  out.metrics_url = out.url + "/metrics";
  context cx{base.value(), &out.notes};

  const auto& kv = a.kv_event_sources;
  std::string path;
  if (kv && !needs_server_info(*kv)) {
    if (!is_2xx(kv->status)) return not_ok(cx, *kv);
    auto pubs = parse_kv_event_sources(cx, *kv);
    if (!pubs) return pubs.error();
    out.dialect = dialect::vllm;
    out.publishers = std::move(pubs.value());
    path = kv->path;
  } else if (a.server_info) {
    const auto& si = *a.server_info;
    if (needs_server_info(si)) {
      return detail::failed("engine " + out.url + " has neither " + cx.base.prefix +
                            "/kv_event_sources (vLLM, vllm-project/vllm #55844) nor " +
                            cx.base.prefix + si.path +
                            " (SGLang): not an engine whose KV-event publishers can be discovered "
                            "(configure the endpoint explicitly)");
    }
    if (!is_2xx(si.status)) return not_ok(cx, si);
    auto pubs = detail::parse_server_info(cx, si);
    if (!pubs) return pubs.error();
    out.dialect = dialect::sglang;
    out.publishers = std::move(pubs.value());
    path = si.path;
  } else if (kv) {
    return cx.fail(kv->path, "answered HTTP " + std::to_string(kv->status) +
                                 " (no such route) and /server_info was not asked");
  } else {
    return detail::failed("engine " + out.url +
                          ": neither /kv_event_sources nor /server_info was asked");
  }
  if (auto f = detail::check_and_sort(cx, path, out.publishers)) return *f;
  out.hash_scheme = to_string(out.dialect);
  if (a.models) {
    if (auto f = parse_models(cx, *a.models, out)) return *f;
  }
  return out;
}

}  // namespace

outcome<discovered_engine> discover(std::string_view engine_url, const engine_answers& a) {
  try {
    return discover_impl(engine_url, a);
  } catch (const std::exception& e) {
    // Every access above is type-checked first; this is the net under ED11's "never throws".
    return detail::failed("engine " + std::string(engine_url) +
                          ": answer not understood: " + e.what());
  }
}

}  // namespace kvrelay::discovery
