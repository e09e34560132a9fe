// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// libFuzzer target: the Prometheus parser and both metric profiles on arbitrary bytes. The body
// comes from an untrusted engine endpoint; nothing in here may crash, hang or throw.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "actors/scraper/metric_profile.hpp"
#include "actors/scraper/prom_parser.hpp"

namespace {

void check(const kvrelay::scrape_result& r) {
  // Invariants every accepted scrape keeps, whatever the engine wrote.
  if (!r.ok) {
    if (r.error.empty() || r.stats.cache_memory_bytes != 0 || r.stats.pressure != 0.0) __builtin_trap();
    return;
  }
  const auto& s = r.stats;
  if (!(s.hit_rate >= 0.0 && s.hit_rate <= 1.0)) __builtin_trap();
  if (!(s.pressure >= 0.0 && s.pressure <= 1.0)) __builtin_trap();
  if (s.cache_memory_bytes < 0 || s.t2_hit_tokens < 0 || s.t2_query_tokens < 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  kvrelay::prom_parse_result parsed = kvrelay::parse_prometheus(body);
  if (!parsed.ok) {
    if (parsed.error.empty()) __builtin_trap();
    return 0;
  }
  for (const char* scheme : {"vllm", "sglang"}) {
    for (const char* model : {"", "m"}) {
      kvrelay::scraper_config cfg;
      cfg.hash_scheme = scheme;
      cfg.model_name = model;
      cfg.cache_size_bytes = int64_t{1} << 40;
      kvrelay::scraper_logic logic(cfg);
      check(logic.scrape_exposition(parsed.exposition));
      check(logic.scrape_exposition(parsed.exposition));  // second tick exercises the delta
    }
  }
  return 0;
}
