// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What kvrelay does as the user its image runs as (UID/GID 65532, no capabilities), tested as
// that user even when the tests run as root: root reads any file and writes any directory, so a
// permission check that only ever ran as root was never tested.
//
//   KVRELAY_EXPECT_UNPRIVILEGED([&] { return validate(o).find("not readable") == npos ? "..." : ""; });
//
// The check runs in a gtest death test of the "threadsafe" style (the test binary re-executed, so
// no thread of the parent is forked), which forks once more: the grandchild drops to 65532 when
// it is root (as non-root it stays who it is) and runs the check; the child, still privileged,
// waits for it, runs `cleanup` (what the re-executed test body created as root, which the
// fixture's TearDown never reaches there) and exits with the grandchild's status. A check
// returns "" when it holds, else what went wrong (printed, and shown by gtest on failure).
// Header-only: the core suite has no support library.

#include <gtest/gtest.h>

#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

namespace kvrelay::testing {

/// The image's user and group (docs/operations.md, "The image").
inline constexpr uid_t unprivileged_id = 65532;

[[noreturn]] inline void run_unprivileged(const std::function<std::string()>& check,
                                          const std::function<void()>& cleanup = {}) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::fprintf(stderr, "fork: %s\n", std::strerror(errno));
    std::_Exit(4);
  }
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(unprivileged_id) != 0 ||
                             ::setuid(unprivileged_id) != 0)) {
      std::fprintf(stderr, "cannot drop privileges to %u: %s\n", unprivileged_id,
                   std::strerror(errno));
      std::_Exit(2);
    }
    if (::geteuid() == 0) {
      std::fprintf(stderr, "still root after dropping privileges\n");
      std::_Exit(3);
    }
    const std::string why = check();
    if (!why.empty()) std::fprintf(stderr, "as uid %u: %s\n", ::geteuid(), why.c_str());
    std::fflush(nullptr);
    std::_Exit(why.empty() ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (cleanup) cleanup();
  std::fflush(nullptr);
  std::_Exit(WIFEXITED(status) ? WEXITSTATUS(status) : 5);
}

/// Chowns `path` to the unprivileged user when running as root (the daemon's own files belong to
/// it); a no-op otherwise. False when the chown failed.
inline bool give_to_unprivileged(const std::string& path) {
  if (::geteuid() != 0) return true;
  return ::chown(path.c_str(), unprivileged_id, unprivileged_id) == 0;
}

}  // namespace kvrelay::testing

/// Expects `check` (a callable returning "" when it holds) to hold as the unprivileged user;
/// `...` is an optional cleanup run afterwards with the test's own privileges.
#define KVRELAY_EXPECT_UNPRIVILEGED(check, ...)                                              \
  do {                                                                                       \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                                          \
    EXPECT_EXIT(::kvrelay::testing::run_unprivileged(check, ##__VA_ARGS__),                  \
                ::testing::ExitedWithCode(0), "");                                           \
  } while (0)
