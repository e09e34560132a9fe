// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// libFuzzer harness for the configuration front door: TOML text, command lines and value
// grammars are untrusted. Beyond "never crash, never throw", it checks one invariant: a
// configuration that loads and validates prints (to_toml) to text that loads back to the same
// configuration, which is what `--check` promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "config/flags.hpp"
#include "config/loader.hpp"
#include "config/values.hpp"

using namespace kvrelay::config;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 3;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode == 0) {
    auto loaded = parse_toml(text, "fuzz.toml");
    if (!loaded) return 0;
    daemon_config cfg = loaded.value();
    if (!validate(cfg)) return 0;
    const std::string printed = to_toml(cfg);
    auto again = parse_toml(printed, "printed.toml");
    if (!again || !validate(again.value()) || !diff_for_reload(cfg, again.value()).empty() ||
        to_toml(again.value()) != printed)
      std::abort();
  } else if (mode == 1) {
    std::vector<std::string> args;
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (i == text.size() || text[i] == '\0') {
        args.emplace_back(text.substr(start, i - start));
        start = i + 1;
      }
    }
    auto parsed = parse_flags(args);
    parsed.values.config_path.reset();  // never read files named by fuzz input
    (void)resolve(parsed.values);
    (void)usage();
  } else {
    std::chrono::milliseconds d{};
    if (parse_duration(text, d).empty()) {
      std::chrono::milliseconds back{};
      if (!parse_duration(format_duration(d), back).empty() || back != d) std::abort();
    }
    int64_t i = 0;
    (void)parse_go_int(text, i);
    (void)parse_size(text, i);
    bool b = false;
    (void)parse_go_bool(text, b);
    (void)check_endpoint(text);
    (void)check_url(text);
    (void)check_listen_address(text);
    (void)check_grpc_target(text);
    std::map<int64_t, std::string> adapters;
    (void)parse_adapter_names(text, adapters);
    std::string out;
    if (check_endpoint(text).empty()) (void)rank_endpoint(std::string(text), 3, out);
  }
  return 0;
}
