// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The configuration schema: one row per setting, in config/schema.cpp, and everything that is
// per setting is read from it:
//   - the TOML loader (key, type, parser: load_toml),
//   - the command-line flags (flag, its parser, --help's line and default: parse_flags, usage),
//   - flags over the file (apply_flags copies what a flag set, and records its origin),
//   - the single-key checks and the clamps (validate), and the derived defaults,
//   - what `--check` prints (to_toml) and what a SIGHUP reload compares (diff_for_reload),
//   - the tables of docs/configuration.md (reference_table; a test diffs them).
// The default of a setting is its member initialiser in settings.hpp, which the row reads (a
// default-constructed configuration is the defaults). Checks that span keys (TLS files go
// together, the admin port's token, ranks, duplicate replicas) stay in validate().
// Only config/*.cpp and tests include this header.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"

namespace kvrelay::config {

/// How a value is written, in TOML and on the command line (docs/configuration.md "Value syntax").
enum class value_kind : uint8_t {
  string,
  boolean,   // TOML true / false; a flag: Go's ParseBool, `--x` alone is true
  integer,   // TOML integer; a flag: Go's ParseInt(s, 0, 64)
  size,      // an integer byte count or "16GiB"; never negative
  duration,  // Go duration text, "100ms"
  choice,    // one of a fixed list of names
  list,      // an array of strings; not a flag
};

/// A TOML value as the reader hands it to a row: toml++ stays inside loader.cpp.
struct toml_value {
  const char* type = "nothing";  // TOML's name of the type, for "expected ..., got <type>"
  std::optional<std::string> string;
  std::optional<int64_t> integer;
  std::optional<bool> boolean;
  std::optional<std::vector<toml_value>> array;
};

/// One setting. The descriptive part is plain data; the operations are generated in schema.cpp
/// from the settings member the row names, so no row writes a parser or printer of its own.
struct setting {
  std::string_view table;  // "server", "admin", "state", "memory", "log", "engine", "engine.metrics"
  std::string_view key;    // within its table: "address"
  std::string_view flag;   // without dashes; "" = not a flag
  std::string_view flag_arg;  // the value's name in --help ("string", "url"); "" for a boolean
  value_kind kind = value_kind::string;
  bool hot = false;           // a SIGHUP applies it in place; every other change needs a restart
  bool clamped = false;       // <= 0 becomes the default, with a note (the Go sidecar's way)
  bool required = false;      // must not be empty (engine identity)
  bool discoverable = false;  // learnt from the engine when it has a url and this is not given
  bool raw_flag = false;      // the flag's text is kept and checked by apply_flags, in order
  std::string_view derived;   // "" or when the default is another value, in words (markdown)
  std::string_view doc;       // the one line of docs/configuration.md and --help

  /// The operations; `engine` is the engine's index for engine rows, ignored otherwise.
  std::function<std::string(const toml_value&, daemon_config&, size_t engine)> read;
  std::function<std::string(std::string_view, daemon_config&, size_t engine)> parse_flag;
  std::function<void(const daemon_config& from, size_t from_engine, daemon_config& to,
                     size_t to_engine)>
      copy;
  std::function<std::string(const daemon_config&, size_t engine)> write;      // TOML text
  std::function<std::string(const daemon_config&, size_t engine)> flag_text;  // --help's form
  std::function<std::string(const daemon_config&, size_t engine)> check;     // "" = fine
  /// Clamped rows: sets a non-positive value to the default and returns the note, else "".
  std::function<std::string(daemon_config&, size_t engine)> clamp;
  /// Rows with a derived default: applies it when the key was not given (file or flag).
  std::function<void(daemon_config&)> derive;
  /// What `--check` prints as a comment after the value (what a 0 or `auto` stands for), or "".
  std::function<std::string(const daemon_config&, size_t engine)> print_note;

  bool engine() const { return table.rfind("engine", 0) == 0; }
  /// The key as messages and origins name it: "server.address", "engine[2].metrics.url".
  std::string path(size_t engine_index = 0) const;
  /// The key as the reference names it: "server.address", "engine.metrics.url".
  std::string doc_path() const;
};

/// Every setting, in the order files are printed and documented.
const std::vector<setting>& schema();
/// The rows of one table, in order.
std::vector<const setting*> schema_table(std::string_view table);
/// nullptr when there is no such key or flag.
const setting* find_setting(std::string_view table, std::string_view key);
const setting* find_flag_setting(std::string_view flag);

/// A flag that is not one setting: --config, --check, --version, --lora-adapter-names.
struct command_flag {
  std::string_view name;
  std::string_view arg;  // "" for a boolean
  std::string_view key;  // what it sets, in the reference's words; "" = nothing
  bool engine = false;   // describes the single engine
  std::string_view default_text;
  std::string_view doc;
};
const std::vector<command_flag>& command_flags();

/// The tables of TOML tables, in the order files list them.
const std::vector<std::string_view>& schema_tables();

/// The reference table of `table` ("server", ..., "engine.metrics"), or of every flag ("flags"),
/// as markdown, ending in a newline; "" for an unknown name.
std::string reference_table(std::string_view table);

/// `doc` with the text between each "<!-- schema: NAME -->" line and the next
/// "<!-- /schema -->" line replaced by reference_table(NAME): what docs/configuration.md must
/// equal. An unknown NAME or an unclosed block is left as it is (the test then fails).
std::string with_reference_tables(std::string_view doc);

}  // namespace kvrelay::config
