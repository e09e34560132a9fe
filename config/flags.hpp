// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Command-line flags with the grammar of Go's `flag` package, so the Go kvevent-subscriber's
// sidecar arguments keep working unchanged (reference-behaviour.md §4, C05, C07): `-x` ≡ `--x`,
// `--x v` ≡ `--x=v`, booleans as `--x` or `--x=false`, `--` ends the flags. Pure and testable;
// main.cpp maps the outcome to an exit code (help → 0, error → 2 after the error line and a
// pointer to --help; an unknown flag's line names the closest flag).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"

namespace kvrelay::config {

/// Every flag that was given explicitly, already parsed. An empty optional means "not given", so
/// the config file (or the default) applies: precedence is flags > file > defaults.
struct flag_values {
  // -- kvrelay's own -----------------------------------------------------------------------------
  std::optional<std::string> config_path;  // --config FILE
  bool check = false;                      // --check: validate, print, exit 0 / 2
  bool version = false;                    // --version
  std::optional<std::string> admin_listen;
  std::optional<config::admin_public> admin_public_v;
  std::optional<config::eviction_mode> eviction_mode;
  std::optional<bool> scoped_evictions;
  std::optional<readiness_policy> server_readiness;
  std::optional<std::string> engine_url;  // an engine flag: --engine-url
  std::optional<bool> discover_via_metrics;  // an engine flag
  std::optional<log_format> log_format_v;
  std::optional<log_level> log_level_v;
  // -- the reference sidecar's (§4), which describe one engine -----------------------------------
  std::vector<std::string> servers;  // --server, repeatable: each occurrence one more target
  std::optional<std::string> state_dir;
  std::optional<int64_t> memory_budget;  // --memory-budget: bytes, or a size such as "96MiB"
  std::optional<std::string> engine_endpoint;
  std::optional<std::string> replay_endpoint;
  std::optional<std::string> topic;
  std::optional<std::string> replica_id;
  std::optional<std::string> model_id;
  std::optional<std::string> tenant_id;
  std::optional<std::string> hash_scheme;
  std::optional<std::chrono::milliseconds> window;
  std::optional<std::string> engine_metrics_url;
  std::optional<std::chrono::milliseconds> stats_interval;
  std::optional<int64_t> engine_cache_size_bytes;
  std::optional<int64_t> max_concurrency_ceiling;
  // Kept as text: the reference validates it only after the identity (C02 before C03).
  std::optional<std::string> cache_tier;
  std::optional<std::string> engine_model_name;
  std::optional<bool> ignore_block_removed;
  // Kept as text: parsed by apply_flags so its error comes first (C01).
  std::optional<std::string> lora_adapter_names;
  std::optional<int64_t> dp_size;
  std::optional<config::dp_mode> dp_mode;
  std::optional<config::unknown_parent> unknown_parent;

  /// Names (without dashes) of every flag given, in command-line order, repeats included.
  std::vector<std::string> given;
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

/// The usage text: every flag with its type, meaning and default (the defaults come from
/// settings.hpp), sorted by name like Go's PrintDefaults.
std::string usage(std::string_view program = "kvrelay");

/// Every flag name (without dashes), sorted; for tests and docs.
std::vector<std::string> flag_names();

}  // namespace kvrelay::config
