// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// A test that cannot run here (no Chromium, no promtool, no IPv6 loopback, no cgroup it may
// make) says why. Outside CI it skips, with a "SKIP: " line that scripts/test.sh repeats after
// ctest's summary (ctest keeps skipped tests' output to itself). With CI=true it fails instead:
// CI's machine is set up to run every check, and a check that did not run proved nothing, so it
// must never pass as a skip. Header-only: every suite can use it.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

namespace kvrelay::testing {

/// CI=true in the environment (`.ci/run` sets it).
inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

}  // namespace kvrelay::testing

/// Skips the test with `why` (anything `<<` takes), or fails it with CI=true.
#define KVRELAY_SKIP(why)                                                  \
  do {                                                                     \
    if (::kvrelay::testing::in_ci()) {                                     \
      std::cout << "FAIL (CI=true, cannot run): " << why << std::endl;     \
      GTEST_FAIL() << "cannot run here, and CI=true forbids a skip: " << why; \
    }                                                                      \
    std::cout << "SKIP: " << why << std::endl;                             \
    GTEST_SKIP() << why;                                                   \
  } while (0)
