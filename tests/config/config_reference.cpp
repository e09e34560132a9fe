// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Regenerates the tables of docs/configuration.md from the schema (config/schema.cpp):
//   config_reference docs/configuration.md           the page with its tables regenerated, on stdout
//   config_reference --write docs/configuration.md   the same, written back to the file
// Docs.ReferenceTablesMatchTheSchema fails until the page equals what this writes.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "config/schema.hpp"

int main(int argc, char** argv) {
  static const char* const usage =
      "usage: config_reference [--write] docs/configuration.md\n"
      "  the page with its tables regenerated from the schema, on stdout or (--write) in place\n";
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::cout << usage;
    return 0;
  }
  const bool write = argc == 3 && std::string(argv[1]) == "--write";
  if (argc != 2 && !write) {
    std::cerr << usage;
    return 2;
  }
  const std::string path = argv[argc - 1];
  std::ifstream in(path);
  if (!in) {
    std::cerr << path << ": cannot read\n";
    return 1;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string out = kvrelay::config::with_reference_tables(buf.str());
  if (!write) {
    std::cout << out;
    return 0;
  }
  in.close();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
  return 0;
}
