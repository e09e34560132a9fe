// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Everything after the TOML reader: flags over the file, validation (pure), the files the
// configuration names (read_files), and the startup sequence that runs them in order.
#include <algorithm>
#include <ostream>

#include "base/read_file.hpp"
#include "durable/format/state_dir.hpp"
#include "config/internal.hpp"
#include "config/loader.hpp"
#include "config/schema.hpp"
#include "config/values.hpp"

namespace kvrelay::config {

using detail::engine_path;
using detail::located;
using detail::max_dp_size;
using detail::max_engines;
using detail::trim;

namespace {

// Bounds on what the files named may hold (TLS material's is base/read_file's): a bearer token
// is a few dozen bytes. A mistyped path (a log, a device) is refused, never read whole.
constexpr size_t max_token_bytes = 4096;

// R09 / C02: the identity every report carries (the schema's required rows). What discovery
// will learn is not required yet.
outcome<void> check_identity(const daemon_config& c) {
  for (size_t i = 0; i < c.engines.size(); ++i) {
    for (const auto& row : schema()) {
      if (!row.required) continue;
      const std::string value = row.write(c, i);
      if (value != "\"\"" || discovered(c.engines[i], row.key)) continue;
      const std::string key(row.key);
      return invalid(located(c, row.path(i),
                             "invalid config: must not be empty (set " + key +
                                 " in [[engine]] or --" + std::string(row.flag) + ")"));
    }
  }
  return {};
}

// "http://h:8000/" and "http://h:8000" name the same engine; paths are appended to the former.
std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// vLLM and SGLang serve /metrics on their one HTTP server: "http://h:8000/metrics" is the engine
// "http://h:8000" (a path before /metrics is kept: a prefix). "" when the URL does not end in
// /metrics or is not a usable engine URL once cut.
std::string engine_url_of_metrics(const std::string& metrics_url) {
  static constexpr std::string_view suffix = "/metrics";
  std::string url = without_trailing_slash(metrics_url);
  if (url.size() <= suffix.size() || url.compare(url.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  url.resize(url.size() - suffix.size());
  if (!detail::check_engine_url(url).empty()) return {};
  return url;
}

}  // namespace

failure invalid(std::string message, std::string headline) {
  return failure{ec::invalid_config, std::move(message), std::move(headline)};
}

bool discovered(const engine_settings& e, std::string_view key) {
  // A URL derived from the metrics URL never leaves a setting unknown: what the engine does not
  // say runs as configured.
  if (e.url.empty() || e.url_derived) return false;
  const auto& g = e.given;
  if (key == "endpoint") return !g.endpoint;
  if (key == "replay_endpoint") return !g.replay_endpoint;
  if (key == "topic") return !g.topic;
  if (key == "dp_size") return !g.dp_size;
  if (key == "model_id") return !g.model_id;
  if (key == "hash_scheme") return !g.hash_scheme;
  return false;
}

std::string origin_of(const daemon_config& cfg, const std::string& key) {
  auto it = cfg.origin.find(key);
  return it == cfg.origin.end() ? std::string() : it->second;
}

outcome<void> parse_adapter_names(std::string_view text, std::map<int64_t, std::string>& out) {
  std::map<int64_t, std::string> map;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string entry = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) continue;  // trailing or blank entries are skipped (A02)
    auto eq = entry.find('=');
    if (eq == std::string::npos) return invalid("entry \"" + entry + "\" is not id=name");
    const std::string id_text = trim(std::string_view(entry).substr(0, eq));
    const std::string name = trim(std::string_view(entry).substr(eq + 1));
    int64_t id = 0;
    if (!detail::parse_decimal_int64(id_text, id))
      return invalid("entry \"" + entry + "\": id \"" + id_text + "\" is not an integer");
    if (name.empty()) return invalid("entry \"" + entry + "\": empty adapter name");
    if (!map.emplace(id, name).second) return invalid("duplicate adapter id " + std::to_string(id));
  }
  out = std::move(map);
  return {};
}

outcome<void> apply_flags(daemon_config& cfg, const flag_values& f) {
  if (f.any_engine_flag() && cfg.engines.size() > 1) {
    return invalid("--" + f.first_engine_flag() +
                   ": engine flags describe a single engine, but the configuration has " +
                   std::to_string(cfg.engines.size()) +
                   " [[engine]] tables; set the value in the file instead");
  }
  if (cfg.engines.empty() && (f.any_engine_flag() || !f.config_path)) {
    cfg.engines.emplace_back();
    // The Go sidecar's arguments (an injected sidecar's): the engine's own server, at the
    // metrics URL's host and port, may say more than they do (replay, DP ranks).
    if (!f.config_path) {
      cfg.engines.back().discover_via_metrics = true;
      cfg.origin["engine[0].discover_via_metrics"] = "default without --config";
    }
  }
  // C01: the adapter map is checked before anything else the reference validates.
  std::map<int64_t, std::string> adapters;
  const auto lora = f.raw_text("lora-adapter-names");
  if (lora) {
    if (auto s = parse_adapter_names(*lora, adapters); !s)
      return invalid("invalid --lora-adapter-names: " + s.error().context,
                     "invalid --lora-adapter-names");
  }
  if (!f.servers.empty()) {
    // Command-line servers replace the file's, address and targets alike: one --server is the
    // address (as it always was), several are the targets.
    const server_settings defaults;
    cfg.origin.erase("server.address");
    cfg.origin.erase("server.targets");
    if (f.servers.size() == 1) {
      cfg.server.address = f.servers.front();
      cfg.server.targets.clear();
      cfg.origin["server.address"] = "--server";
    } else {
      cfg.server.address = defaults.address;
      cfg.server.targets = f.servers;
      cfg.origin["server.targets"] = "--server";
    }
  }
  // Every other setting flag: the value its row parsed, copied to its place.
  for (const auto& row : schema()) {
    if (row.flag.empty() || row.flag == "server" || row.raw_flag || !f.has(row.flag)) continue;
    if (row.engine() && cfg.engines.empty()) continue;
    row.copy(f.overlay, 0, cfg, 0);
    cfg.origin[row.path(0)] = "--" + std::string(row.flag);
  }
  if (cfg.engines.empty()) return {};
  auto& e = cfg.engines[0];
  const std::string p = "engine[0].";
  detail::mark_given(cfg);
  if (lora) {
    e.adapters = std::move(adapters);
    cfg.origin[p + "adapters"] = "--lora-adapter-names";
  }
  if (const auto tier_text = f.raw_text("cache-tier")) {
    cache_tier t{};
    if (!parse(*tier_text, t)) {
      // C02 before C03: a bad identity is what the reference reports first.
      if (auto s = check_identity(cfg); !s) return s;
      return invalid("invalid --cache-tier \"" + *tier_text + "\" (allowed: " +
                         allowed_cache_tiers() + ")",
                     "invalid --cache-tier");
    }
    e.metrics.tier = t;
    cfg.origin[p + "metrics.cache_tier"] = "--cache-tier";
  }
  return {};
}

outcome<void> validate(daemon_config& c, std::vector<std::string>* notes) {
  auto note = [notes](std::string s) {
    if (notes) notes->push_back(std::move(s));
  };
  auto fail = [&c](const std::string& key, const std::string& msg) {
    return invalid(located(c, key, msg));
  };
  // The rows of the global tables, or of engine `i`'s.
  const auto each_row = [&c](bool engine_rows, auto&& fn) {
    if (!engine_rows) {
      for (const auto& row : schema())
        if (!row.engine()) fn(row, size_t{0});
      return;
    }
    for (size_t i = 0; i < c.engines.size(); ++i)
      for (const auto& row : schema())
        if (row.engine()) fn(row, i);
  };
  // Clamps first (R04, S10, N02): a clamped row's non-positive value becomes its default.
  const auto clamp = [&](const setting& row, size_t i) {
    if (!row.clamp) return;
    if (auto text = row.clamp(c, i); !text.empty()) note(row.path(i) + " = " + text);
  };
  each_row(false, clamp);
  each_row(true, clamp);
  for (size_t i = 0; i < c.engines.size(); ++i) {
    auto& e = c.engines[i];
    const std::string p = engine_path(i);
    // The other way round: the engine's own server is where its /metrics is.
    if (e.url.empty() && e.discover_via_metrics && !e.metrics.url.empty()) {
      if (auto base = engine_url_of_metrics(e.metrics.url); !base.empty()) {
        e.url = base;
        e.url_derived = true;
        const auto from = origin_of(c, p + ".metrics.url");
        c.origin[p + ".url"] = "derived from metrics.url" + (from.empty() ? "" : " (" + from + ")");
      } else {
        note(p + ".metrics.url = \"" + e.metrics.url +
             "\" does not end in /metrics: the engine's own server is not known, so nothing is "
             "learnt from it (discover_via_metrics)");
      }
    }
    // The engine's own server serves /metrics too; a given metrics URL (even "") wins.
    if (!e.url.empty() && !e.url_derived && !e.given.metrics_url) {
      e.metrics.url = without_trailing_slash(e.url) + "/metrics";
      if (auto where = origin_of(c, p + ".url"); !where.empty())
        c.origin[p + ".metrics.url"] = where;
    }
  }

  if (c.engines.empty())
    return invalid(located(c, "engine",
                           "no engine configured: add an [[engine]] table, or pass "
                           "--engine-url and --replica-id (an engine that says where its "
                           "events are), or --engine-endpoint, --replica-id and --model-id "
                           "(the Go sidecar's flags)"));
  if (c.engines.size() > max_engines)
    return fail("engine", "too many engines (at most " + std::to_string(max_engines) + ")");
  if (auto s = check_identity(c); !s) return s;

  // Each global key on its own (its row's check), then what spans keys.
  std::string bad_key, bad;
  const auto first_bad = [&](const setting& row, size_t i) {
    if (!bad.empty()) return;
    if (auto err = row.check(c, i); !err.empty()) bad_key = row.path(i), bad = err;
  };
  each_row(false, first_bad);
  if (!bad.empty()) return fail(bad_key, bad);
  for (const auto& row : schema())
    if (row.derive) row.derive(c);

  const auto& sv = c.server;
  if (!sv.tls) {
    const std::pair<const std::string*, const char*> tls_keys[] = {{&sv.ca_file, "ca_file"},
                                                                   {&sv.cert_file, "cert_file"},
                                                                   {&sv.key_file, "key_file"},
                                                                   {&sv.server_name, "server_name"}};
    for (const auto& [value, key] : tls_keys)
      if (!value->empty()) return fail(std::string("server.") + key, "requires tls = true");
  }
  if (sv.cert_file.empty() != sv.key_file.empty())
    return fail(sv.cert_file.empty() ? "server.key_file" : "server.cert_file",
                "cert_file and key_file go together (mTLS needs both)");
  const auto& ad = c.admin;
  if (!ad.listen.empty() && ad.token_file.empty() && !is_loopback_host(listen_host(ad.listen)))
    return fail("admin.listen", "\"" + ad.listen +
                                    "\" is not a loopback address; set admin.token_file so "
                                    "the port is not open to anyone");

  // [[engine]]: each key on its own, then what spans keys.
  std::map<std::string, size_t> urls;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    const auto& e = c.engines[i];
    const std::string p = engine_path(i) + ".";
    for (const auto& row : schema())
      if (row.engine())
        if (auto err = row.check(c, i); !err.empty()) return fail(row.path(i), err);
    if (!e.url.empty() && !e.url_derived) {
      auto [it, fresh] = urls.emplace(without_trailing_slash(e.url), i);
      if (!fresh)
        return fail(p + "url", "engine URL \"" + e.url + "\" is already used by " +
                                   engine_path(it->second));
    }
    if (!e.replay_endpoint.empty() && e.replay_endpoint == e.endpoint)
      return fail(p + "replay_endpoint", "must differ from endpoint");
    std::string ranked;
    if (auto err = rank_endpoint(e.endpoint, e.dp_size - 1, ranked); !err.empty())
      return fail(p + "endpoint", err);
    if (!e.replay_endpoint.empty())
      if (auto err = rank_endpoint(e.replay_endpoint, e.dp_size - 1, ranked); !err.empty())
        return fail(p + "replay_endpoint", err);
    // Any tag is valid (the router matches it as given, as the Go sidecar's), but the run warns
    // about one it has no metric profile for: --check says the same.
    if (!discovered(e, "hash_scheme") && e.hash_scheme != "vllm" && e.hash_scheme != "sglang")
      note(p + "hash_scheme = \"" + e.hash_scheme +
           "\" is neither \"vllm\" nor \"sglang\": reports carry it as given (the router must "
           "ask with the same tag), and the engine's /metrics is read with the vllm profile");
    for (const auto& [id, name] : e.adapters)
      if (name.empty())
        return fail(p + "adapters." + std::to_string(id), "adapter name must not be empty");
  }

  // Across engines: each reported replica id and each subscription once. A subscription the
  // engine will name is checked when it is known, not against the placeholder default.
  std::map<std::string, size_t> replicas;
  std::map<std::string, size_t> subscriptions;
  for (const auto& pl : pipelines(c)) {
    const std::string p = engine_path(pl.engine_index);
    const auto& e = c.engines[pl.engine_index];
    auto [it, fresh] = replicas.emplace(pl.replica_id, pl.engine_index);
    if (!fresh && it->second != pl.engine_index)
      return fail(p + ".replica_id", "duplicate replica id \"" + pl.replica_id +
                                         "\" (also used by " + engine_path(it->second) + ")");
    if (discovered(e, "endpoint") || discovered(e, "topic")) continue;
    const std::string sub = pl.endpoint + " topic " + e.topic;
    auto [sit, sfresh] = subscriptions.emplace(sub, pl.engine_index);
    if (!sfresh && sit->second != pl.engine_index)
      return fail(p + ".endpoint", "endpoint \"" + pl.endpoint + "\" with the same topic is "
                                   "already subscribed by " + engine_path(sit->second));
  }
  return {};
}

outcome<void> read_files(daemon_config& c) {
  const std::pair<const std::string*, const char*> pem_files[] = {
      {&c.server.ca_file, "server.ca_file"},
      {&c.server.cert_file, "server.cert_file"},
      {&c.server.key_file, "server.key_file"}};
  for (const auto& [path, key] : pem_files) {
    if (path->empty()) continue;
    const std::string subject = "\"" + *path + "\"";
    auto text = read_pem_file(*path, subject);
    if (!text) return invalid(located(c, key, text.error().context));
  }
  if (!c.state.dir.empty())
    if (auto s = check_state_dir(c.state.dir, /*create=*/false); !s)
      return invalid(located(c, "state.dir", s.error().context));
  if (!c.admin.token_file.empty()) {
    auto token = read_token_file(c.admin.token_file);
    if (!token) return invalid(located(c, "admin.token_file", token.error().context));
    c.admin.token = std::move(token).value();
  }
  return {};
}

outcome<std::string> read_token_file(const std::string& path) {
  const std::string subject = "\"" + path + "\"";
  auto text = read_regular_file(path, max_token_bytes, subject);
  if (!text) return text.error();
  std::string token = trim(text.value());
  if (token.empty()) return invalid(subject + " is empty (it must hold the bearer token)");
  // A header value cannot carry a line break: a second line would make a token no request can
  // ever present.
  for (char ch : token) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f)
      return invalid(subject + " must hold the token on one line (no control characters)");
  }
  return token;
}

outcome<daemon_config> resolve(const flag_values& flags, std::vector<std::string>* notes) {
  daemon_config cfg;
  if (flags.config_path) {
    auto loaded = load_toml(*flags.config_path);
    if (!loaded) return loaded.error();
    cfg = std::move(loaded).value();
  }
  if (auto s = apply_flags(cfg, flags); !s) return s.error();
  if (auto s = validate(cfg, notes); !s) return s.error();
  if (auto s = read_files(cfg); !s) return s.error();
  return cfg;
}

int run_check(const flag_values& flags, std::ostream& out, std::ostream& err) {
  std::vector<std::string> notes;
  auto cfg = resolve(flags, &notes);
  if (!cfg) {
    err << cfg.error().context << "\n";
    return 2;
  }
  for (const auto& n : notes) err << "note: " << n << "\n";
  // What the durable index keeps now, and what bounds it (created at start when missing).
  if (const auto& dir = cfg.value().state.dir; !dir.empty())
    err << "note: " << describe_state_dir(dir) << "\n";
  out << to_toml(cfg.value());
  return 0;
}

std::vector<pipeline_settings> pipelines(const daemon_config& c) {
  std::vector<pipeline_settings> out;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    const auto& e = c.engines[i];
    const int64_t ranks = std::clamp<int64_t>(e.dp_size, 1, max_dp_size);
    for (int64_t r = 0; r < ranks; ++r) {
      pipeline_settings p;
      p.engine_index = i;
      p.dp_rank = r;
      p.replica_id = e.replica_id;
      if (ranks > 1 && e.dp_mode == dp_mode::separate) p.replica_id += "-dp" + std::to_string(r);
      if (!rank_endpoint(e.endpoint, r, p.endpoint).empty()) p.endpoint = e.endpoint;
      if (!e.replay_endpoint.empty() &&
          !rank_endpoint(e.replay_endpoint, r, p.replay_endpoint).empty())
        p.replay_endpoint = e.replay_endpoint;
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<std::string> policy_targets(const server_settings& s) {
  return s.targets.empty() ? std::vector<std::string>{s.address} : s.targets;
}

std::string policy_targets_text(const server_settings& s) {
  std::string out;
  for (const auto& t : policy_targets(s)) out += (out.empty() ? "" : ",") + t;
  return out;
}

}  // namespace kvrelay::config
