// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "actors/discovery/discovery_merge.hpp"

#include <algorithm>
#include <charconv>
#include <map>

namespace kvrelay::discovery {

namespace {

std::string quoted(const std::string& v) { return "\"" + v + "\""; }

std::string discovered_origin(const std::string& what) { return "discovered: " + what; }

failure fail(std::string context) { return failure{ec::discovery_failed, std::move(context), {}}; }

struct merger {
  const engine_request& req;
  const discovered_engine& found;
  discovered_target out;

  // DM1: the explicit value when there is one (a conflict when the engine disagrees), else the
  // engine's. `engine_value` nullopt = the engine did not say.
  discovery_setting pick(const std::string& what, const std::optional<given>& g,
                         const std::optional<discovery_setting>& engine_value,
                         bool agrees_anyway = false) {
    if (!g) return engine_value.value_or(discovery_setting{"", "default"});
    discovery_setting s{g->value, explicit_origin(*g)};
    // An explicit "" turns a thing off (replay, scraping) or widens it (every topic): a choice,
    // not a contradiction.
    if (engine_value && engine_value->value != g->value && !g->value.empty() && !agrees_anyway)
      out.conflicts.push_back("engine " + req.url + ": " + what + " " + quoted(g->value) + " (" +
                              s.origin + ") differs from the engine's " +
                              quoted(engine_value->value) + " (" + engine_value->origin +
                              "); the explicit value wins");
    return s;
  }

  // DM3: rank r's explicit endpoint.
  std::optional<std::string> ranked(const given& base, int64_t rank) const {
    if (rank == 0) return base.value;
    if (!req.rank_endpoint) return std::nullopt;
    return req.rank_endpoint(base.value, rank);
  }

  std::optional<discovery_setting> advertised_setting(const publisher* p,
                                                      const std::string& value) const {
    if (!p) return std::nullopt;
    return discovery_setting{value, discovered_origin(p->origin)};
  }

  void left_out(int64_t rank, const std::string& why) {
    out.conflicts.push_back("engine " + req.url + ": rank " + std::to_string(rank) +
                            " left out: " + why);
  }

  // One rank (DM2, DM3): nullopt when it cannot be subscribed.
  std::optional<discovered_rank> rank(int64_t r, const publisher* p) {
    discovered_rank out_rank;
    out_rank.dp_rank = r;
    if (req.endpoint) {
      auto ep = ranked(*req.endpoint, r);
      if (!ep) {
        left_out(r, "its endpoint cannot be derived from " + quoted(req.endpoint->value));
        return std::nullopt;
      }
      given g{*ep, req.endpoint->where};
      out_rank.endpoint = pick("rank " + std::to_string(r) + " endpoint", g,
                               advertised_setting(p, p ? p->endpoint : ""));
    } else if (p) {
      out_rank.endpoint = {p->endpoint, discovered_origin(p->origin)};
    } else {
      left_out(r, "the engine does not advertise it and no endpoint is configured");
      return std::nullopt;
    }
    if (req.replay_endpoint) {
      std::optional<given> g;
      if (req.replay_endpoint->value.empty()) {
        g = given{"", req.replay_endpoint->where};  // "" = replay off, for every rank
      } else if (auto ep = ranked(*req.replay_endpoint, r)) {
        g = given{*ep, req.replay_endpoint->where};
      } else {
        left_out(r, "its replay endpoint cannot be derived from " +
                        quoted(req.replay_endpoint->value));
        return std::nullopt;
      }
      out_rank.replay_endpoint = pick("rank " + std::to_string(r) + " replay endpoint", g,
                                      advertised_setting(p, p ? p->replay_endpoint : ""));
    } else if (p && !p->replay_endpoint.empty()) {
      out_rank.replay_endpoint = {p->replay_endpoint, discovered_origin(p->origin)};
    } else {
      out_rank.replay_endpoint = {"", p ? "default (the engine advertises no replay endpoint)"
                                        : "default (no replay endpoint configured)"};
    }
    out_rank.topic = pick("rank " + std::to_string(r) + " topic", req.topic,
                          advertised_setting(p, p ? p->topic : ""));
    if (!req.topic && !p) out_rank.topic = {"", "default (every topic)"};
    if (p) out_rank.block_size = p->block_size;
    return out_rank;
  }

  outcome<discovered_target> run() {
    out.url = found.url.empty() ? req.url : found.url;
    out.dialect = to_string(found.dialect);
    out.notes = found.notes;
    std::map<int64_t, const publisher*> advertised;
    for (const auto& p : found.publishers) advertised.emplace(p.dp_rank, &p);

    // DM2: the rank set.
    std::vector<int64_t> ranks;
    const std::string count = std::to_string(found.publishers.size());
    const discovery_setting advertised_count{
        count, discovered_origin(count + " publisher(s) at " +
                                 (found.publishers.empty() ? std::string("the engine")
                                                           : found.publishers.front().origin))};
    if (req.dp_size) {
      int64_t n = 0;
      const auto& t = req.dp_size->value;
      auto [end, err] = std::from_chars(t.data(), t.data() + t.size(), n);
      if (err != std::errc() || end != t.data() + t.size() || n < 1)
        return fail("engine " + req.url + ": dp_size " + quoted(t) + " is not a rank count");
      for (int64_t r = 0; r < n; ++r) ranks.push_back(r);
      for (const auto& [r, p] : advertised)
        if (r >= n) left_out(r, "beyond the configured dp_size " + t);
    } else {
      for (const auto& [r, p] : advertised) ranks.push_back(r);
    }
    for (int64_t r : ranks) {
      auto it = advertised.find(r);
      auto one = rank(r, it == advertised.end() ? nullptr : it->second);
      if (one) out.ranks.push_back(std::move(*one));
    }
    if (out.ranks.empty())
      return fail("engine " + req.url + ": no rank can be subscribed" +
                  (out.conflicts.empty() ? std::string() : " (" + out.conflicts.back() + ")"));
    out.dp_size = pick("dp_size", req.dp_size, advertised_count);
    if (!req.dp_size) out.dp_size.value = std::to_string(out.ranks.size());
    // DM4.
    const bool suffix = req.separate_ranks && out.ranks.size() > 1;
    for (auto& r : out.ranks)
      r.replica_id = suffix ? req.replica_id + "-dp" + std::to_string(r.dp_rank) : req.replica_id;

    // DM5.
    std::optional<discovery_setting> model;
    if (!found.model_id.empty()) model = discovery_setting{found.model_id,
                                                           discovered_origin("GET /v1/models")};
    const bool alias = req.model_id &&
                       std::find(found.model_ids.begin(), found.model_ids.end(),
                                 req.model_id->value) != found.model_ids.end();
    out.model_id = pick("model_id", req.model_id, model, alias);
    if (out.model_id.value.empty())
      return fail("engine " + req.url +
                         ": no model id: the engine lists no served model at GET /v1/models and "
                         "none is configured");
    const std::string answered = found.dialect == dialect::vllm
                                     ? "GET /kv_event_sources answered (vLLM)"
                                     : "GET /server_info answered (SGLang)";
    out.hash_scheme = pick("hash_scheme", req.hash_scheme,
                           discovery_setting{found.hash_scheme, discovered_origin(answered)});
    const std::string metrics =
        found.metrics_url.empty() ? req.url + "/metrics" : found.metrics_url;
    out.metrics_url =
        pick("metrics_url", req.metrics_url,
             discovery_setting{metrics, discovered_origin("the engine's own /metrics")});
    return std::move(out);
  }
};

}  // namespace

std::string explicit_origin(const given& g) {
  return g.where.empty() ? "flag/config" : "flag/config (" + g.where + ")";
}

outcome<discovered_target> merge(const engine_request& req, const discovered_engine& found) {
  return merger{req, found, {}}.run();
}

}  // namespace kvrelay::discovery
