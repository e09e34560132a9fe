// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The durable index's directory (state.dir): checked by `kvrelay --check` (nothing
// created) and at start (created when missing), so an unusable one fails before anything runs.

#include <string>

#include "base/error.hpp"

namespace kvrelay {

/// A usable state dir: a directory kvrelay can create files in (proved by creating and removing
/// a probe file: a read-only mount passes access()). With `create`, a missing one (and its
/// parents) is made; without, a missing one is fine when its nearest existing ancestor is
/// writable (it will be made at start). The failure's context is "<dir>: <reason>".
outcome<void> check_state_dir(const std::string& dir, bool create);

/// What kvrelay keeps in a state dir now: snapshots (`*.kvsnap`), delta log segments
/// (`*.kvlog`) and temporary files of a write in progress (`*.kvsnap.tmp.*`). A missing dir is
/// empty.
struct state_dir_usage_t {
  uint64_t snapshots = 0;
  uint64_t segments = 0;
  uint64_t temporary = 0;
  uint64_t bytes = 0;
};
state_dir_usage_t state_dir_usage(const std::string& dir);

/// One line for `kvrelay --check` and the log: the dir's usage and what bounds it.
std::string describe_state_dir(const std::string& dir);

}  // namespace kvrelay
