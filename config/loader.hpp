// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Loading, merging and checking the configuration. Nothing here throws out of the API: a TOML
// file is untrusted input, and every failure comes back as one line of text that names the file,
// line, column and key, e.g.
//   kvrelay.toml:12:10: engine[0].dp_mode: invalid value "split" (allowed: separate, merged)
// The order of operations main.cpp follows (resolve() does all of it, so `--check` and the
// daemon refuse exactly the same configurations, with exit code 2, before anything starts):
//   parse_flags → load_toml (if --config) → apply_flags (flags > file > defaults) → validate
//   → read_files (TLS files, the admin token).

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "config/flags.hpp"
#include "config/settings.hpp"

namespace kvrelay::config {

/// A configuration error: code invalid_config, the one line in `context`, and in `headline`
/// the reference's log message for its class, for the ERROR line's `msg` (the detail goes in a
/// field): "invalid --lora-adapter-names" (C01), "invalid --cache-tier" (C03), or "invalid
/// config" for everything else (C02).
failure invalid(std::string message, std::string headline = "invalid config");

/// Reads and parses a TOML file (a regular file of at most 1 MiB: a FIFO, a device or a
/// directory is refused without blocking). Unknown keys and wrong types are errors; values are
/// converted (durations, sizes, enums) but not cross-checked: that is validate().
outcome<daemon_config> load_toml(const std::string& path);
/// The same from text; `source_name` is what messages call the file.
outcome<daemon_config> parse_toml(std::string_view text, const std::string& source_name);

/// Overlays the explicitly given flags on `cfg` (flags > file > defaults). Engine flags need a
/// configuration with at most one engine; with none, they create it (the Go sidecar's mode).
/// Checks in the reference's order: --lora-adapter-names (C01), then the identity when
/// --cache-tier is also bad (C02), then --cache-tier (C03).
outcome<void> apply_flags(daemon_config& cfg, const flag_values& flags);

/// Clamps non-positive window / rpc_timeout / stats interval / reconnect backoff to their defaults
/// (R04, S10, N02; each clamp adds a line to `notes` when given), derives an engine's metrics
/// URL from its `url` when not given, then checks everything that spans keys: required
/// identity (R09, "invalid config"; what discovery will learn is not required), endpoint / URL
/// / address syntax, dp rank endpoints, duplicate replica ids, TLS file combinations, ranges,
/// and that a non-loopback admin port has a token_file. Pure: reads no file.
outcome<void> validate(daemon_config& cfg, std::vector<std::string>* notes = nullptr);

/// Reads every file the configuration names, bounded and regular files only: the TLS files
/// (readable PEM, at most 1 MiB) and the admin token_file (at most 4 KiB, one line, non-empty
/// after trimming), whose contents it stores in `admin.token`. Separate from validate() so
/// example configs validate on machines without those files, and fuzzing reads no files.
outcome<void> read_files(daemon_config& cfg);

/// The admin token from `path`: a regular file of at most 4 KiB, whitespace trimmed at both
/// ends, non-empty, on one line. read_files() uses it; so may code that was handed a
/// configuration without going through resolve().
outcome<std::string> read_token_file(const std::string& path);

/// The whole startup sequence: load the --config file (if any), apply flags, validate,
/// read_files.
outcome<daemon_config> resolve(const flag_values& flags,
                               std::vector<std::string>* notes = nullptr);

/// `kvrelay --check`: resolve() (files included); on success prints the effective
/// configuration (to_toml) on `out`, any clamp notes on `err` as "note: ..." lines, and returns 0;
/// otherwise prints the error on `err` and returns 2.
int run_check(const flag_values& flags, std::ostream& out, std::ostream& err);

/// `--lora-adapter-names` syntax (A02, A03): comma-separated `id=name`, whitespace trimmed, blank
/// entries skipped, split at the first '=', ids base-10 int64 (signed); no '=', a bad id, an
/// empty name or a repeated id is an error.
outcome<void> parse_adapter_names(std::string_view text, std::map<int64_t, std::string>& out);

/// The effective configuration as TOML (every key, defaults included); load_toml reads it back
/// to an equal configuration. An engine setting that discovery will learn (an engine with
/// `url`, the setting not given) is printed as a comment, "# endpoint = (discovered at start)",
/// so it stays undiscovered when read back. The admin token is never printed.
std::string to_toml(const daemon_config& cfg);

/// What a SIGHUP reload may apply in place and what needs a restart.
struct reload_diff {
  bool log_level_changed = false;
  std::vector<std::string> adapters_changed;  // replica ids whose adapter map changed
  /// Changed keys that only take effect after a restart, e.g. `engine."vllm-0".window`,
  /// `engine."vllm-3"` (an engine added or removed), `server.address`.
  std::vector<std::string> restart_required;
  bool needs_restart() const noexcept { return !restart_required.empty(); }
  bool empty() const noexcept {
    return !log_level_changed && adapters_changed.empty() && restart_required.empty();
  }
};

/// Pure: compares two validated configurations. Engines are matched by replica_id, not position.
/// Hot-reloadable: log.level and each engine's adapters; everything else needs a restart.
reload_diff diff_for_reload(const daemon_config& old_cfg, const daemon_config& new_cfg);

/// One subscription of an engine: the engine itself, or one data-parallel rank of it.
struct pipeline_settings {
  size_t engine_index = 0;
  int64_t dp_rank = 0;
  std::string replica_id;  // the reported replica: "<id>-dp<rank>" for separate-mode ranks
  std::string endpoint;    // with the rank's port (or inproc suffix)
  std::string replay_endpoint;
};

/// Expands every engine into its pipelines (dp_size of them). Needs a validated configuration.
/// For an engine with discovery, only after the discovered values are filled in.
std::vector<pipeline_settings> pipelines(const daemon_config& cfg);

/// The policy servers kvrelay reports to, as configured: `targets`, or else the one `address`.
/// A dns: entry stands for every address its name resolves to (the emitter resolves it).
std::vector<std::string> policy_targets(const server_settings& s);
/// The same, comma separated: what the start-up log lines show as "server".
std::string policy_targets_text(const server_settings& s);

/// Where the value of `key` ("engine[0].endpoint", "server.eviction_mode") came from:
/// "file:line:col", "--flag", or "" for a default (or a value set in code).
std::string origin_of(const daemon_config& cfg, const std::string& key);

/// Whether engine `e` learns this setting from its engine at start (it has a url, and the
/// setting was not given). Keys: "endpoint", "replay_endpoint", "topic", "dp_size", "model_id",
/// "hash_scheme"; anything else is false.
bool discovered(const engine_settings& e, std::string_view key);

}  // namespace kvrelay::config
