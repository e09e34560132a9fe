// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/read_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvrelay {
namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every path out.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string describe_bytes(size_t n) {
  if (n >= (size_t{1} << 20) && n % (size_t{1} << 20) == 0)
    return std::to_string(n >> 20) + " MiB";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " bytes";
}

outcome<std::string> read_pem_file(const std::string& path, std::string_view subject) {
  constexpr size_t max_pem_bytes = size_t{1} << 20;
  auto text = read_regular_file(path, max_pem_bytes, subject);
  if (text && text.value().find("-----BEGIN ") == std::string::npos)
    return failure{ec::invalid_config,
                   std::string(subject) + " is not a PEM file (no -----BEGIN line)", {}};
  return text;
}

outcome<std::string> read_regular_file(const std::string& path, size_t max_bytes,
                                       std::string_view subject) {
  const std::string what(subject);
  auto fail = [](std::string text) { return failure{ec::invalid_config, std::move(text), {}}; };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It changes
  // nothing for the regular files we go on to read.
  fd_guard f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) return fail("cannot open " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return fail("cannot read " + what + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(what + " is " + kind_of(st.st_mode) + ", not a regular file");
  const auto too_large = [&] { return fail(what + " larger than " + describe_bytes(max_bytes)); };
  if (st.st_size < 0 || static_cast<unsigned long long>(st.st_size) > max_bytes)
    return too_large();
  // The size can change under us (a log still being written): read at most one byte past the
  // bound, whatever fstat said.
  std::string out(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  for (;;) {
    if (got == out.size()) {
      if (out.size() > max_bytes) return too_large();
      out.resize(std::min(max_bytes + 1, out.size() * 2));
    }
    const ssize_t n = ::read(f.fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot read " + what + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return too_large();
  out.resize(got);
  return out;
}

}  // namespace kvrelay
