// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Helpers the loader (TOML in and out) and the checks (flags, validation, files) share. Not an
// API: only config/*.cpp include this.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"

namespace kvrelay::config::detail {

// A config file is untrusted, so nothing it says may allocate without bound.
constexpr size_t max_engines = 256;
constexpr int64_t max_dp_size = 1024;
constexpr size_t max_targets = 64;  // server.targets entries (each a channel of its own)

/// A TOML basic string: quotes, backslashes and control characters escaped; UTF-8 kept.
std::string toml_quote(std::string_view s);

/// An engine URL is a base: paths are appended to it, so a query or fragment has no place.
std::string check_engine_url(const std::string& url);

/// Whitespace (" \t\r\n\v\f") removed at both ends.
std::string trim(std::string_view s);

/// Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits only.
bool parse_decimal_int64(std::string_view s, int64_t& out);

/// The candidate closest to `name` by edit distance when it is a likely typo (at most 2 edits),
/// else "": the did-you-mean of unknown TOML keys and unknown flags.
std::string closest_match(std::string_view name, const std::vector<std::string_view>& candidates);

/// "engine[3]".
std::string engine_path(size_t i);

/// "<where>: <key>: <msg>", where = the key's origin or, failing that, its nearest enclosing
/// table's (a missing key is reported at the table that lacks it).
std::string located(const daemon_config& c, const std::string& key, const std::string& msg);

/// Marks in each engine's `given` the discoverable keys the origin map holds (set by the file
/// or a flag). Only ever sets: a mark made in code stays.
void mark_given(daemon_config& c);

}  // namespace kvrelay::config::detail
