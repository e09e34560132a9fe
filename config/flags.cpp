// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "config/flags.hpp"

#include <algorithm>

#include "config/internal.hpp"
#include "config/values.hpp"

namespace kvrelay::config {
namespace {

using setter = std::string (*)(flag_values&, std::string_view);
using default_fn = std::string (*)();

struct flag_spec {
  const char* name;
  const char* type;  // shown in usage; "" for booleans
  bool engine;       // describes the single engine (so it needs a config with <= 1 engine)
  const char* help;
  default_fn default_text;
  setter set;
};

std::string quote(const std::string& s) { return "\"" + s + "\""; }

template <class E>
std::string set_choice(std::optional<E>& slot, std::string_view v, const char* allowed) {
  E e{};
  if (!parse(v, e)) return std::string("allowed: ") + allowed;
  slot = e;
  return {};
}

std::string set_duration(std::optional<std::chrono::milliseconds>& slot, std::string_view v) {
  std::chrono::milliseconds d{};
  if (auto err = parse_duration(v, d); !err.empty()) return err;
  slot = d;
  return {};
}

std::string set_int(std::optional<int64_t>& slot, std::string_view v) {
  int64_t i = 0;
  if (auto err = parse_go_int(v, i); !err.empty()) return err;
  slot = i;
  return {};
}

std::string set_bool(std::optional<bool>& slot, std::string_view v) {
  bool b = false;
  if (auto err = parse_go_bool(v, b); !err.empty()) return err;
  slot = b;
  return {};
}

const engine_settings& engine_defaults() {
  static const engine_settings e;
  return e;
}

// One table: the parser, usage() and flag_names() all read it. Defaults are read from the
// settings structs, never restated here.
const std::vector<flag_spec>& table() {
  static const std::vector<flag_spec> specs = {
      {"admin-listen", "host:port", false, "admin HTTP listen address; \"\" disables it",
       [] { return quote(admin_settings{}.listen); },
       [](flag_values& f, std::string_view v) { return (f.admin_listen = std::string(v)), std::string(); }},
      {"admin-public", "string", false,
       "/healthz, /readyz, /readyz/self and /metrics also on every address of the pod or host "
       "at the admin port (the rest stays on loopback unless a token is set): auto (inside a "
       "Kubernetes pod) | on | off",
       [] { return quote(to_string(admin_settings{}.public_endpoints)); },
       [](flag_values& f, std::string_view v) {
         return set_choice(f.admin_public_v, v, allowed_admin_public());
       }},
      {"cache-tier", "string", true,
       "usage gauge the scraper reads: auto (kv, then gpu, then cpu) | kv | gpu | cpu",
       [] { return quote(to_string(metrics_settings{}.tier)); },
       [](flag_values& f, std::string_view v) { return (f.cache_tier = std::string(v)), std::string(); }},
      {"check", "", false, "validate the configuration, print the effective one, exit 0 or 2",
       [] { return std::string("false"); },
       [](flag_values& f, std::string_view v) {
         std::optional<bool> b;
         auto err = set_bool(b, v);
         if (err.empty()) f.check = *b;
         return err;
       }},
      {"config", "file", false, "TOML configuration file (flags override its single engine)",
       [] { return quote(""); },
       [](flag_values& f, std::string_view v) { return (f.config_path = std::string(v)), std::string(); }},
      {"discover-via-metrics", "", true,
       "without --engine-url: learn the replay endpoint, DP ranks and topic from the engine's "
       "server at --engine-metrics-url's host and port (flags given still win; an engine that "
       "says nothing runs as configured); true when no --config is given",
       [] { return std::string("true without --config, else false"); },
       [](flag_values& f, std::string_view v) { return set_bool(f.discover_via_metrics, v); }},
      {"dp-mode", "string", true,
       "data-parallel ranks as separate replicas \"<id>-dp<rank>\" or merged into one: "
       "separate | merged",
       [] { return quote(to_string(engine_defaults().dp_mode)); },
       [](flag_values& f, std::string_view v) { return set_choice(f.dp_mode, v, allowed_dp_modes()); }},
      {"dp-size", "int", true, "data-parallel ranks; rank r subscribes to the endpoint's port + r",
       [] { return std::to_string(engine_defaults().dp_size); },
       [](flag_values& f, std::string_view v) { return set_int(f.dp_size, v); }},
      {"engine-cache-size-bytes", "int", true,
       "engine KV capacity in bytes, multiplied by the usage ratio; 0 reports 0 bytes",
       [] { return std::to_string(metrics_settings{}.cache_size_bytes); },
       [](flag_values& f, std::string_view v) {
         int64_t i = 0;
         // Go's int syntax first; a size with a unit ("16GiB") as an extension.
         if (parse_go_int(v, i).empty() || parse_size(v, i).empty()) {
           f.engine_cache_size_bytes = i;
           return std::string();
         }
         return parse_size(v, i);
       }},
      {"engine-endpoint", "string", true, "engine ZMQ PUB endpoint to subscribe to",
       [] { return quote(engine_defaults().endpoint); },
       [](flag_values& f, std::string_view v) { return (f.engine_endpoint = std::string(v)), std::string(); }},
      {"engine-metrics-url", "string", true, "engine Prometheus /metrics URL; \"\" disables scraping",
       [] { return quote(metrics_settings{}.url); },
       [](flag_values& f, std::string_view v) { return (f.engine_metrics_url = std::string(v)), std::string(); }},
      {"engine-model-name", "string", true, "model_name label filter for metrics; \"\" = no filter",
       [] { return quote(metrics_settings{}.model_label); },
       [](flag_values& f, std::string_view v) { return (f.engine_model_name = std::string(v)), std::string(); }},
      {"engine-url", "url", true,
       "the engine's HTTP server (e.g. http://127.0.0.1:8000): endpoints, topic, DP ranks, "
       "model id and hash scheme are learnt from it unless given; \"\" = no discovery",
       [] { return quote(engine_defaults().url); },
       [](flag_values& f, std::string_view v) { return (f.engine_url = std::string(v)), std::string(); }},
      {"eviction-mode", "string", false,
       "how evictions reach the server: auto (= expire) | expire (entries reported as long "
       "expired) | rpc (one PublishEvent per prefix)",
       [] { return quote(to_string(server_settings{}.eviction_mode)); },
       [](flag_values& f, std::string_view v) {
         return set_choice(f.eviction_mode, v, allowed_eviction_modes());
       }},
      {"hash-scheme", "string", true,
       "hash scheme stamped on reports (required); \"sglang\" selects the SGLang metric profile",
       [] { return quote(engine_defaults().hash_scheme); },
       [](flag_values& f, std::string_view v) { return (f.hash_scheme = std::string(v)), std::string(); }},
      {"ignore-block-removed", "", true,
       "the replica has an L2 tier: BlockRemoved becomes a T2 downgrade, not an eviction",
       [] { return std::string(engine_defaults().l2_tier ? "true" : "false"); },
       [](flag_values& f, std::string_view v) { return set_bool(f.ignore_block_removed, v); }},
      {"log-format", "string", false, "log line format: json | text",
       [] { return quote(to_string(log_settings{}.format)); },
       [](flag_values& f, std::string_view v) {
         return set_choice(f.log_format_v, v, allowed_log_formats());
       }},
      {"log-level", "string", false, "lowest level logged: debug | info | warn | error",
       [] { return quote(to_string(log_settings{}.level)); },
       [](flag_values& f, std::string_view v) {
         return set_choice(f.log_level_v, v, allowed_log_levels());
       }},
      {"lora-adapter-names", "string", true,
       "LoRA id=name map, comma separated (\"1=sql-lora,2=chat\"); unmapped ids are dropped",
       [] { return quote(""); },
       [](flag_values& f, std::string_view v) { return (f.lora_adapter_names = std::string(v)), std::string(); }},
      {"max-concurrency-ceiling", "int", true, "pressure denominator; <= 0 disables pressure",
       [] { return std::to_string(metrics_settings{}.max_concurrency); },
       [](flag_values& f, std::string_view v) { return set_int(f.max_concurrency_ceiling, v); }},
      {"model-id", "string", true,
       "model id the index is keyed by (required, unless --engine-url discovers it)",
       [] { return quote(engine_defaults().model_id); },
       [](flag_values& f, std::string_view v) { return (f.model_id = std::string(v)), std::string(); }},
      {"replay-endpoint", "string", true, "engine ZMQ ROUTER replay endpoint; \"\" = no replay",
       [] { return quote(engine_defaults().replay_endpoint); },
       [](flag_values& f, std::string_view v) { return (f.replay_endpoint = std::string(v)), std::string(); }},
      {"replica-id", "string", true, "replica identity reported to the server (required)",
       [] { return quote(engine_defaults().replica_id); },
       [](flag_values& f, std::string_view v) { return (f.replica_id = std::string(v)), std::string(); }},
      {"memory-budget", "size", false,
       "memory budget (bytes or e.g. \"96MiB\"); 0 = the cgroup's memory limit less a quarter "
       "(less at least 24MiB), else 512MiB",
       [] { return std::to_string(memory_settings{}.budget); },
       [](flag_values& f, std::string_view v) {
         int64_t i = 0;
         if (parse_go_int(v, i).empty() || parse_size(v, i).empty()) {
           if (i < 0) return std::string("must be >= 0");
           f.memory_budget = i;
           return std::string();
         }
         return parse_size(v, i);
       }},
      {"scoped-evictions", "", false,
       "the server reads CacheEvent.adapter_scoped (inference-cache PR #164): rpc mode then "
       "skips re-reporting the LoRA entries a base-model eviction would sweep",
       [] { return std::string(server_settings{}.scoped_evictions ? "true" : "false"); },
       [](flag_values& f, std::string_view v) { return set_bool(f.scoped_evictions, v); }},
      {"state-dir", "dir", false,
       "durable index: keep each pipeline's index in this directory across restarts; \"\" = off",
       [] { return quote(state_settings{}.dir); },
       [](flag_values& f, std::string_view v) { return (f.state_dir = std::string(v)), std::string(); }},
      {"server", "string", false,
       "cache-policy server gRPC target (or dns:///name:port, every address a target); repeat "
       "for several servers, each a target (they replace the file's)",
       [] { return quote(server_settings{}.address); },
       [](flag_values& f, std::string_view v) {
         if (f.servers.size() >= detail::max_targets)
           return "at most " + std::to_string(detail::max_targets) + " servers";
         f.servers.emplace_back(v);
         return std::string();
       }},
      {"server-readiness", "string", false,
       "/readyz is ready while this many servers are healthy: any | all | quorum (more than half)",
       [] { return quote(to_string(server_settings{}.readiness)); },
       [](flag_values& f, std::string_view v) {
         return set_choice(f.server_readiness, v, allowed_readiness_policies());
       }},
      {"stats-interval", "duration", true, "engine metrics scrape interval; <= 0 becomes 10s",
       [] { return format_duration(metrics_settings{}.interval); },
       [](flag_values& f, std::string_view v) { return set_duration(f.stats_interval, v); }},
      {"tenant-id", "string", true, "tenant id (optional)",
       [] { return quote(engine_defaults().tenant_id); },
       [](flag_values& f, std::string_view v) { return (f.tenant_id = std::string(v)), std::string(); }},
      {"topic", "string", true, "ZMQ SUB topic prefix; \"\" = every topic",
       [] { return quote(engine_defaults().topic); },
       [](flag_values& f, std::string_view v) { return (f.topic = std::string(v)), std::string(); }},
      {"unknown-parent", "string", true,
       "a BlockStored whose parent was never seen: drop (safe) | root (the Go sidecar's way)",
       [] { return quote(to_string(engine_defaults().unknown_parent)); },
       [](flag_values& f, std::string_view v) {
         return set_choice(f.unknown_parent, v, allowed_unknown_parents());
       }},
      {"version", "", false, "print the version and the libraries' versions, then exit",
       [] { return std::string("false"); },
       [](flag_values& f, std::string_view v) {
         std::optional<bool> b;
         auto err = set_bool(b, v);
         if (err.empty()) f.version = *b;
         return err;
       }},
      {"window", "duration", true, "debounce window; <= 0 becomes 100ms",
       [] { return format_duration(engine_defaults().window); },
       [](flag_values& f, std::string_view v) { return set_duration(f.window, v); }},
  };
  return specs;
}

const flag_spec* find(std::string_view name) {
  for (const auto& s : table())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

std::string flag_values::first_engine_flag() const {
  for (const auto& name : given)
    if (const auto* s = find(name); s && s->engine) return name;
  return {};
}

flag_parse_result parse_flags(const std::vector<std::string>& args) {
  flag_parse_result r;
  auto fail = [&r](std::string msg) {
    r.status = flag_parse_result::outcome::error;
    r.error = std::move(msg);
    return r;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    // As in Go: anything not starting with '-' (or a lone "-") ends the flags; "--" ends them and
    // is consumed. kvrelay takes no positional arguments, so what is left is an error rather
    // than silently ignored (a stray word would otherwise hide every flag after it).
    if (arg.size() < 2 || arg[0] != '-') return fail("unexpected argument \"" + arg + "\"");
    size_t dashes = arg[1] == '-' ? 2 : 1;
    if (dashes == 2 && arg.size() == 2) {
      if (i + 1 < args.size()) return fail("unexpected argument \"" + args[i + 1] + "\"");
      break;
    }
    std::string_view body = std::string_view(arg).substr(dashes);
    if (body.empty() || body[0] == '-' || body[0] == '=') return fail("bad flag syntax: " + arg);
    std::string_view name = body, value;
    bool has_value = false;
    if (auto eq = body.find('='); eq != std::string_view::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const flag_spec* spec = find(name);
    if (!spec) {
      if (name == "help" || name == "h") {
        r.status = flag_parse_result::outcome::help;
        return r;
      }
      // Go's wording (a log query may look for it), then the likely flag: a typo in an
      // injected sidecar's arguments should name its fix on the one line a crash loop shows.
      std::string msg = "flag provided but not defined: --" + std::string(name);
      std::vector<std::string_view> names{"help"};
      for (const auto& s : table()) names.emplace_back(s.name);
      if (auto guess = detail::closest_match(name, names); !guess.empty())
        msg += "; did you mean --" + guess + "?";
      return fail(std::move(msg));
    }
    std::string next;
    const bool is_bool = spec->type[0] == '\0';
    if (is_bool) {
      if (!has_value) value = "true";
      if (auto err = spec->set(r.values, value); !err.empty())
        return fail("invalid boolean value \"" + std::string(value) + "\" for --" +
                    std::string(name) + ": " + err);
    } else {
      if (!has_value) {
        // Go takes the next argument as the value even when it starts with '-'.
        if (i + 1 >= args.size()) return fail("flag needs an argument: --" + std::string(name));
        next = args[++i];
        value = next;
      }
      if (auto err = spec->set(r.values, value); !err.empty())
        return fail("invalid value \"" + std::string(value) + "\" for flag --" +
                    std::string(name) + ": " + err);
    }
    r.values.given.emplace_back(name);
  }
  return r;
}

flag_parse_result parse_flags(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
  return parse_flags(args);
}

std::string usage(std::string_view program) {
  std::string out;
  out += "Usage: " + std::string(program) + " [flags]\n";
  out += "  " + std::string(program) + " --config FILE [--check]   engines from a TOML file\n";
  out += "  " + std::string(program) +
         " --replica-id ID --model-id ID [flags]   one engine from flags (the Go sidecar's)\n";
  out += "Precedence: flags > config file > defaults. Engine flags need a file with at most one "
         "[[engine]].\n";
  out += "-x and --x are the same; --x v and --x=v are the same; booleans: --x or --x=false.\n\n";
  out += "Flags:\n";
  for (const auto& s : table()) {
    out += "  --" + std::string(s.name);
    if (s.type[0] != '\0') out += " " + std::string(s.type);
    out += "\n        " + std::string(s.help) + " (default " + s.default_text() + ")\n";
  }
  out += "  -h, --help\n        print this text and exit\n";
  return out;
}

std::vector<std::string> flag_names() {
  std::vector<std::string> names;
  for (const auto& s : table()) names.emplace_back(s.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kvrelay::config
