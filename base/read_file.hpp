// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Reading a file that configuration names (the TOML file, TLS material, the admin token). Such a
// path is untrusted: it may name a FIFO (opening it for reading blocks until a writer appears),
// a device (/dev/zero never ends), a directory, or a log that grew to gigabytes. So: open
// without blocking, accept regular files only, and never read more than the caller's bound.

#include <cstddef>
#include <string>
#include <string_view>

#include "base/error.hpp"

namespace kvrelay {

/// The whole of `path` (symlinks followed) if it is a regular file of at most `max_bytes`.
/// Otherwise a failure (code invalid_config) whose context is a phrase about `subject`, e.g. for
/// subject "config file": "cannot open config file: No such file or directory", "config file is
/// a FIFO, not a regular file", "config file larger than 1 MiB", "cannot read config file: ...".
outcome<std::string> read_regular_file(const std::string& path, size_t max_bytes,
                                       std::string_view subject);

/// TLS material (a CA bundle, a certificate, a key): a regular file of at most 1 MiB with a
/// "-----BEGIN " line; otherwise a failure as read_regular_file's, or "<subject> is not a PEM
/// file (no -----BEGIN line)". The config check and the policy client read it the same way.
outcome<std::string> read_pem_file(const std::string& path, std::string_view subject);

/// "1 MiB", "4 KiB", "100 bytes": a byte bound as messages show it.
std::string describe_bytes(size_t n);

}  // namespace kvrelay
