// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "durable/format/state_dir.hpp"

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

state_dir_usage_t state_dir_usage(const std::string& dir) {
  state_dir_usage_t u;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const auto ends = [&n](std::string_view x) {
      return n.size() > x.size() && n.compare(n.size() - x.size(), x.size(), x) == 0;
    };
    if (ends(".kvsnap")) ++u.snapshots;
    else if (ends(".kvlog")) ++u.segments;
    else if (n.find(".kvsnap.tmp.") != std::string::npos) ++u.temporary;
    else continue;
    std::error_code sec;
    const auto b = e.file_size(sec);
    if (!sec) u.bytes += b;
  }
  return u;
}

std::string describe_state_dir(const std::string& dir) {
  const auto u = state_dir_usage(dir);
  return "state.dir " + dir + " holds " + std::to_string(u.snapshots) + " snapshot(s), " +
         std::to_string(u.segments) + " delta log segment(s)" +
         (u.temporary ? ", " + std::to_string(u.temporary) + " partial write(s)" : "") + ": " +
         std::to_string(u.bytes) +
         " bytes. Bounded per pipeline served: its snapshot (20 B per resident block), a "
         "second one while it is rewritten, and a delta log of at most a snapshot's size (at "
         "least 256 KiB) plus one segment; files of a pipeline's older endpoints are removed "
         "once it writes a snapshot (kvrelay_state_dir_bytes)";
}

}  // namespace kvrelay
