// kvrelay daemon entry point: the only translation unit outside the library.
#include <CLI/CLI.hpp>

#include <iostream>

#include "runtime/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvrelay: engine KV-cache events to a cache-policy server"};
  bool show_version = false;
  app.add_flag("--version", show_version, "print kvrelay's version and its libraries' and exit");
  CLI11_PARSE(app, argc, argv);
  if (show_version) {
    std::cout << kvrelay::version_report();
    return 0;
  }
  std::cerr << "kvrelay: the daemon is not wired yet; try --version\n";
  return 2;
}
