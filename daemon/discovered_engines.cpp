// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "daemon/discovered_engines.hpp"

#include "daemon/memory_setup.hpp"

#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>

#include "actors/discovery/engine_fetch.hpp"
#include "config/values.hpp"

namespace kvrelay {

discovery::engine_request discovery_request(const config::daemon_config& cfg, size_t engine) {
  const auto& e = cfg.engines.at(engine);
  const std::string path = "engine[" + std::to_string(engine) + "].";
  const auto given = [&](bool is_given, const std::string& value, const char* key) {
    return is_given ? std::optional<discovery::given>(
                          discovery::given{value, config::origin_of(cfg, path + key)})
                    : std::nullopt;
  };
  discovery::engine_request r;
  r.url = e.url;
  r.replica_id = e.replica_id;
  r.separate_ranks = e.dp_mode == config::dp_mode::separate;
  r.endpoint = given(e.given.endpoint, e.endpoint, "endpoint");
  r.replay_endpoint = given(e.given.replay_endpoint, e.replay_endpoint, "replay_endpoint");
  r.topic = given(e.given.topic, e.topic, "topic");
  r.model_id = given(e.given.model_id, e.model_id, "model_id");
  r.hash_scheme = given(e.given.hash_scheme, e.hash_scheme, "hash_scheme");
  r.metrics_url = given(e.given.metrics_url, e.metrics.url, "metrics.url");
  r.dp_size = given(e.given.dp_size, std::to_string(e.dp_size), "dp_size");
  r.rank_endpoint = [](const std::string& base, int64_t rank) -> std::optional<std::string> {
    std::string out;
    if (!config::rank_endpoint(base, rank, out).empty()) return std::nullopt;
    return out;
  };
  if (e.url_derived) r.fallback = configured_target(cfg, engine);
  return r;
}

std::shared_ptr<const discovered_target> configured_target(const config::daemon_config& cfg,
                                                           size_t engine) {
  const auto& e = cfg.engines.at(engine);
  const std::string path = "engine[" + std::to_string(engine) + "].";
  // Where each value came from, as the merge says it: the flag or file line, else a default.
  const auto setting = [&](const std::string& value, bool given, const char* key) {
    const auto where = config::origin_of(cfg, path + key);
    if (given) return discovery_setting{value, discovery::explicit_origin({value, where})};
    return discovery_setting{value, "default (configured; the engine has not said)"};
  };
  auto t = std::make_shared<discovered_target>();
  t->url = e.url;
  t->dialect = "configured";
  t->model_id = setting(e.model_id, e.given.model_id, "model_id");
  t->hash_scheme = setting(e.hash_scheme, e.given.hash_scheme, "hash_scheme");
  t->metrics_url = setting(e.metrics.url, e.given.metrics_url, "metrics.url");
  t->dp_size = setting(std::to_string(e.dp_size), e.given.dp_size, "dp_size");
  for (const auto& p : config::pipelines(cfg)) {
    if (p.engine_index != engine) continue;
    discovered_rank r;
    r.dp_rank = p.dp_rank;
    r.replica_id = p.replica_id;
    r.endpoint = setting(p.endpoint, e.given.endpoint, "endpoint");
    r.replay_endpoint = setting(p.replay_endpoint, e.given.replay_endpoint, "replay_endpoint");
    r.topic = setting(e.topic, e.given.topic, "topic");
    t->ranks.push_back(std::move(r));
  }
  return t;
}

discovery_options discovery_options_for(const config::daemon_config& cfg) {
  discovery_options o;
  for (size_t i = 0; i < cfg.engines.size(); ++i) {
    if (cfg.engines[i].url.empty()) continue;
    discovery_options::engine e;
    e.index = i;
    e.request = discovery_request(cfg, i);
    e.retry_max = cfg.engines[i].discovery_retry_max;
    o.engines.push_back(std::move(e));
  }
  return o;
}

std::pair<config::daemon_config, std::vector<config::pipeline_settings>> apply_target(
    const config::daemon_config& cfg, size_t engine, const discovered_target& t) {
  auto out = cfg;
  auto& e = out.engines.at(engine);
  e.model_id = t.model_id.value;
  e.hash_scheme = t.hash_scheme.value;
  e.metrics.url = t.metrics_url.value;
  e.dp_size = static_cast<int64_t>(t.ranks.size());
  if (!t.ranks.empty()) e.topic = t.ranks.front().topic.value;
  std::vector<config::pipeline_settings> ranks;
  for (const auto& r : t.ranks) {
    config::pipeline_settings ps;
    ps.engine_index = engine;
    ps.dp_rank = r.dp_rank;
    ps.replica_id = r.replica_id;
    ps.endpoint = r.endpoint.value;
    ps.replay_endpoint = r.replay_endpoint.value;
    ranks.push_back(std::move(ps));
  }
  return {std::move(out), std::move(ranks)};
}

namespace {

// `#   key = "value"   # origin`, the origins aligned for reading.
void line(std::ostream& out, const std::string& key, const std::string& value,
          const std::string& origin) {
  std::ostringstream kv;
  kv << "#   " << key << " = " << std::quoted(value);
  out << std::left << std::setw(64) << kv.str() << " # " << origin << "\n";
}

}  // namespace

void print_discovery(const config::daemon_config& cfg, std::ostream& out,
                     std::chrono::milliseconds timeout) {
  const auto opts = discovery_options_for(cfg);
  if (opts.engines.empty()) return;
  out << "\n# What the engines with a url answer now (read again at start and whenever a stream "
         "stops):\n";
  for (const auto& e : opts.engines) {
    const auto& rid = cfg.engines[e.index].replica_id;
    discovery::fetch_options fo;
    fo.timeout = timeout;
    fo.want_model = !e.request.model_id;
    auto found = discovery::fetch_and_discover(e.request.url, fo);
    auto target = found ? discovery::merge(e.request, found.value())
                        : outcome<discovered_target>(found.error());
    if (!target) {
      out << "# engine \"" << rid << "\" (" << e.request.url << "): not usable now: "
          << target.error().context << "\n#   kvrelay keeps asking, with backoff up to "
          << e.retry_max.count() << " ms"
          << (e.request.fallback ? ", and runs on the configured settings meanwhile" : "")
          << "\n";
      continue;
    }
    const auto& t = target.value();
    out << "# engine \"" << rid << "\" (" << e.request.url << ", " << t.dialect << "):\n";
    line(out, "model_id", t.model_id.value, t.model_id.origin);
    line(out, "hash_scheme", t.hash_scheme.value, t.hash_scheme.origin);
    line(out, "metrics.url", t.metrics_url.value, t.metrics_url.origin);
    line(out, "dp_size", t.dp_size.value, t.dp_size.origin);
    for (const auto& r : t.ranks) {
      const std::string p = "rank " + std::to_string(r.dp_rank) + " (" + r.replica_id + ") ";
      line(out, p + "endpoint", r.endpoint.value, r.endpoint.origin);
      line(out, p + "replay_endpoint", r.replay_endpoint.value, r.replay_endpoint.origin);
      line(out, p + "topic", r.topic.value, r.topic.origin);
    }
    for (const auto& c : t.conflicts) out << "#   conflict: " << c << "\n";
    for (const auto& n : t.notes) out << "#   note: " << n << "\n";
  }
}

int check_with_discovery(const config::flag_values& flags, std::ostream& out, std::ostream& err) {
  const int rc = config::run_check(flags, out, err);
  if (rc != 0) return rc;
  auto cfg = config::resolve(flags);  // what run_check printed; resolving again reads no engine
  if (!cfg) return rc;
  // The memory budget the daemon would use now, and the bounds derived from it.
  const auto choice = choose_budget(cfg.value());
  const auto b = derive_bounds(choice.bytes, config::pipelines(cfg.value()).size());
  out << "# memory budget: " << describe(choice) << "\n#   index up to " << b.index_bytes
      << " bytes; queues pause the ingress at up to " << b.queue_bytes << " bytes or "
      << b.queue_messages << " messages (less as the index grows, at least "
      << choice.bytes / 40 << " bytes); per pipeline: ZMQ rcvhwm " << b.rcvhwm
      << " messages, pending keys " << b.max_pending << "\n";
  print_discovery(cfg.value(), out);
  return rc;
}

}  // namespace kvrelay
