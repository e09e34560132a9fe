// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace kvrelay::testing {

inline std::string read_metrics_fixture(const std::string& name) {
  std::ifstream in(std::string(KVRELAY_FIXTURES_DIR) + "/metrics/" + name, std::ios::binary);
  if (!in) return "<<missing fixture " + name + ">>";  // makes the parse (and the test) fail
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace kvrelay::testing
