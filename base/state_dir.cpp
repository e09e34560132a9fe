// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/state_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace kvrelay {

outcome<void> check_state_dir(const std::string& dir, bool create) {
  const auto bad = [&](const std::string& why) {
    return failure{ec::invalid_config, dir + ": " + why, {}};
  };
  if (dir.empty()) return bad("empty path");
  std::error_code ec;
  std::filesystem::path p(dir);
  if (!std::filesystem::exists(p, ec)) {
    if (create) {
      std::filesystem::create_directories(p, ec);
      if (ec) return bad("cannot create it: " + ec.message());
    } else {
      // --check: the nearest existing ancestor must let us create it.
      std::filesystem::path up = p.is_absolute() ? p : std::filesystem::absolute(p, ec);
      while (!up.empty() && !std::filesystem::exists(up, ec) && up != up.parent_path())
        up = up.parent_path();
      if (up.empty()) return bad("no existing parent directory");
      if (!std::filesystem::is_directory(up, ec))
        return bad("does not exist, and " + up.string() + " is not a directory");
      if (::access(up.c_str(), W_OK | X_OK) != 0)
        return bad("does not exist, and " + up.string() + " is not writable: " +
                   std::string(std::strerror(errno)));
      return {};
    }
  }
  if (!std::filesystem::is_directory(p, ec)) return bad("not a directory");
  // Creating a file is the only proof: access() says nothing of a read-only mount.
  const std::string probe = (p / (".kvrelay-probe-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return bad("cannot create files in it: " + std::string(std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace kvrelay
