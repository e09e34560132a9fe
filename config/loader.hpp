#pragma once
// Loading, merging and checking the configuration. Nothing here throws out of the API: a TOML
// file is untrusted input, and every failure comes back as one line of text that names the file,
// line, column and key, e.g.
//   kvrelay.toml:12:10: engine[0].dp_mode: invalid value "split" (allowed: separate, merged)
// The order of operations main.cpp follows (resolve() does all of it):
//   parse_flags → load_toml (if --config) → apply_flags (flags > file > defaults) → validate.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "config/flags.hpp"
#include "config/settings.hpp"

namespace kvrelay::config {

struct config_error {
  std::string message;  // one line, no trailing newline
  /// The reference's log message for this class of error, for the ERROR line's `msg` (the detail
  /// goes in a field): "invalid --lora-adapter-names" (C01), "invalid --cache-tier" (C03), or
  /// "invalid config" for everything else (C02).
  std::string summary = "invalid config";
};

/// A value or the error that prevented it.
template <class T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like expected<T>
  result(config_error e) : v_(std::move(e)) {}  // NOLINT
  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const std::string& error() const { return std::get<1>(v_).message; }
  const std::string& summary() const { return std::get<1>(v_).summary; }

 private:
  std::variant<T, config_error> v_;
};

/// Success, or one error line.
class status {
 public:
  status() = default;
  static status failure(std::string message, std::string summary = "invalid config") {
    status s;
    s.error_ = std::move(message);
    s.summary_ = std::move(summary);
    return s;
  }
  bool ok() const noexcept { return error_.empty(); }
  explicit operator bool() const noexcept { return ok(); }
  const std::string& error() const noexcept { return error_; }
  /// See config_error::summary; "" when ok.
  const std::string& summary() const noexcept { return summary_; }
  config_error to_error() const { return config_error{error_, summary_}; }

 private:
  std::string error_;
  std::string summary_;
};

/// Reads and parses a TOML file (at most 1 MiB). Unknown keys and wrong types are errors;
/// values are converted (durations, sizes, enums) but not cross-checked: that is validate().
result<daemon_config> load_toml(const std::string& path);
/// The same from text; `source_name` is what messages call the file.
result<daemon_config> parse_toml(std::string_view text, const std::string& source_name);

/// Overlays the explicitly given flags on `cfg` (flags > file > defaults). Engine flags need a
/// configuration with at most one engine; with none, they create it (the Go sidecar's mode).
/// Checks in the reference's order: --lora-adapter-names (C01), then the identity when
/// --cache-tier is also bad (C02), then --cache-tier (C03).
status apply_flags(daemon_config& cfg, const flag_values& flags);

/// Clamps non-positive window / rpc_timeout / stats interval / reconnect backoff to their defaults
/// (R04, S10, N02; each clamp adds a line to `notes` when given), then checks everything that
/// spans keys: required identity (R09, "invalid config"), endpoint / URL / address syntax, dp
/// rank endpoints, duplicate replica ids, TLS file combinations, ranges.
status validate(daemon_config& cfg, std::vector<std::string>* notes = nullptr);

/// Checks that every file the configuration names (TLS files, admin token) is readable. Separate
/// from validate() so example configs validate on machines without those files.
status check_files(const daemon_config& cfg);

/// The whole startup sequence: load the --config file (if any), apply flags, validate.
result<daemon_config> resolve(const flag_values& flags, std::vector<std::string>* notes = nullptr);

/// `kvrelay --check`: resolve(), then check_files(); on success prints the effective
/// configuration (to_toml) on `out`, any clamp notes on `err` as "note: ..." lines, and returns 0;
/// otherwise prints the error on `err` and returns 2.
int run_check(const flag_values& flags, std::ostream& out, std::ostream& err);

/// `--lora-adapter-names` syntax (A02, A03): comma-separated `id=name`, whitespace trimmed, blank
/// entries skipped, split at the first '=', ids base-10 int64 (signed); no '=', a bad id, an
/// empty name or a repeated id is an error.
status parse_adapter_names(std::string_view text, std::map<int64_t, std::string>& out);

/// The effective configuration as TOML (every key, defaults included); load_toml reads it back
/// to an equal configuration.
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
std::vector<pipeline_settings> pipelines(const daemon_config& cfg);

}  // namespace kvrelay::config
