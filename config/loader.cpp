// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// TOML in and out: the field tables, the reader (file:line:col errors), to_toml and the reload
// diff. Longer than most files because all four walk the same tables, which keeps a key's name,
// type and printing in one place. Flags, validation and files are in checks.cpp.
#include "config/loader.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <type_traits>

#include "base/read_file.hpp"
#include "config/internal.hpp"
#include "config/values.hpp"

namespace kvrelay::config {

using detail::closest_match;
using detail::engine_path;
using detail::max_engines;
using detail::parse_decimal_int64;

namespace {

constexpr size_t max_file_bytes = 1 << 20;

// -- small helpers --------------------------------------------------------------------------------

template <class T>
struct member;
template <class C, class V>
struct member<V C::*> {
  using owner = C;
  using value = V;
};
template <auto M>
using owner_of = typename member<decltype(M)>::owner;
template <auto M>
using value_of = typename member<decltype(M)>::value;

template <class T>
constexpr bool is_enum_setting = std::is_same_v<T, dp_mode> || std::is_same_v<T, unknown_parent> ||
                                 std::is_same_v<T, cache_tier> ||
                                 std::is_same_v<T, eviction_mode> ||
                                 std::is_same_v<T, shutdown_action> ||
                                 std::is_same_v<T, readiness_policy> ||
                                 std::is_same_v<T, admin_public> ||
                                 std::is_same_v<T, log_format> || std::is_same_v<T, log_level>;

const char* allowed_for(dp_mode) { return allowed_dp_modes(); }
const char* allowed_for(eviction_mode) { return allowed_eviction_modes(); }
const char* allowed_for(shutdown_action) { return allowed_shutdown_actions(); }
const char* allowed_for(readiness_policy) { return allowed_readiness_policies(); }
const char* allowed_for(admin_public) { return allowed_admin_public(); }
const char* allowed_for(unknown_parent) { return allowed_unknown_parents(); }
const char* allowed_for(cache_tier) { return allowed_cache_tiers(); }
const char* allowed_for(log_format) { return allowed_log_formats(); }
const char* allowed_for(log_level) { return allowed_log_levels(); }

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "nothing";
  }
}

std::string expected(const char* what, const toml::node& n) {
  return std::string("expected ") + what + ", got " + type_name(n);
}

// A TOML basic string: quotes, backslashes and control characters escaped; UTF-8 kept.
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

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// toml++ iterates a table in key order; messages should follow the file's order, so the first
// error reported is the first one a reader meets.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> out;
  out.reserve(t.size());
  for (auto&& [k, v] : t) out.emplace_back(&k, &v);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const auto &x = a.first->source().begin, &y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return out;
}

// -- field tables: one per section; the loader, to_toml and the reload diff all walk them ---------

template <class S>
struct field_def {
  const char* key;
  std::string (*read)(const toml::node&, S&);  // error text, empty when fine
  std::string (*write)(const S&);              // the value as TOML
};

template <auto M>
std::string rd(const toml::node& n, owner_of<M>& s) {
  using V = value_of<M>;
  if constexpr (std::is_same_v<V, std::string>) {
    if (const auto* v = n.as_string()) {
      s.*M = v->get();
      return {};
    }
    return expected("a string", n);
  } else if constexpr (std::is_same_v<V, bool>) {
    if (const auto* v = n.as_boolean()) {
      s.*M = v->get();
      return {};
    }
    return expected("a boolean (true or false)", n);
  } else if constexpr (std::is_same_v<V, int64_t>) {
    if (const auto* v = n.as_integer()) {
      s.*M = v->get();
      return {};
    }
    return expected("an integer", n);
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    const auto* arr = n.as_array();
    if (!arr) return expected("an array of strings", n);
    if (arr->size() > detail::max_targets)
      return "too many entries (at most " + std::to_string(detail::max_targets) + ")";
    std::vector<std::string> out;
    for (size_t i = 0; i < arr->size(); ++i) {
      const auto* v = arr->get(i)->as_string();
      if (!v)
        return "entry " + std::to_string(i + 1) + ": " + expected("a string", *arr->get(i));
      out.push_back(v->get());
    }
    s.*M = std::move(out);
    return {};
  } else if constexpr (std::is_same_v<V, milliseconds>) {
    const auto* v = n.as_string();
    if (!v) return expected("a duration string such as \"100ms\", \"10s\" or \"1m\"", n);
    return parse_duration(v->get(), s.*M);
  } else {
    static_assert(is_enum_setting<V>);
    const auto* v = n.as_string();
    if (!v) return expected(("one of the strings " + std::string(allowed_for(V{}))).c_str(), n);
    if (!parse(v->get(), s.*M))
      return "invalid value \"" + v->get() + "\" (allowed: " + allowed_for(V{}) + ")";
    return {};
  }
}

// Sizes take an integer byte count or a string with a unit.
template <auto M>
std::string rd_size(const toml::node& n, owner_of<M>& s) {
  if (const auto* v = n.as_integer()) {
    if (v->get() < 0) return "must be >= 0";
    s.*M = v->get();
    return {};
  }
  if (const auto* v = n.as_string()) return parse_size(v->get(), s.*M);
  return expected("a size (an integer byte count or a string such as \"16GiB\")", n);
}

template <auto M>
std::string wr(const owner_of<M>& s) {
  using V = value_of<M>;
  if constexpr (std::is_same_v<V, std::string>) return toml_quote(s.*M);
  else if constexpr (std::is_same_v<V, bool>) return s.*M ? "true" : "false";
  else if constexpr (std::is_same_v<V, int64_t>) return std::to_string(s.*M);
  else if constexpr (std::is_same_v<V, milliseconds>) return toml_quote(format_duration(s.*M));
  else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    std::string out = "[";
    for (const auto& v : s.*M) out += (out.size() > 1 ? ", " : "") + toml_quote(v);
    return out + "]";
  }
  else return toml_quote(to_string(s.*M));
}

#define KVRELAY_FIELD(S, key, member) field_def<S>{key, &rd<&S::member>, &wr<&S::member>}
#define KVRELAY_SIZE_FIELD(S, key, member) \
  field_def<S>{key, &rd_size<&S::member>, &wr<&S::member>}

const field_def<server_settings> server_fields[] = {
    KVRELAY_FIELD(server_settings, "address", address),
    KVRELAY_FIELD(server_settings, "targets", targets),
    KVRELAY_FIELD(server_settings, "readiness", readiness),
    KVRELAY_SIZE_FIELD(server_settings, "max_target_lag", max_target_lag),
    KVRELAY_FIELD(server_settings, "resolve_interval", resolve_interval),
    KVRELAY_FIELD(server_settings, "tls", tls),
    KVRELAY_FIELD(server_settings, "ca_file", ca_file),
    KVRELAY_FIELD(server_settings, "cert_file", cert_file),
    KVRELAY_FIELD(server_settings, "key_file", key_file),
    KVRELAY_FIELD(server_settings, "server_name", server_name),
    KVRELAY_FIELD(server_settings, "rpc_timeout", rpc_timeout),
    KVRELAY_FIELD(server_settings, "refresh_interval", refresh_interval),
    KVRELAY_FIELD(server_settings, "walk_chunk", walk_chunk),
    KVRELAY_FIELD(server_settings, "max_pending", max_pending),
    KVRELAY_FIELD(server_settings, "eviction_mode", eviction_mode),
    KVRELAY_FIELD(server_settings, "scoped_evictions", scoped_evictions),
    KVRELAY_FIELD(server_settings, "keepalive_time", keepalive_time),
    KVRELAY_FIELD(server_settings, "keepalive_timeout", keepalive_timeout),
    KVRELAY_FIELD(server_settings, "on_shutdown", on_shutdown),
};

const field_def<admin_settings> admin_fields[] = {
    KVRELAY_FIELD(admin_settings, "listen", listen),
    KVRELAY_FIELD(admin_settings, "token_file", token_file),
    KVRELAY_FIELD(admin_settings, "public", public_endpoints),
    KVRELAY_FIELD(admin_settings, "enable_crash_endpoint", enable_crash_endpoint),
    KVRELAY_FIELD(admin_settings, "max_connections", max_connections),
    KVRELAY_FIELD(admin_settings, "read_timeout", read_timeout),
    KVRELAY_FIELD(admin_settings, "idle_timeout", idle_timeout),
    KVRELAY_SIZE_FIELD(admin_settings, "max_body_bytes", max_body_bytes),
};

const field_def<state_settings> state_fields[] = {
    KVRELAY_FIELD(state_settings, "dir", dir),
    KVRELAY_FIELD(state_settings, "interval", interval),
    KVRELAY_FIELD(state_settings, "ring_batches", ring_batches),
};

const field_def<memory_settings> memory_fields[] = {
    KVRELAY_SIZE_FIELD(memory_settings, "budget", budget),
};

const field_def<log_settings> log_fields[] = {
    KVRELAY_FIELD(log_settings, "format", format),
    KVRELAY_FIELD(log_settings, "level", level),
};

const field_def<engine_settings> engine_fields[] = {
    KVRELAY_FIELD(engine_settings, "replica_id", replica_id),
    KVRELAY_FIELD(engine_settings, "url", url),
    KVRELAY_FIELD(engine_settings, "discover_via_metrics", discover_via_metrics),
    KVRELAY_FIELD(engine_settings, "model_id", model_id),
    KVRELAY_FIELD(engine_settings, "tenant_id", tenant_id),
    KVRELAY_FIELD(engine_settings, "hash_scheme", hash_scheme),
    KVRELAY_FIELD(engine_settings, "endpoint", endpoint),
    KVRELAY_FIELD(engine_settings, "replay_endpoint", replay_endpoint),
    KVRELAY_FIELD(engine_settings, "topic", topic),
    KVRELAY_FIELD(engine_settings, "dp_size", dp_size),
    KVRELAY_FIELD(engine_settings, "dp_mode", dp_mode),
    KVRELAY_FIELD(engine_settings, "window", window),
    KVRELAY_FIELD(engine_settings, "reconnect_backoff", reconnect_backoff),
    KVRELAY_FIELD(engine_settings, "discovery_retry_max", discovery_retry_max),
    KVRELAY_FIELD(engine_settings, "l2_tier", l2_tier),
    KVRELAY_FIELD(engine_settings, "unknown_parent", unknown_parent),
    KVRELAY_FIELD(engine_settings, "index_salted", index_salted),
    KVRELAY_FIELD(engine_settings, "max_blocks_per_adapter", max_blocks_per_adapter),
    KVRELAY_FIELD(engine_settings, "max_t2_blocks_per_adapter", max_t2_blocks_per_adapter),
    KVRELAY_FIELD(engine_settings, "max_t3_blocks_per_adapter", max_t3_blocks_per_adapter),
};

const field_def<metrics_settings> metrics_fields[] = {
    KVRELAY_FIELD(metrics_settings, "url", url),
    KVRELAY_FIELD(metrics_settings, "interval", interval),
    KVRELAY_FIELD(metrics_settings, "cache_tier", tier),
    KVRELAY_FIELD(metrics_settings, "model_label", model_label),
    KVRELAY_SIZE_FIELD(metrics_settings, "cache_size_bytes", cache_size_bytes),
    KVRELAY_FIELD(metrics_settings, "max_concurrency", max_concurrency),
};

#undef KVRELAY_FIELD
#undef KVRELAY_SIZE_FIELD

// -- the TOML reader ------------------------------------------------------------------------------

class reader {
 public:
  explicit reader(std::string file) : file_(std::move(file)) {}

  outcome<daemon_config> run(const toml::table& root) {
    for (auto [kp, vp] : in_file_order(root)) {
      const toml::key& k = *kp;
      const toml::node& v = *vp;
      const std::string key(k.str());
      if (key == "server") {
        if (!section(v, "server", server_fields, cfg_.server)) return error();
      } else if (key == "admin") {
        if (!section(v, "admin", admin_fields, cfg_.admin)) return error();
      } else if (key == "log") {
        if (!section(v, "log", log_fields, cfg_.log)) return error();
      } else if (key == "state") {
        if (!section(v, "state", state_fields, cfg_.state)) return error();
      } else if (key == "memory") {
        if (!section(v, "memory", memory_fields, cfg_.memory)) return error();
      } else if (key == "engine") {
        if (!engines(v)) return error();
      } else {
        unknown(k, key, {"server", "admin", "state", "memory", "log", "engine"});
        return error();
      }
    }
    // One server or several, never both: which one a reader meant is not for kvrelay to guess.
    const auto address = cfg_.origin.find("server.address");
    const auto targets = cfg_.origin.find("server.targets");
    if (address != cfg_.origin.end() && !cfg_.server.targets.empty())
      return invalid(targets->second + ": server.targets: cannot be used with server.address (" +
                     address->second + "); list every server in targets");
    // A file without engines is reported against the file (flags may still add one).
    if (cfg_.engines.empty()) cfg_.origin["engine"] = file_;
    detail::mark_given(cfg_);
    return std::move(cfg_);
  }

 private:
  std::string where(const toml::source_region& r) const {
    return file_ + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
  }

  bool fail(const toml::source_region& r, const std::string& path, const std::string& msg) {
    error_ = where(r) + ": " + path + ": " + msg;
    return false;
  }

  failure error() const { return invalid(error_); }

  // One line naming the key, a close match if there is one, and every allowed key.
  bool unknown(const toml::key& k, const std::string& path,
               const std::vector<std::string_view>& allowed) {
    const std::string name(k.str());
    std::string list;
    for (auto a : allowed) {
      if (!list.empty()) list += ", ";
      list += a;
    }
    const std::string guess = closest_match(name, allowed);
    std::string msg = "unknown key";
    if (!guess.empty()) msg += "; did you mean \"" + guess + "\"?";
    return fail(k.source(), path, msg + " (allowed: " + list + ")");
  }

  template <class S, size_t N>
  bool section(const toml::node& node, const std::string& path, const field_def<S> (&fields)[N],
               S& out, std::initializer_list<std::string_view> subtables = {},
               std::vector<std::pair<std::string, const toml::node*>>* sub_out = nullptr) {
    const auto* tbl = node.as_table();
    if (!tbl) return fail(node.source(), path, expected("a table", node));
    cfg_.origin[path] = where(node.source());
    for (auto [kp, vp] : in_file_order(*tbl)) {
      const toml::key& k = *kp;
      const toml::node& v = *vp;
      const std::string name(k.str());
      if (sub_out && std::find(subtables.begin(), subtables.end(), name) != subtables.end()) {
        sub_out->emplace_back(name, &v);
        continue;
      }
      const field_def<S>* f = nullptr;
      for (const auto& candidate : fields)
        if (name == candidate.key) f = &candidate;
      if (!f) {
        std::vector<std::string_view> allowed;
        for (const auto& candidate : fields) allowed.emplace_back(candidate.key);
        allowed.insert(allowed.end(), subtables.begin(), subtables.end());
        return unknown(k, path + "." + name, allowed);
      }
      const std::string key_path = path + "." + name;
      cfg_.origin[key_path] = where(v.source());
      if (auto err = f->read(v, out); !err.empty()) return fail(v.source(), key_path, err);
    }
    return true;
  }

  bool engines(const toml::node& node) {
    const auto* arr = node.as_array();
    if (!arr)
      return fail(node.source(), "engine",
                  expected("[[engine]] tables (an array of tables)", node));
    if (arr->size() > max_engines)
      return fail(node.source(), "engine",
                  "too many engines (at most " + std::to_string(max_engines) + ")");
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node& el = *arr->get(i);
      const std::string path = "engine[" + std::to_string(i) + "]";
      engine_settings e;
      std::vector<std::pair<std::string, const toml::node*>> subs;
      if (!section(el, path, engine_fields, e, {"metrics", "adapters"}, &subs)) return false;
      for (const auto& [name, sub] : subs) {
        if (name == "metrics") {
          if (!section(*sub, path + ".metrics", metrics_fields, e.metrics)) return false;
        } else if (!adapters(*sub, path + ".adapters", e.adapters)) {
          return false;
        }
      }
      cfg_.engines.push_back(std::move(e));
    }
    return true;
  }

  bool adapters(const toml::node& node, const std::string& path,
                std::map<int64_t, std::string>& out) {
    const auto* tbl = node.as_table();
    if (!tbl) return fail(node.source(), path, expected("a table of id = \"name\"", node));
    cfg_.origin[path] = where(node.source());
    for (auto [kp, vp] : in_file_order(*tbl)) {
      const toml::key& k = *kp;
      const toml::node& v = *vp;
      const std::string key(k.str());
      const std::string key_path = path + "." + key;
      int64_t id = 0;
      if (!parse_decimal_int64(key, id))
        return fail(k.source(), key_path, "adapter id must be a base-10 integer (LoRA id)");
      const auto* name = v.as_string();
      if (!name) return fail(v.source(), key_path, expected("the adapter name as a string", v));
      if (name->get().empty()) return fail(v.source(), key_path, "adapter name must not be empty");
      if (!out.emplace(id, name->get()).second)
        return fail(k.source(), key_path, "duplicate adapter id " + std::to_string(id));
      cfg_.origin[key_path] = where(v.source());
    }
    return true;
  }

  std::string file_;
  std::string error_;
  daemon_config cfg_;
};

// Flattened values for the reload diff: (scope, key) → TOML text, where scope is "" for the
// global sections and the replica id for an engine (key "" marks the engine's presence).
using flat_config = std::map<std::pair<std::string, std::string>, std::string>;

flat_config flatten(const daemon_config& c) {
  flat_config out;
  for (const auto& f : server_fields) out[{"", "server." + std::string(f.key)}] = f.write(c.server);
  for (const auto& f : admin_fields) out[{"", "admin." + std::string(f.key)}] = f.write(c.admin);
  // Compared, never shown: a rotated token is a change the running admin port does not apply.
  out[{"", "admin.token"}] = c.admin.token;
  for (const auto& f : log_fields) out[{"", "log." + std::string(f.key)}] = f.write(c.log);
  for (const auto& f : state_fields) out[{"", "state." + std::string(f.key)}] = f.write(c.state);
  for (const auto& f : memory_fields)
    out[{"", "memory." + std::string(f.key)}] = f.write(c.memory);
  for (const auto& e : c.engines) {
    const std::string& id = e.replica_id;
    out[{id, ""}] = "present";
    for (const auto& f : engine_fields) {
      // A URL derived from metrics.url is not configuration: metrics.url and
      // discover_via_metrics are, and stand for it.
      if (std::string_view(f.key) == "url" && e.url_derived) {
        out[{id, f.key}] = toml_quote("");
        continue;
      }
      out[{id, f.key}] = discovered(e, f.key) ? "(discovered at start)" : f.write(e);
    }
    for (const auto& f : metrics_fields) out[{id, "metrics." + std::string(f.key)}] = f.write(e.metrics);
    for (const auto& [aid, name] : e.adapters)
      out[{id, "adapters." + std::to_string(aid)}] = toml_quote(name);
  }
  return out;
}

}  // namespace

// -- public API -----------------------------------------------------------------------------------

outcome<daemon_config> parse_toml(std::string_view text, const std::string& source_name) {
  try {
    toml::table root;
    try {
      root = toml::parse(text, source_name);
    } catch (const toml::parse_error& e) {
      const auto& b = e.source().begin;
      return invalid(source_name + ":" + std::to_string(b.line) + ":" +
                     std::to_string(b.column) + ": TOML syntax error: " +
                     std::string(e.description()));
    }
    return reader(source_name).run(root);
  } catch (const std::exception& e) {
    return invalid(source_name + ": cannot load configuration: " + e.what());
  }
}

outcome<daemon_config> load_toml(const std::string& path) {
  try {
    auto text = read_regular_file(path, max_file_bytes, "config file");
    if (!text) return invalid(path + ": " + text.error().context);
    return parse_toml(text.value(), path);
  } catch (const std::exception& e) {
    return invalid(path + ": cannot load configuration: " + e.what());
  }
}

std::string to_toml(const daemon_config& c) {
  std::ostringstream out;
  // hidden(key): why the value is not in force (the engine will tell it; another key stands for
  // it), shown as a comment instead of the value, or "": the value; after(key): a comment line
  // that explains the value just printed.
  auto section = [&out](const char* header, const auto& fields, const auto& s, auto&& hidden,
                        auto&& after) {
    out << header << "\n";
    for (const auto& f : fields) {
      if (auto why = hidden(f.key); !why.empty()) out << "# " << f.key << " = " << why << "\n";
      else out << f.key << " = " << f.write(s) << "\n";
      out << after(f.key);
    }
  };
  const auto none = [](std::string_view) { return std::string(); };
  out << "# kvrelay effective configuration (defaults included)\n\n";
  const auto server_hidden = [&c](std::string_view k) {
    return k == "address" && !c.server.targets.empty()
               ? std::string("(unused: the servers are the targets)")
               : std::string();
  };
  section("[server]", server_fields, c.server, server_hidden, [&c](std::string_view k) {
    if (k != "eviction_mode" || c.server.eviction_mode != eviction_mode::auto_) return std::string();
    return std::string("# eviction_mode \"auto\" runs as \"") +
           to_string(effective(eviction_mode::auto_)) + "\"\n";
  });
  out << "\n";
  section("[admin]", admin_fields, c.admin, none, none);
  out << "\n";
  section("[state]", state_fields, c.state, none, [&c](std::string_view k) {
    if (k == "dir" && c.state.dir.empty()) return std::string("# dir \"\": the durable index is off\n");
    if (k != "interval" || c.state.interval.count() != 0) return std::string();
    return std::string("# interval \"0s\": with the delta log, when it outgrows the last "
                       "snapshot; without, a quarter of the replay ring's span (1s to 60s)\n");
  });
  out << "\n";
  section("[memory]", memory_fields, c.memory, none, [&c](std::string_view k) {
    if (k != "budget" || c.memory.budget != 0) return std::string();
    return std::string("# budget 0: the cgroup's memory limit less a quarter (less at least "
                       "24MiB), else 512MiB\n");
  });
  out << "\n";
  section("[log]", log_fields, c.log, none, none);
  const auto all_pipelines = pipelines(c);
  for (size_t i = 0; i < c.engines.size(); ++i) {
    const auto& e = c.engines[i];
    out << "\n";
    section("[[engine]]", engine_fields, e,
            [&e](std::string_view k) {
              // A derived URL is not the configuration's: read back, it is derived again.
              if (k == "url" && e.url_derived)
                return "(derived from metrics.url: " + toml_quote(e.url) + ")";
              return std::string(discovered(e, k) ? "(discovered at start)" : "");
            },
            [&e](std::string_view k) {
              if (k != "discover_via_metrics" || !e.url_derived) return std::string();
              return std::string("# the settings given win; the rest are learnt from the engine, "
                                 "or run as configured while it says nothing usable\n");
            });
    // What the ranks expand to, so --check shows the endpoints and replica ids it will use
    // (unless the engine will tell them).
    if (e.dp_size > 1 && !discovered(e, "endpoint") && !discovered(e, "dp_size")) {
      for (const auto& p : all_pipelines) {
        if (p.engine_index != i) continue;
        out << "# rank " << p.dp_rank << ": replica " << toml_quote(p.replica_id) << ", endpoint "
            << p.endpoint;
        if (!p.replay_endpoint.empty()) out << ", replay " << p.replay_endpoint;
        out << "\n";
      }
    }
    out << "\n";
    section("[engine.metrics]", metrics_fields, e.metrics, none, none);
    out << "\n[engine.adapters]\n";
    for (const auto& [id, name] : e.adapters) out << id << " = " << toml_quote(name) << "\n";
  }
  return out.str();
}

reload_diff diff_for_reload(const daemon_config& old_cfg, const daemon_config& new_cfg) {
  const flat_config a = flatten(old_cfg), b = flatten(new_cfg);
  std::set<flat_config::key_type> keys;
  for (const auto& kv : a) keys.insert(kv.first);
  for (const auto& kv : b) keys.insert(kv.first);

  reload_diff d;
  std::set<std::string> adapter_ids;
  for (const auto& [scope, key] : keys) {
    auto ia = a.find({scope, key}), ib = b.find({scope, key});
    if (ia != a.end() && ib != b.end() && ia->second == ib->second) continue;
    if (scope.empty()) {
      if (key == "log.level") d.log_level_changed = true;
      else d.restart_required.push_back(key);
      continue;
    }
    const std::string engine_key = "engine." + toml_quote(scope);
    const bool in_both = a.count({scope, ""}) && b.count({scope, ""});
    if (!in_both) {
      // An added or removed engine is reported once, not key by key.
      if (key.empty()) d.restart_required.push_back(engine_key);
    } else if (key.rfind("adapters.", 0) == 0) {
      adapter_ids.insert(scope);
    } else {
      d.restart_required.push_back(engine_key + "." + key);
    }
  }
  d.adapters_changed.assign(adapter_ids.begin(), adapter_ids.end());
  return d;
}


namespace detail {

// Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits only.
bool parse_decimal_int64(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 20) return false;
  bool neg = false;
  if (s[0] == '+' || s[0] == '-') {
    neg = s[0] == '-';
    s.remove_prefix(1);
    if (s.empty()) return false;
  }
  uint64_t v = 0;
  const uint64_t limit = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    auto d = static_cast<uint64_t>(c - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  out = neg ? static_cast<int64_t>(~v + 1) : static_cast<int64_t>(v);
  return true;
}

std::string trim(std::string_view s) {
  const char* ws = " \t\r\n\v\f";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

std::string closest_match(std::string_view name, const std::vector<std::string_view>& candidates) {
  std::string guess;
  size_t best = 3;  // suggest only close matches (a typo, not a different word)
  for (auto c : candidates)
    if (size_t d = edit_distance(name, c); d < best) best = d, guess = std::string(c);
  return guess;
}

std::string engine_path(size_t i) { return "engine[" + std::to_string(i) + "]"; }

std::string located(const daemon_config& c, const std::string& key, const std::string& msg) {
  std::string k = key;
  for (;;) {
    if (auto it = c.origin.find(k); it != c.origin.end()) return it->second + ": " + key + ": " + msg;
    auto cut = k.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) break;
    k.resize(cut);
  }
  return key + ": " + msg;
}

void mark_given(daemon_config& c) {
  for (size_t i = 0; i < c.engines.size(); ++i) {
    auto& g = c.engines[i].given;
    const std::string p = engine_path(i) + ".";
    const auto has = [&](const char* key) { return c.origin.count(p + key) > 0; };
    g.endpoint |= has("endpoint");
    g.replay_endpoint |= has("replay_endpoint");
    g.topic |= has("topic");
    g.dp_size |= has("dp_size");
    g.model_id |= has("model_id");
    g.hash_scheme |= has("hash_scheme");
    g.metrics_url |= has("metrics.url");
  }
}

}  // namespace detail

}  // namespace kvrelay::config
