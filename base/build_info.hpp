// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Which source this binary was built from: the git revision and the commit's date (never the
// wall clock: two builds of one commit are identical). Defined in a file the build writes
// (cmake/BuildInfo.cmake), so a new commit recompiles that file alone.

#include <string>

namespace kvrelay::build {

/// The git commit, 40 hex digits, "-dirty" appended when tracked files differed from it;
/// "unknown" when built outside git without a revision (see cmake/BuildInfo.cmake).
const char* revision() noexcept;
/// The commit's time (or SOURCE_DATE_EPOCH), "YYYY-MM-DDTHH:MM:SSZ"; "unknown" when not known.
const char* date() noexcept;
/// The revision's first 12 digits (and "-dirty"), as log lines and labels show it.
std::string short_revision();
/// "0.1.0 (revision 0123456789ab, 2026-12-06T03:00:00Z)": what --version and logs name.
std::string describe();

}  // namespace kvrelay::build
