// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "config/flags.hpp"

#include <algorithm>

#include "config/internal.hpp"
#include "config/schema.hpp"
#include "config/values.hpp"

namespace kvrelay::config {
namespace {

// A flag as the parser sees it: a schema row's, or one of the command flags.
struct flag_spec {
  std::string_view name;
  std::string_view arg;  // "" for booleans
  bool engine = false;   // describes the single engine (so it needs a config with <= 1 engine)
  const setting* row = nullptr;
};

const std::vector<flag_spec>& table() {
  static const std::vector<flag_spec> specs = [] {
    std::vector<flag_spec> out;
    for (const auto& f : command_flags()) out.push_back({f.name, f.arg, f.engine, nullptr});
    for (const auto& s : schema())
      if (!s.flag.empty()) out.push_back({s.flag, s.flag_arg, s.engine(), &s});
    std::sort(out.begin(), out.end(),
              [](const flag_spec& a, const flag_spec& b) { return a.name < b.name; });
    return out;
  }();
  return specs;
}

const flag_spec* find(std::string_view name) {
  for (const auto& s : table())
    if (name == s.name) return &s;
  return nullptr;
}

// What a flag's value does: a command flag's own meaning, --server's repetition, a raw text, or
// the row's parser.
std::string set(const flag_spec& spec, flag_values& f, std::string_view v) {
  if (spec.row == nullptr) {
    if (spec.name == "config") return (f.config_path = std::string(v)), std::string();
    if (spec.arg.empty()) {
      bool b = false;
      if (auto err = parse_go_bool(v, b); !err.empty()) return err;
      (spec.name == "check" ? f.check : f.version) = b;
      return {};
    }
    return (f.raw[std::string(spec.name)] = std::string(v)), std::string();
  }
  if (spec.name == "server") {
    if (f.servers.size() >= detail::max_targets)
      return "at most " + std::to_string(detail::max_targets) + " servers";
    f.servers.emplace_back(v);
    return {};
  }
  if (spec.row->raw_flag) return (f.raw[std::string(spec.name)] = std::string(v)), std::string();
  return spec.row->parse_flag(v, f.overlay, 0);
}

// Markdown in a doc line reads as plain text in a terminal.
std::string plain(std::string_view text) {
  std::string out;
  for (char c : text)
    if (c != '`' && c != '*') out += c;
  return out;
}

}  // namespace

bool flag_values::has(std::string_view flag) const {
  return std::find(given.begin(), given.end(), flag) != given.end();
}

std::optional<std::string> flag_values::raw_text(std::string_view flag) const {
  auto it = raw.find(flag);
  if (it == raw.end()) return std::nullopt;
  return it->second;
}

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
    const bool is_bool = spec->arg.empty();
    if (is_bool) {
      if (!has_value) value = "true";
      if (auto err = set(*spec, r.values, value); !err.empty())
        return fail("invalid boolean value \"" + std::string(value) + "\" for --" +
                    std::string(name) + ": " + err);
    } else {
      if (!has_value) {
        // Go takes the next argument as the value even when it starts with '-'.
        if (i + 1 >= args.size()) return fail("flag needs an argument: --" + std::string(name));
        next = args[++i];
        value = next;
      }
      if (auto err = set(*spec, r.values, value); !err.empty())
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
  const daemon_config defaults = [] {
    daemon_config c;
    c.engines.emplace_back();
    return c;
  }();
  for (const auto& s : table()) {
    out += "  --" + std::string(s.name);
    if (!s.arg.empty()) out += " " + std::string(s.arg);
    std::string doc, def;
    if (s.row) {
      doc = plain(s.row->doc);
      def = s.row->flag_text(defaults, 0);
      if (!s.row->derived.empty()) def += "; " + plain(s.row->derived);
    } else {
      for (const auto& c : command_flags())
        if (c.name == s.name) doc = plain(c.doc), def = std::string(c.default_text);
    }
    out += "\n        " + doc + " (default " + def + ")\n";
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
