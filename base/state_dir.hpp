// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The durable index's directory (state.dir, issue 22): checked by `kvrelay --check` (nothing
// created) and at start (created when missing), so an unusable one fails before anything runs.

#include <string>

#include "base/error.hpp"

namespace kvrelay {

/// A usable state dir: a directory kvrelay can create files in (proved by creating and removing
/// a probe file: a read-only mount passes access()). With `create`, a missing one (and its
/// parents) is made; without, a missing one is fine when its nearest existing ancestor is
/// writable (it will be made at start). The failure's context is "<dir>: <reason>".
outcome<void> check_state_dir(const std::string& dir, bool create);

}  // namespace kvrelay
