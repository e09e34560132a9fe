// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "messages/state.hpp"

namespace kvrelay {

const char* to_string(write_report::outcome o) noexcept {
  switch (o) {
    case write_report::outcome::written: return "written";
    case write_report::outcome::established: return "established";
    case write_report::outcome::skipped: return "skipped";
    case write_report::outcome::failed: return "failed";
  }
  return "unknown";
}

}  // namespace kvrelay
