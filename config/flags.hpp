// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Command-line flags with the grammar of Go's `flag` package, so the Go kvevent-subscriber's
// sidecar arguments keep working unchanged (docs/spec/reference-behaviour.md §4, C05, C07): `-x` ≡ `--x`,
// `--x v` ≡ `--x=v`, booleans as `--x` or `--x=false`, `--` ends the flags. Pure and testable;
// main.cpp maps the outcome to an exit code (help → 0, error → 2 after the error line and a
// pointer to --help; an unknown flag's line names the closest flag).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"

namespace kvrelay::config {

/// Every flag that was given explicitly, already parsed. A flag that sets a setting (a row of
/// config/schema.cpp with a flag) is parsed by its row into `overlay`, which apply_flags copies
/// from: only what was given is copied, so precedence is flags > file > defaults.
struct flag_values {
  flag_values() { overlay.engines.emplace_back(); }

  std::optional<std::string> config_path;  // --config FILE
  bool check = false;                      // --check: validate, print, exit 0 / 2
  bool version = false;                    // --version
  std::vector<std::string> servers;  // --server, repeatable: each occurrence one more target
  /// The settings the flags gave, at their place in a configuration with one engine.
  daemon_config overlay;
  /// Flags kept as text for apply_flags, which checks them in the reference's order:
  /// --lora-adapter-names (C01, before anything) and --cache-tier (C03, after the identity).
  std::map<std::string, std::string, std::less<>> raw;

  /// Names (without dashes) of every flag given, in command-line order, repeats included.
  std::vector<std::string> given;
  bool has(std::string_view flag) const;
  /// The engine the flags describe (overlay's one engine).
  const engine_settings& engine() const { return overlay.engines.front(); }
  /// The text of a flag kept raw, or nullopt when it was not given.
  std::optional<std::string> raw_text(std::string_view flag) const;
  /// True if any flag that describes an engine (not server/admin/log/config) was given.
  bool any_engine_flag() const { return !first_engine_flag().empty(); }
  /// The name of the first engine flag given, or "".
  std::string first_engine_flag() const;
};

struct flag_parse_result {
  enum class outcome : uint8_t {
    ok,     // run (or --check / --version: see values)
    help,   // -h / --help: print usage() to stdout, exit 0
    error,  // print `error` and a pointer to --help to stderr, exit 2
  };
  outcome status = outcome::ok;
  flag_values values;
  std::string error;  // e.g. "flag provided but not defined: --foo"
};

/// Parses the arguments after the program name.
flag_parse_result parse_flags(const std::vector<std::string>& args);
flag_parse_result parse_flags(int argc, const char* const* argv);

/// The usage text: every flag with its type, meaning and default (the schema's rows and their
/// defaults), sorted by name like Go's PrintDefaults.
std::string usage(std::string_view program = "kvrelay");

/// Every flag name (without dashes), sorted; for tests and docs.
std::vector<std::string> flag_names();

}  // namespace kvrelay::config
