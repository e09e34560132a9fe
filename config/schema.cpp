// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// The rows (one per setting) and what is generated from a row: its parsers, printers, checks and
// its line of the reference. To add a setting: its member (with its default) in settings.hpp,
// one row here, and its use.
#include "config/schema.hpp"

#include <algorithm>
#include <type_traits>

#include "config/internal.hpp"
#include "config/loader.hpp"
#include "config/values.hpp"

namespace kvrelay::config {

using std::chrono::milliseconds;

namespace detail {

std::string toml_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          static const char hex[] = "0123456789ABCDEF";
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string check_engine_url(const std::string& url) {
  if (auto err = check_url(url); !err.empty()) return err;
  if (url.find_first_of("?#") != std::string::npos)
    return "invalid URL \"" + url + "\": the engine URL is a base (no query or fragment)";
  return {};
}

}  // namespace detail

namespace {

using detail::toml_quote;

// Limits of values that end up as int milliseconds in gRPC channel arguments or HTTP options.
constexpr milliseconds max_rpc_timeout = std::chrono::hours(1);
constexpr milliseconds max_keepalive = std::chrono::hours(24);
constexpr int64_t max_admin_connections = 4096;
constexpr int64_t max_admin_body_bytes = int64_t{16} << 20;

// -- where a row's member lives -------------------------------------------------------------------

template <class O>
struct owner_traits;
#define KVRELAY_GLOBAL_TABLE(O, name, member)                                              \
  template <>                                                                               \
  struct owner_traits<O> {                                                                  \
    static constexpr std::string_view table = name;                                        \
    static O& of(daemon_config& c, size_t) { return c.member; }                            \
    static const O& of(const daemon_config& c, size_t) { return c.member; }                \
  };
KVRELAY_GLOBAL_TABLE(server_settings, "server", server)
KVRELAY_GLOBAL_TABLE(admin_settings, "admin", admin)
KVRELAY_GLOBAL_TABLE(state_settings, "state", state)
KVRELAY_GLOBAL_TABLE(memory_settings, "memory", memory)
KVRELAY_GLOBAL_TABLE(cpu_settings, "cpu", cpu)
KVRELAY_GLOBAL_TABLE(log_settings, "log", log)
#undef KVRELAY_GLOBAL_TABLE
template <>
struct owner_traits<engine_settings> {
  static constexpr std::string_view table = "engine";
  static engine_settings& of(daemon_config& c, size_t i) { return c.engines.at(i); }
  static const engine_settings& of(const daemon_config& c, size_t i) { return c.engines.at(i); }
};
template <>
struct owner_traits<metrics_settings> {
  static constexpr std::string_view table = "engine.metrics";
  static metrics_settings& of(daemon_config& c, size_t i) { return c.engines.at(i).metrics; }
  static const metrics_settings& of(const daemon_config& c, size_t i) {
    return c.engines.at(i).metrics;
  }
};

// -- what a value's type means --------------------------------------------------------------------

const char* allowed_for(dp_mode) { return allowed_dp_modes(); }
const char* allowed_for(eviction_mode) { return allowed_eviction_modes(); }
const char* allowed_for(shutdown_action) { return allowed_shutdown_actions(); }
const char* allowed_for(readiness_policy) { return allowed_readiness_policies(); }
const char* allowed_for(admin_public) { return allowed_admin_public(); }
const char* allowed_for(unknown_parent) { return allowed_unknown_parents(); }
const char* allowed_for(cache_tier) { return allowed_cache_tiers(); }
const char* allowed_for(cpu_scheduling) { return allowed_cpu_schedulings(); }
const char* allowed_for(log_format) { return allowed_log_formats(); }
const char* allowed_for(log_level) { return allowed_log_levels(); }

template <class V>
constexpr value_kind kind_of() {
  if constexpr (std::is_same_v<V, std::string>) return value_kind::string;
  else if constexpr (std::is_same_v<V, bool>) return value_kind::boolean;
  else if constexpr (std::is_same_v<V, int64_t>) return value_kind::integer;
  else if constexpr (std::is_same_v<V, milliseconds>) return value_kind::duration;
  else if constexpr (std::is_same_v<V, std::vector<std::string>>) return value_kind::list;
  else {
    static_assert(std::is_enum_v<V>);
    return value_kind::choice;
  }
}

std::string expected(const std::string& what, const toml_value& n) {
  return "expected " + what + ", got " + n.type;
}

template <class V>
std::string read_value(const toml_value& n, V& out, value_kind kind) {
  if constexpr (std::is_same_v<V, std::string>) {
    if (!n.string) return expected("a string", n);
    out = *n.string;
  } else if constexpr (std::is_same_v<V, bool>) {
    if (!n.boolean) return expected("a boolean (true or false)", n);
    out = *n.boolean;
  } else if constexpr (std::is_same_v<V, int64_t>) {
    if (kind == value_kind::size) {
      // Sizes take an integer byte count or a string with a unit.
      if (n.integer) {
        if (*n.integer < 0) return "must be >= 0";
        out = *n.integer;
        return {};
      }
      if (n.string) return parse_size(*n.string, out);
      return expected("a size (an integer byte count or a string such as \"16GiB\")", n);
    }
    if (!n.integer) return expected("an integer", n);
    out = *n.integer;
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    if (!n.array) return expected("an array of strings", n);
    if (n.array->size() > detail::max_targets)
      return "too many entries (at most " + std::to_string(detail::max_targets) + ")";
    std::vector<std::string> items;
    for (size_t i = 0; i < n.array->size(); ++i) {
      const auto& item = (*n.array)[i];
      if (!item.string) return "entry " + std::to_string(i + 1) + ": " + expected("a string", item);
      items.push_back(*item.string);
    }
    out = std::move(items);
  } else if constexpr (std::is_same_v<V, milliseconds>) {
    if (!n.string) return expected("a duration string such as \"100ms\", \"10s\" or \"1m\"", n);
    return parse_duration(*n.string, out);
  } else {
    if (!n.string) return expected("one of the strings " + std::string(allowed_for(V{})), n);
    if (!parse(*n.string, out))
      return "invalid value \"" + *n.string + "\" (allowed: " + allowed_for(V{}) + ")";
  }
  return {};
}

// Flags take Go's syntax (flag package): ParseInt(s, 0, 64), ParseBool, ParseDuration.
template <class V>
std::string parse_flag_value(std::string_view text, V& out, value_kind kind) {
  if constexpr (std::is_same_v<V, std::string>) {
    out = std::string(text);
  } else if constexpr (std::is_same_v<V, bool>) {
    return parse_go_bool(text, out);
  } else if constexpr (std::is_same_v<V, int64_t>) {
    int64_t i = 0;
    if (kind != value_kind::size) {
      if (auto err = parse_go_int(text, i); !err.empty()) return err;
    } else if (parse_go_int(text, i).empty() || parse_size(text, i).empty()) {
      // Go's int syntax first; a size with a unit ("16GiB") as an extension.
      if (i < 0) return "must be >= 0";
    } else {
      return parse_size(text, i);
    }
    out = i;
  } else if constexpr (std::is_same_v<V, milliseconds>) {
    return parse_duration(text, out);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    return "not a flag";
  } else {
    if (!parse(text, out)) return std::string("allowed: ") + allowed_for(V{});
  }
  return {};
}

template <class V>
std::string write_value(const V& v) {
  if constexpr (std::is_same_v<V, std::string>) return toml_quote(v);
  else if constexpr (std::is_same_v<V, bool>) return v ? "true" : "false";
  else if constexpr (std::is_same_v<V, int64_t>) return std::to_string(v);
  else if constexpr (std::is_same_v<V, milliseconds>) return toml_quote(format_duration(v));
  else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    std::string out = "[";
    for (const auto& s : v) out += (out.size() > 1 ? ", " : "") + toml_quote(s);
    return out + "]";
  } else return toml_quote(to_string(v));
}

// --help's form of a default: Go's PrintDefaults quotes strings, not durations.
template <class V>
std::string flag_text(const V& v) {
  if constexpr (std::is_same_v<V, std::string>) return "\"" + v + "\"";
  else if constexpr (std::is_same_v<V, milliseconds>) return format_duration(v);
  else if constexpr (std::is_enum_v<V>) return std::string("\"") + to_string(v) + "\"";
  else return write_value(v);
}

const char* default_arg(value_kind k) {
  switch (k) {
    case value_kind::boolean: return "";
    case value_kind::integer: return "int";
    case value_kind::size: return "size";
    case value_kind::duration: return "duration";
    default: return "string";
  }
}

// -- the row builder ------------------------------------------------------------------------------

template <class O, class V>
class row_builder {
 public:
  using traits = owner_traits<O>;
  row_builder(V O::*m, std::string_view key, std::string_view doc) : m_(m) {
    s_.table = traits::table;
    s_.key = key;
    s_.doc = doc;
    s_.kind = kind_of<V>();
  }
  row_builder&& flag(std::string_view name, std::string_view arg = {}) && {
    s_.flag = name;
    s_.flag_arg = arg;
    return std::move(*this);
  }
  row_builder&& size() && {
    static_assert(std::is_same_v<V, int64_t>);
    s_.kind = value_kind::size;
    return std::move(*this);
  }
  row_builder&& hot() && { return s_.hot = true, std::move(*this); }
  row_builder&& clamped() && {
    static_assert(std::is_same_v<V, milliseconds>);
    return s_.clamped = true, std::move(*this);
  }
  row_builder&& required() && { return s_.required = true, std::move(*this); }
  row_builder&& discoverable() && { return s_.discoverable = true, std::move(*this); }
  row_builder&& raw_flag() && { return s_.raw_flag = true, std::move(*this); }
  row_builder&& check(std::function<std::string(const V&)> f) && {
    check_ = [f = std::move(f)](const V& v, const O&) { return f(v); };
    return std::move(*this);
  }
  row_builder&& check_in(std::function<std::string(const V&, const O&)> f) && {
    check_ = std::move(f);
    return std::move(*this);
  }
  row_builder&& print_note(std::function<std::string(const O&)> f) && {
    print_note_ = std::move(f);
    return std::move(*this);
  }
  row_builder&& derived(std::string_view words, std::function<void(daemon_config&)> f = {}) && {
    s_.derived = words;
    s_.derive = std::move(f);
    return std::move(*this);
  }

  operator setting() && {
    const auto m = m_;
    const auto kind = s_.kind;
    if (s_.flag_arg.empty() && !s_.flag.empty()) s_.flag_arg = default_arg(kind);
    s_.read = [m, kind](const toml_value& n, daemon_config& c, size_t e) {
      return read_value(n, traits::of(c, e).*m, kind);
    };
    s_.parse_flag = [m, kind](std::string_view t, daemon_config& c, size_t e) {
      return parse_flag_value(t, traits::of(c, e).*m, kind);
    };
    s_.copy = [m](const daemon_config& from, size_t fe, daemon_config& to, size_t te) {
      traits::of(to, te).*m = traits::of(from, fe).*m;
    };
    s_.write = [m](const daemon_config& c, size_t e) { return write_value(traits::of(c, e).*m); };
    s_.flag_text = [m](const daemon_config& c, size_t e) { return flag_text(traits::of(c, e).*m); };
    s_.check = [m, f = check_](const daemon_config& c, size_t e) {
      const O& o = traits::of(c, e);
      return f ? f(o.*m, o) : std::string();
    };
    if (print_note_)
      s_.print_note = [f = print_note_](const daemon_config& c, size_t e) {
        return f(traits::of(c, e));
      };
    if constexpr (std::is_same_v<V, milliseconds>) {
      if (s_.clamped) {
        s_.clamp = [m](daemon_config& c, size_t e) {
          auto& v = traits::of(c, e).*m;
          if (v.count() > 0) return std::string();
          const O defaults{};
          std::string note = format_duration(v) + " is not positive; using " +
                             format_duration(defaults.*m);
          v = defaults.*m;
          return note;
        };
      }
    }
    return std::move(s_);
  }

 private:
  V O::*m_;
  setting s_;
  std::function<std::string(const V&, const O&)> check_;
  std::function<std::string(const O&)> print_note_;
};

template <class O, class V>
row_builder<O, V> row(V O::*m, std::string_view key, std::string_view doc) {
  return row_builder<O, V>(m, key, doc);
}

// -- validators shared by several rows ------------------------------------------------------------

std::string non_negative_bound(int64_t v) { return v < 0 ? "must be >= 0 (0 = no limit)" : ""; }
std::string positive_duration(milliseconds v) { return v.count() <= 0 ? "must be positive" : ""; }

// -- the schema -----------------------------------------------------------------------------------

std::vector<setting> make_schema() {
  using S = server_settings;
  using A = admin_settings;
  using E = engine_settings;
  using M = metrics_settings;
  std::vector<setting> rows;
  const auto add = [&rows](setting s) { rows.push_back(std::move(s)); };

  // [server]
  add(row(&S::address, "address",
          "gRPC target: the one policy server. Not together with a non-empty `targets` (an error "
          "naming both keys)")
          .flag("server")
          .check(check_policy_target));
  add(row(&S::targets, "targets",
          "several policy servers, each a target of its own (HA, see `docs/operations.md` \"HA "
          "policy plane\"): an array of server addresses, `[\"a:9090\", \"b:9090\"]`; a `dns:` "
          "entry stands for every address its name resolves to (DNS fan-out, e.g. a Kubernetes "
          "headless Service `\"dns:///policy-headless.ns.svc.cluster.local:9090\"`). `[]` = the "
          "one `address`. At most 64 entries, no duplicates. A repeated `--server` sets it")
          .check([](const std::vector<std::string>& t) -> std::string {
            if (t.size() > detail::max_targets)
              return "too many entries (at most " + std::to_string(detail::max_targets) + ")";
            for (size_t i = 0; i < t.size(); ++i) {
              if (auto err = check_policy_target(t[i]); !err.empty())
                return "entry " + std::to_string(i + 1) + ": " + err;
              for (size_t j = 0; j < i; ++j)
                if (t[j] == t[i])
                  return "duplicate target \"" + t[i] + "\" (entries " + std::to_string(j + 1) +
                         " and " + std::to_string(i + 1) + ")";
            }
            return {};
          }));
  add(row(&S::readiness, "readiness",
          "when `/readyz` is ready, counting healthy targets: `any` = at least one, `all` = every "
          "one, `quorum` = more than half")
          .flag("server-readiness"));
  add(row(&S::max_target_lag, "max_target_lag",
          "a size (16 MiB by default): how many bytes of reports a target may fall behind (down "
          "or slow) before kvrelay stops queueing for it and marks it for a full re-report when "
          "it returns; positive")
          .size()
          .check([](int64_t v) {
            return v <= 0 ? "must be positive (the bytes a target may fall behind)" : "";
          }));
  add(row(&S::resolve_interval, "resolve_interval",
          "how often a `dns:` target's name is resolved again (addresses that appear become "
          "targets, those that vanish are dropped); it is also resolved again when one of its "
          "targets is lost; 1 s to 24 h")
          .check([](milliseconds v) {
            return v < std::chrono::seconds(1) || v > max_keepalive
                       ? "must be between 1s and " + format_duration(max_keepalive)
                       : std::string();
          }));
  add(row(&S::tls, "tls",
          "use TLS. `ca_file`, `cert_file`, `key_file` and `server_name` require `tls = true`"));
  add(row(&S::ca_file, "ca_file", "PEM roots to trust; `\"\"` = the system roots"));
  add(row(&S::cert_file, "cert_file", "client certificate for mTLS; needs `key_file` too"));
  add(row(&S::key_file, "key_file", "client private key for mTLS; needs `cert_file` too"));
  add(row(&S::server_name, "server_name",
          "TLS server name override; `\"\"` = the host of `address`"));
  add(row(&S::rpc_timeout, "rpc_timeout",
          "deadline of each RPC; ≤ 0 becomes 5 s (reference R04, S10), at most 1 h. A call that "
          "times out doubles the deadline of later calls, up to 16 ×; calls answered in under a "
          "quarter of it halve it back to this value (emitter rule UQ11)")
          .clamped()
          .check([](milliseconds v) {
            return v > max_rpc_timeout ? "must be at most " + format_duration(max_rpc_timeout)
                                       : std::string();
          }));
  add(row(&S::refresh_interval, "refresh_interval",
          "re-report every resident block once in this interval, spread evenly over it (a flat "
          "rate at the server, never a burst of the whole index), so hot prefixes never age out "
          "of the server's TTL; `\"0\"` disables; negative is an error")
          .check([](milliseconds v) {
            return v.count() < 0 ? "must be >= 0 (0 disables the refresh)" : "";
          }));
  add(row(&S::walk_chunk, "walk_chunk",
          "blocks a walk of the index reads and sends at a time to one target (a resync after a "
          "server restart or outage, the refresh, a target that joins, a restored state dir): "
          "each walk holds this many blocks in memory and sends them as one message, the next "
          "after the server acknowledged; 1–65536")
          .check([](int64_t v) {
            return v < 1 || v > 65536 ? "must be between 1 and 65536 (blocks per message)" : "";
          }));
  add(row(&S::replay_wait_windows, "replay_wait_windows",
          "while a pipeline replays history (a catch-up or a gap read back from the engine's "
          "ring, the delta log at start), what it changes waits up to this many debounce "
          "windows, so what the replay stores and evicts meanwhile never reaches the server (a "
          "clear never waits; the first live batch, or a window without a replayed one, ends "
          "the wait); `0` sends a replay's changes as live ones go; 0–600")
          .check([](int64_t v) {
            return v < 0 || v > 600 ? "must be between 0 (off) and 600 (windows)" : "";
          }));
  add(row(&S::max_pending, "max_pending",
          "distinct updates a pipeline holds for a slow server before it sheds its adds and "
          "re-reports them by a walk (never a clear); `0` = derived from the memory budget (a "
          "quarter of it at 128 bytes a key, 16384 at least)")
          .check([](int64_t v) {
            return v < 0 || v > 100'000'000
                       ? "must be between 0 (from the memory budget) and 100000000"
                       : "";
          }));
  add(row(&S::eviction_mode, "eviction_mode",
          "how evictions reach the server: `expire`, `rpc`, or `auto` (= `expire`; see below)")
          .flag("eviction-mode")
          .print_note([](const S& v) {
            return v.eviction_mode != eviction_mode::auto_
                       ? std::string()
                       : std::string("eviction_mode \"auto\" runs as \"") +
                             to_string(effective(eviction_mode::auto_)) + "\"";
          }));
  add(row(&S::scoped_evictions, "scoped_evictions",
          "`rpc` mode: the server reads `CacheEvent.adapter_scoped` (inference-cache PR #164), "
          "so a base-model `PREFIX_EVICTED` drops only the base partition; kvrelay then skips "
          "re-reporting the LoRA entries such an eviction sweeps from a server that does not "
          "(see below)")
          .flag("scoped-evictions"));
  add(row(&S::keepalive_time, "keepalive_time",
          "gRPC keepalive: ping the server after this long without traffic, calls in flight or "
          "not, so a server that died silently (power loss, black-holed network) is noticed; "
          "`\"0\"` disables; at most 24 h. The server must allow it: see below")
          .check([](milliseconds v) {
            return v.count() < 0 || v > max_keepalive
                       ? "must be between 0 (no keepalive pings) and " +
                             format_duration(max_keepalive)
                       : std::string();
          }));
  add(row(&S::keepalive_timeout, "keepalive_timeout",
          "a ping unanswered this long closes the transport (kvrelay then reconnects and "
          "resyncs); positive, at most 24 h")
          .check([](milliseconds v) {
            return v.count() <= 0 || v > max_keepalive
                       ? "must be positive and at most " + format_duration(max_keepalive)
                       : std::string();
          }));
  add(row(&S::on_shutdown, "on_shutdown",
          "kvrelay's last act on SIGTERM, after the drain: `clear` sends `ALL_CLEARED` for each "
          "of its replicas; `keep` leaves the entries to age out at the server's TTL")
          .derived("`\"keep\"` with `state.dir`", [](daemon_config& c) {
            // With a state dir a restart restores the index: the server keeps the entries
            // meanwhile (they age out at its TTL if kvrelay never comes back) instead of a
            // routing hole.
            if (c.state.dir.empty() || c.origin.count("server.on_shutdown")) return;
            c.server.on_shutdown = shutdown_action::keep;
            c.origin["server.on_shutdown"] =
                "default with state.dir (" + origin_of(c, "state.dir") + ")";
          }));

  // [admin]
  add(row(&A::listen, "listen",
          "admin HTTP listen address; `\"\"` disables the admin port. Loopback by default: it "
          "exposes internals")
          .flag("admin-listen", "host:port")
          .check([](const std::string& v) {
            return v.empty() ? std::string() : check_listen_address(v);
          }));
  add(row(&A::token_file, "token_file",
          "file holding a bearer token required by POST endpoints and `/debug/*` (probes — "
          "`/healthz`, `/readyz`, `/readyz/self` — and `/metrics` stay open); required when "
          "`listen` is not loopback; `\"\"` = none. Read once at start: a regular file of at "
          "most 4 KiB, whitespace trimmed at both ends, non-empty, one line"));
  add(row(&A::public_endpoints, "public",
          "with a loopback `listen`, also answer on every other address of the pod or host at "
          "the same port, with `/healthz`, `/readyz`, `/readyz/self` and `/metrics` only "
          "(everything else 403 there, unless `token_file` is set, which then guards it as on a "
          "non-loopback `listen`). `auto` = on inside a Kubernetes pod "
          "(`KUBERNETES_SERVICE_HOST` is set: the kubelet sets it in every container), so an "
          "injected sidecar is scraped on its pod IP with no flag; `on`; `off` = loopback only. "
          "The port is bound as `[::]` (IPv4 too), or `0.0.0.0` on a host without IPv6; a "
          "connection counts as loopback by the address it arrived at")
          .flag("admin-public"));
  add(row(&A::enable_crash_endpoint, "enable_crash_endpoint",
          "expose `/debug/crash` (crashes one actor to drill supervision). Never in production"));
  add(row(&A::max_connections, "max_connections",
          "client connections served at once, 1–4096, so idle or slow clients cannot take every "
          "worker and starve the probes")
          .check([](int64_t v) {
            return v < 1 || v > max_admin_connections
                       ? "must be between 1 and " + std::to_string(max_admin_connections)
                       : std::string();
          }));
  add(row(&A::read_timeout, "read_timeout",
          "a request's header and body must arrive within this (a slow-loris client is cut "
          "off); positive")
          .check(positive_duration));
  add(row(&A::idle_timeout, "idle_timeout",
          "a keep-alive connection idle this long is closed; positive")
          .check(positive_duration));
  add(row(&A::max_body_bytes, "max_body_bytes",
          "a size: larger request bodies are refused unread (after the token check), 0–16 MiB")
          .size()
          .check([](int64_t v) {
            return v < 0 || v > max_admin_body_bytes ? "must be between 0 and 16 MiB" : "";
          }));

  // [state]
  add(row(&state_settings::dir, "dir",
          "the directory; `\"\"` = off. Created at start when missing. Per pipeline a snapshot, "
          "`<pipeline>-<8 hex>.kvsnap` (the hex is a hash of replica, model, tenant, hash "
          "scheme, endpoint, topic and DP rank, so two replicas or engines never share a file), "
          "and its delta log's segments, `<pipeline>-<8 hex>.<16 hex>.kvlog`. A pipeline that "
          "writes a snapshot removes the files of its earlier endpoints. An explicit dir that "
          "cannot be written fails `--check` and the start, with its path and the reason; "
          "`--check` also says what the dir holds now")
          .flag("state-dir", "dir")
          .print_note([](const state_settings& v) {
            return v.dir.empty() ? "dir \"\": the durable index is off" : "";
          }));
  add(row(&state_settings::interval, "interval",
          "time between snapshots; `\"0s\"` = derived: with the delta log, once a few seconds "
          "after a start, then whenever the log outgrows the last snapshot's size; without a "
          "working log (it stopped on an I/O error or at its bound), a quarter of the replay "
          "ring's span at the observed batch rate, at least 1 s, at most 60 s. Negative is an "
          "error")
          .check([](milliseconds v) { return v.count() < 0 ? "must be >= 0 (0 = derived)" : ""; })
          .print_note([](const state_settings& v) {
            return v.interval.count() != 0
                       ? ""
                       : "interval \"0s\": with the delta log, when it outgrows the last "
                         "snapshot; without, a quarter of the replay ring's span (1s to 60s)";
          }));
  add(row(&state_settings::ring_batches, "ring_batches",
          "the engine's replay ring size (vLLM and SGLang `buffer_steps`), for the derived "
          "interval until kvrelay has learnt the ring's span from the engine's replies; ≥ 1")
          .check([](int64_t v) { return v < 1 ? "must be at least 1" : ""; }));

  // [memory]
  add(row(&memory_settings::budget, "budget",
          "memory budget, a size (`\"96MiB\"`, or bytes). `0` = derived: the cgroup's memory "
          "limit (v1 `memory.limit_in_bytes`, v2 `memory.max`, found through "
          "`/proc/self/cgroup`) less what the process holds beyond it (a quarter of the limit, "
          "at least 24 MiB; never under 8 MiB), or 512 MiB when there is no limit. Otherwise at "
          "least 4 MiB")
          .size()
          .flag("memory-budget")
          .print_note([](const memory_settings& v) {
            return v.budget != 0 ? ""
                                 : "budget 0: the cgroup's memory limit less a quarter (less at "
                                   "least 24MiB), else 512MiB";
          })
          .check([](int64_t v) {
            return v != 0 && v < (int64_t{4} << 20)
                       ? "must be 0 (from the cgroup's limit) or at least 4MiB"
                       : "";
          }));

  // [cpu]
  add(row(&cpu_settings::scheduling, "scheduling",
          "`batch` (Linux `SCHED_BATCH`, for every thread of kvrelay: one that wakes waits for "
          "the running thread, the engine's included, to sleep or use up its slice instead of "
          "preempting it; a quarter to a third fewer context switches a block) or `inherit` "
          "(the policy kvrelay was started with). `batch` changes only the normal policy: one "
          "chosen by whoever started kvrelay (`chrt`, the runtime) is kept")
          .flag("cpu-scheduling"));

  // [log]
  add(row(&log_settings::format, "format",
          "`json` (one object per line on stderr, like the Go sidecar) or `text`; every line "
          "follows it, the first (`kvevent-subscriber starting`) and a configuration error "
          "included (an error in the file itself is written in the flag's format, or JSON)")
          .flag("log-format"));
  add(row(&log_settings::level, "level", "lowest level logged: `debug`, `info`, `warn` or `error`")
          .flag("log-level")
          .hot());

  // [[engine]]
  add(row(&E::replica_id, "replica_id",
          "replica identity reported to the server; unique across engines")
          .flag("replica-id")
          .required());
  add(row(&E::url, "url",
          "the engine's own HTTP server, e.g. `\"http://127.0.0.1:8000\"` (a base: no query or "
          "fragment); with it the settings marked *discoverable* are learnt from the engine "
          "unless given (see *Engine discovery*); `\"\"` = no discovery")
          .flag("engine-url", "url")
          .check_in([](const std::string& v, const E& e) {
            return v.empty() || e.url_derived ? std::string() : detail::check_engine_url(v);
          }));
  add(row(&E::discover_via_metrics, "discover_via_metrics",
          "without `url`: take the engine's HTTP server from `[engine.metrics] url` (its scheme, "
          "host and port, the path before `/metrics`) and learn from it what it says, as with "
          "`url`, except that nothing waits for it: every setting not given keeps its "
          "configured value until the engine says otherwise, and an engine that says nothing "
          "usable (an older vLLM answers 404) runs exactly on the configured settings (see "
          "*Learning from the metrics URL*)")
          .flag("discover-via-metrics")
          .derived("`true` for an engine from flags alone (no `--config`)")
          .print_note([](const E& e) {
            return !e.url_derived ? ""
                                  : "the settings given win; the rest are learnt from the "
                                    "engine, or run as configured while it says nothing usable";
          }));
  add(row(&E::model_id, "model_id",
          "model id the index is keyed by (not the Prometheus label)")
          .flag("model-id")
          .required()
          .discoverable());
  add(row(&E::tenant_id, "tenant_id", "tenant, optional").flag("tenant-id"));
  add(row(&E::hash_scheme, "hash_scheme",
          "stamped on every report; must be non-empty; `\"sglang\"` selects the SGLang metric "
          "profile, anything else vLLM's")
          .flag("hash-scheme")
          .required()
          .discoverable());
  add(row(&E::endpoint, "endpoint", "engine ZMQ PUB endpoint to subscribe to")
          .flag("engine-endpoint")
          .discoverable()
          .check(check_endpoint));
  add(row(&E::replay_endpoint, "replay_endpoint",
          "the engine's ZMQ ROUTER replay endpoint (vLLM `replay_endpoint`); `\"\"` = no replay, "
          "gaps are then cleared rather than recovered. Must differ from `endpoint`")
          .flag("replay-endpoint")
          .discoverable()
          .check([](const std::string& v) { return v.empty() ? std::string() : check_endpoint(v); }));
  add(row(&E::topic, "topic",
          "ZMQ SUB topic prefix; `\"\"` = every topic (SGLang and vLLM publish `\"\"` unless told "
          "otherwise)")
          .flag("topic")
          .discoverable());
  add(row(&E::dp_size, "dp_size",
          "data-parallel ranks, 1–1024. Rank *r* subscribes to `endpoint`'s port + *r* (and "
          "`replay_endpoint`'s port + *r*); `inproc://x` becomes `inproc://x_dp<r>`; `ipc://` "
          "cannot be ranked")
          .flag("dp-size")
          .discoverable()
          .check([](int64_t v) {
            return v < 1 || v > detail::max_dp_size
                       ? "must be between 1 and " + std::to_string(detail::max_dp_size)
                       : std::string();
          }));
  add(row(&E::dp_mode, "dp_mode",
          "`separate`: rank *r* is reported as replica `<replica_id>-dp<r>`; `merged`: every "
          "rank reports as `replica_id`. Each rank keeps its own sequence and replay state "
          "either way")
          .flag("dp-mode"));
  add(row(&E::window, "window", "debounce window of adds; ≤ 0 becomes 100 ms (R04)")
          .flag("window")
          .clamped());
  add(row(&E::reconnect_backoff, "reconnect_backoff",
          "constant delay before re-dialling the engine; ≤ 0 becomes 1 s (N02)")
          .clamped());
  add(row(&E::discovery_retry_max, "discovery_retry_max",
          "with `url`: the cap of the jittered backoff between discovery attempts that failed; "
          "positive")
          .check(positive_duration));
  add(row(&E::l2_tier, "l2_tier",
          "the replica has an L2 tier that emits no events (LMCache): a BlockRemoved is reported "
          "as a T2 downgrade, not an eviction")
          .flag("ignore-block-removed"));
  add(row(&E::unknown_parent, "unknown_parent",
          "a BlockStored whose parent was never seen: `drop` (not indexed, counted) or `root` "
          "(indexed as a sequence root, the Go sidecar's behaviour, which can give false prefix "
          "matches)")
          .flag("unknown-parent"));
  add(row(&E::index_salted, "index_salted",
          "also index blocks carrying a cache salt or multimodal extra keys under the "
          "token-only fingerprint. Off by default: such a hint could point one tenant at "
          "another's cache"));
  add(row(&E::max_blocks_per_adapter, "max_blocks_per_adapter",
          "bound on the reverse map of one adapter partition: past it the block stored first is "
          "evicted (from the server too); `0` = no bound of its own. The memory budget bounds "
          "the whole index anyway (`docs/operations.md`, \"How memory is bounded\"); a bound "
          "here costs 8 bytes a block")
          .check(non_negative_bound));
  add(row(&E::max_t2_blocks_per_adapter, "max_t2_blocks_per_adapter",
          "per adapter partition, at most this many blocks with a copy at T2 (CPU); past it the "
          "block *stored* longest ago (a re-store counts) loses the tier: evicted from the "
          "server when no other tier holds it "
          "(`kvrelay_index_blocks_total{outcome=\"t2_cap_dropped\"}`). For sources that store "
          "and never remove, such as LMCache's multi-process mode: set it to what that store "
          "holds (`config/examples/lmcache-mp.toml`). A tier that sends removals stays below "
          "the default; `0` = no bound")
          .check(non_negative_bound));
  add(row(&E::max_t3_blocks_per_adapter, "max_t3_blocks_per_adapter",
          "the same for T3 (disk, storage, remote)")
          .check(non_negative_bound));

  // [engine.metrics]
  add(row(&M::url, "url",
          "engine Prometheus /metrics URL; `\"\"` disables scraping and stats reports; not given, "
          "an engine with `url` is scraped at `url` + `/metrics`")
          .flag("engine-metrics-url")
          .check([](const std::string& v) { return v.empty() ? std::string() : check_url(v); }));
  add(row(&M::interval, "interval",
          "engine metrics scrape and report cadence; ≤ 0 becomes 10 s (S10)")
          .flag("stats-interval")
          .clamped());
  add(row(&M::timeout, "timeout",
          "deadline of one scrape (connect, request, whole answer). A /metrics endpoint that "
          "hangs holds only the scraper's own thread: KV events, restarts and shutdown never "
          "wait for it; the next scrape is skipped while one is still out. Positive, at most 1 h")
          .check([](milliseconds v) {
            if (v.count() <= 0) return std::string("must be positive");
            return v > max_rpc_timeout ? "must be at most " + format_duration(max_rpc_timeout)
                                       : std::string();
          }));
  add(row(&M::tier, "cache_tier",
          "usage gauge the scraper reads: `auto` (kv, then gpu, then cpu), `kv`, `gpu`, `cpu`; "
          "case-sensitive")
          .flag("cache-tier")
          .raw_flag());
  add(row(&M::model_label, "model_label",
          "only series whose `model_name` label equals this; `\"\"` = every series")
          .flag("engine-model-name"));
  add(row(&M::cache_size_bytes, "cache_size_bytes",
          "engine KV capacity (a size): reported bytes = usage × this; `0` reports 0 bytes")
          .size()
          .flag("engine-cache-size-bytes", "int")
          .check([](int64_t v) { return v < 0 ? "must be >= 0" : ""; }));
  add(row(&M::max_concurrency, "max_concurrency",
          "pressure denominator: pressure = (running + waiting) / this, clamped to [0, 1]; ≤ 0 "
          "disables pressure")
          .flag("max-concurrency-ceiling"));
  return rows;
}

// Markdown of a default: the TOML text, then what else decides it.
std::string doc_default(const setting& s, const daemon_config& defaults) {
  std::string out = "`" + s.write(defaults, 0) + "`";
  if (s.required) out += s.discoverable ? " (**required**, *discoverable*)" : " (**required**)";
  else if (s.discoverable) out += " (*discoverable*)";
  if (!s.derived.empty()) out += "; " + std::string(s.derived);
  return out;
}

// A table cell holds no line break and no unescaped '|'.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

daemon_config defaults_with_engine() {
  daemon_config c;
  c.engines.emplace_back();
  return c;
}

}  // namespace

std::string setting::path(size_t engine_index) const {
  if (!engine()) return std::string(table) + "." + std::string(key);
  return detail::engine_path(engine_index) + (table == "engine" ? "." : ".metrics.") +
         std::string(key);
}

std::string setting::doc_path() const { return std::string(table) + "." + std::string(key); }

const std::vector<setting>& schema() {
  static const std::vector<setting> rows = make_schema();
  return rows;
}

const std::vector<std::string_view>& schema_tables() {
  static const std::vector<std::string_view> tables = {
      "server", "admin", "state", "memory", "cpu", "log", "engine", "engine.metrics"};
  return tables;
}

std::vector<const setting*> schema_table(std::string_view table) {
  std::vector<const setting*> out;
  for (const auto& s : schema())
    if (s.table == table) out.push_back(&s);
  return out;
}

const setting* find_setting(std::string_view table, std::string_view key) {
  for (const auto& s : schema())
    if (s.table == table && s.key == key) return &s;
  return nullptr;
}

const setting* find_flag_setting(std::string_view flag) {
  if (flag.empty()) return nullptr;
  for (const auto& s : schema())
    if (s.flag == flag) return &s;
  return nullptr;
}

const std::vector<command_flag>& command_flags() {
  static const std::vector<command_flag> flags = {
      {"config", "file", "", false, "\"\"",
       "TOML configuration file (flags override its single engine)"},
      {"check", "", "", false, "false",
       "validate the configuration, print the effective one as TOML, exit 0 (valid) or 2"},
      {"version", "", "", false, "false",
       "print the version and the libraries' versions, then exit"},
      {"lora-adapter-names", "string", "engine.adapters", true, "\"\"",
       "LoRA id=name map, comma separated (\"1=sql-lora,2=chat\"); replaces `[engine.adapters]`; "
       "unmapped ids are dropped"},
  };
  return flags;
}

std::string reference_table(std::string_view table) {
  const daemon_config defaults = defaults_with_engine();
  std::string out;
  if (table == "flags") {
    out += "| flag | config key | default |\n|---|---|---|\n";
    const auto line = [&out](std::string_view name, std::string_view arg, const std::string& key,
                             const std::string& def) {
      out += "| `--" + std::string(name) + (arg.empty() ? "" : " " + std::string(arg)) + "` | " +
             key + " | " + def + " |\n";
    };
    for (const auto& f : command_flags()) {
      const std::string key = f.key.empty() ? "—" : "`" + std::string(f.key) + "`";
      line(f.name, f.arg, key + " (" + cell(f.doc) + ")", "`" + std::string(f.default_text) + "`");
    }
    for (const auto& s : schema()) {
      if (s.flag.empty()) continue;
      std::string def = "`" + s.flag_text(defaults, 0) + "`";
      if (s.required) def += s.discoverable ? " (**required** unless discovered)" : " (**required**)";
      if (!s.derived.empty()) def += "; " + std::string(s.derived);
      line(s.flag, s.flag_arg, "`" + s.doc_path() + "`", def);
    }
    return out;
  }
  const auto rows = schema_table(table);
  if (rows.empty()) return {};
  out += "| key | default | flag | meaning |\n|---|---|---|---|\n";
  for (const auto* s : rows) {
    out += "| `" + std::string(s->key) + "` | " + doc_default(*s, defaults) + " | " +
           (s->flag.empty() ? std::string("—") : "`--" + std::string(s->flag) + "`") + " | " +
           cell(s->doc) + " |\n";
  }
  return out;
}

std::string with_reference_tables(std::string_view doc) {
  static constexpr std::string_view open = "<!-- schema: ", close = "<!-- /schema -->";
  std::string out;
  size_t pos = 0;
  while (pos < doc.size()) {
    const size_t start = doc.find(open, pos);
    if (start == std::string_view::npos) break;
    const size_t name_end = doc.find(" -->\n", start);
    const size_t end = name_end == std::string_view::npos ? name_end : doc.find(close, name_end);
    if (end == std::string_view::npos) break;
    const std::string name(doc.substr(start + open.size(), name_end - start - open.size()));
    const std::string table = reference_table(name);
    const size_t body = name_end + 5;
    out += doc.substr(pos, body - pos);
    out += table.empty() ? std::string(doc.substr(body, end - body)) : table;
    pos = end;
    out += doc.substr(pos, close.size());
    pos += close.size();
  }
  out += doc.substr(pos);
  return out;
}

}  // namespace kvrelay::config
