// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// TOML in and out: the reader (file:line:col errors), to_toml and the reload diff, each walking
// the schema's rows (config/schema.cpp), which hold every key's name, type and printing. Flags,
// validation and files are in checks.cpp.
#include "config/loader.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <type_traits>

#include "base/read_file.hpp"
#include "config/internal.hpp"
#include "config/schema.hpp"
#include "config/values.hpp"

namespace kvrelay::config {

using detail::closest_match;
using detail::engine_path;
using detail::max_engines;
using detail::parse_decimal_int64;
using detail::toml_quote;

namespace {

constexpr size_t max_file_bytes = 1 << 20;

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

// What a row reads: the value with its type's name, without toml++.
// Array items are taken one level deep: no row reads an array of arrays, and an item only needs
// its type named.
toml_value to_value(const toml::node& n, bool items = true) {
  toml_value v;
  v.type = type_name(n);
  if (const auto* x = n.as_string()) v.string = x->get();
  else if (const auto* x = n.as_integer()) v.integer = x->get();
  else if (const auto* x = n.as_boolean()) v.boolean = x->get();
  else if (const auto* x = n.as_array(); x && items) {
    v.array.emplace();
    // Bounded: no list key takes more than max_targets entries; a longer one is refused by
    // the row, which needs only the count.
    const size_t keep = std::min(x->size(), detail::max_targets + 1);
    for (size_t i = 0; i < keep; ++i) v.array->push_back(to_value(*x->get(i), false));
  }
  return v;
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
        if (!section(v, "server", "server", 0)) return error();
      } else if (key == "admin") {
        if (!section(v, "admin", "admin", 0)) return error();
      } else if (key == "log") {
        if (!section(v, "log", "log", 0)) return error();
      } else if (key == "state") {
        if (!section(v, "state", "state", 0)) return error();
      } else if (key == "memory") {
        if (!section(v, "memory", "memory", 0)) return error();
      } else if (key == "cpu") {
        if (!section(v, "cpu", "cpu", 0)) return error();
      } else if (key == "engine") {
        if (!engines(v)) return error();
      } else {
        unknown(k, key, {"server", "admin", "state", "memory", "cpu", "log", "engine"});
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

  // The keys of one table, read by their schema rows; `engine` is the engine being read.
  bool section(const toml::node& node, const std::string& path, std::string_view table,
               size_t engine, std::initializer_list<std::string_view> subtables = {},
               std::vector<std::pair<std::string, const toml::node*>>* sub_out = nullptr) {
    const auto* tbl = node.as_table();
    if (!tbl) return fail(node.source(), path, expected("a table", node));
    cfg_.origin[path] = where(node.source());
    const auto rows = schema_table(table);
    for (auto [kp, vp] : in_file_order(*tbl)) {
      const toml::key& k = *kp;
      const toml::node& v = *vp;
      const std::string name(k.str());
      if (sub_out && std::find(subtables.begin(), subtables.end(), name) != subtables.end()) {
        sub_out->emplace_back(name, &v);
        continue;
      }
      const setting* row = nullptr;
      for (const auto* candidate : rows)
        if (name == candidate->key) row = candidate;
      if (!row) {
        std::vector<std::string_view> allowed;
        for (const auto* candidate : rows) allowed.emplace_back(candidate->key);
        allowed.insert(allowed.end(), subtables.begin(), subtables.end());
        return unknown(k, path + "." + name, allowed);
      }
      const std::string key_path = path + "." + name;
      cfg_.origin[key_path] = where(v.source());
      if (auto err = row->read(to_value(v), cfg_, engine); !err.empty())
        return fail(v.source(), key_path, err);
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
      cfg_.engines.emplace_back();
      std::vector<std::pair<std::string, const toml::node*>> subs;
      if (!section(el, path, "engine", i, {"metrics", "adapters"}, &subs)) return false;
      for (const auto& [name, sub] : subs) {
        if (name == "metrics") {
          if (!section(*sub, path + ".metrics", "engine.metrics", i)) return false;
        } else if (!adapters(*sub, path + ".adapters", cfg_.engines[i].adapters)) {
          return false;
        }
      }
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
  for (const auto& row : schema())
    if (!row.engine()) out[{"", row.doc_path()}] = row.write(c, 0);
  // Compared, never shown: a rotated token is a change the running admin port does not apply.
  out[{"", "admin.token"}] = c.admin.token;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    const auto& e = c.engines[i];
    const std::string& id = e.replica_id;
    out[{id, ""}] = "present";
    for (const auto& row : schema()) {
      if (!row.engine()) continue;
      const std::string key =
          (row.table == "engine" ? "" : "metrics.") + std::string(row.key);
      // A URL derived from metrics.url is not configuration: metrics.url and
      // discover_via_metrics are, and stand for it.
      if (row.table == "engine" && row.key == "url" && e.url_derived) {
        out[{id, key}] = toml_quote("");
        continue;
      }
      out[{id, key}] = row.table == "engine" && discovered(e, row.key) ? "(discovered at start)"
                                                                       : row.write(c, i);
    }
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
  // it), shown as a comment instead of the value, or "": the value. After it, what the row says
  // about it (what a 0 stands for) and where a derived default came from.
  auto section = [&out, &c](const char* header, std::string_view table, size_t engine,
                            auto&& hidden) {
    out << header << "\n";
    for (const auto* row : schema_table(table)) {
      if (auto why = hidden(row->key); !why.empty())
        out << "# " << row->key << " = " << why << "\n";
      else
        out << row->key << " = " << row->write(c, engine) << "\n";
      if (const auto from = origin_of(c, row->path(engine));
          row->derive && from.rfind("default", 0) == 0)
        out << "# " << row->key << ": " << from << "\n";
      if (row->print_note)
        if (auto text = row->print_note(c, engine); !text.empty()) out << "# " << text << "\n";
    }
  };
  const auto none = [](std::string_view) { return std::string(); };
  out << "# kvrelay effective configuration (defaults included)\n\n";
  section("[server]", "server", 0, [&c](std::string_view k) {
    return k == "address" && !c.server.targets.empty()
               ? std::string("(unused: the servers are the targets)")
               : std::string();
  });
  for (const auto* table : {"admin", "state", "memory", "cpu", "log"})
    section(("\n[" + std::string(table) + "]").c_str(), table, 0, none);
  const auto all_pipelines = pipelines(c);
  for (size_t i = 0; i < c.engines.size(); ++i) {
    const auto& e = c.engines[i];
    out << "\n";
    section("[[engine]]", "engine", i, [&e](std::string_view k) {
      // A derived URL is not the configuration's: read back, it is derived again.
      if (k == "url" && e.url_derived) return "(derived from metrics.url: " + toml_quote(e.url) + ")";
      return std::string(discovered(e, k) ? "(discovered at start)" : "");
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
    section("[engine.metrics]", "engine.metrics", i, none);
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
      // The schema's hot rows are applied in place; log.level is the only one (a test says so).
      if (const auto* row = find_setting(key.substr(0, key.find('.')), key.substr(key.find('.') + 1));
          row && row->hot)
        d.log_level_changed = true;
      else
        d.restart_required.push_back(key);
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
