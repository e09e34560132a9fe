// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// What the configuration tests share: parse text as "t.toml", the error line of an outcome, flags
// from a list of arguments, and a scratch directory for files a configuration names.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/loader.hpp"

namespace kvrelay::config::testing_helpers {

/// The error line of an outcome, "" when there is none.
template <class T>
std::string err(const outcome<T>& r) {
  return r ? std::string() : r.error().context;
}

/// Parses `text` as file "t.toml" and expects success.
inline daemon_config load(const std::string& text) {
  auto r = parse_toml(text, "t.toml");
  EXPECT_TRUE(r.ok()) << err(r);
  return r ? r.value() : daemon_config{};
}

/// Parses `text` and returns the error line ("" when it loaded).
inline std::string load_error(const std::string& text) { return err(parse_toml(text, "t.toml")); }

/// Parses and validates; returns the first error ("" when valid).
inline std::string check(const std::string& text) {
  auto r = parse_toml(text, "t.toml");
  if (!r) return err(r);
  return err(validate(r.value()));
}

inline flag_values flags(std::vector<std::string> args) {
  auto r = parse_flags(args);
  EXPECT_EQ(r.status, flag_parse_result::outcome::ok) << r.error;
  return r.values;
}

inline const char* const minimal = "[[engine]]\nreplica_id = \"r0\"\nmodel_id = \"m\"\n";

/// A fresh directory under the test temp dir, removed with what it holds.
class scratch_dir {
 public:
  scratch_dir() {
    std::string tmpl = ::testing::TempDir() + "/kvrelay_config_XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
    EXPECT_FALSE(path_.empty());
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }
  std::string fifo(const std::string& name) const {
    EXPECT_EQ(::mkfifo(file(name).c_str(), 0600), 0);
    return file(name);
  }
  std::string dir(const std::string& name) const {
    std::filesystem::create_directory(file(name));
    return file(name);
  }

 private:
  std::string path_;
};

}  // namespace kvrelay::config::testing_helpers
