// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// Prometheus exposition parser (text format 0.0.4 and OpenMetrics 1.0) for engine /metrics
// bodies. Our own: the engine is untrusted input, so it is strict (a malformed line is an error
// naming its line number), bounded (bodies over kMaxPrometheusBody are refused) and never throws.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvrelay {

// Bigger than any real engine exposition by two orders of magnitude; the cap keeps a broken or
// hostile endpoint from making us hold an unbounded parse tree.
inline constexpr std::size_t kMaxPrometheusBody = 16u * 1024u * 1024u;

enum class metric_type {
  untyped,  // no TYPE line, or TYPE untyped / unknown
  counter,
  gauge,
  histogram,
  summary,
  gaugehistogram,
  stateset,
  info,
};

const char* to_string(metric_type t);

struct prom_label {
  std::string name;
  std::string value;
};

struct prom_sample {
  // What follows the family name in the sample's metric name: "" for the plain sample, or one of
  // _total/_created (counter), _bucket/_sum/_count/_created (histogram, summary), _gsum/_gcount
  // (gaugehistogram), _info (info). Lets readers skip _created and histogram parts.
  std::string suffix;
  std::vector<prom_label> labels;
  double value = 0.0;
  bool has_timestamp = false;
  double timestamp = 0.0;  // as written: ms (text 0.0.4) or s (OpenMetrics); unused by kvrelay

  // Returns the label's value, or nullptr when the sample has no such label. An explicitly empty
  // label (name="") is returned as an empty string, so callers can tell the two apart.
  const std::string* label(std::string_view name) const;
};

struct metric_family {
  std::string name;
  metric_type type = metric_type::untyped;
  bool declared = false;  // a TYPE line named it (untyped families read as absent to profiles)
  std::vector<prom_sample> samples;
};

class prom_exposition {
 public:
  // The family declared (or first sampled) under exactly this name; nullptr when absent.
  const metric_family* find(std::string_view name) const;
  const std::vector<metric_family>& families() const { return families_; }
  bool eof_seen() const { return eof_seen_; }  // an OpenMetrics "# EOF" terminated the body

 private:
  friend class prom_parser_impl;
  std::vector<metric_family> families_;
  std::unordered_map<std::string, std::size_t> by_name_;
  bool eof_seen_ = false;
};

struct prom_parse_result {
  bool ok = false;
  std::string error;  // "line N: what" when !ok
  prom_exposition exposition;
};

// Parses one exposition body. Never throws (allocation failure aside).
prom_parse_result parse_prometheus(std::string_view body);

}  // namespace kvrelay
