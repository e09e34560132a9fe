// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// kvrelay's own Prometheus registry: counters, gauges and histograms whose series are created
// once (under a lock) and then updated lock-free from any thread. Actors keep references to their
// series; the admin port renders text format 0.0.4. We write our own instead of prometheus-cpp to
// keep the hot path to one relaxed atomic add and the dependency surface small.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kvrelay {

using label_set = std::vector<std::pair<std::string, std::string>>;

class counter_series {
 public:
  void inc(uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }
  /// Publishes a total counted elsewhere (a protocol's plain counters): adds its growth since
  /// `published`, then remembers it.
  void advance(uint64_t total, uint64_t& published) noexcept {
    if (total > published) inc(total - published);
    published = total;
  }

 private:
  std::atomic<uint64_t> v_{0};
};

class gauge_series {
 public:
  void set(double v) noexcept { v_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept {
    double cur = v_.load(std::memory_order_relaxed);
    while (!v_.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed)) {
    }
  }
  double value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
};

class histogram_series {
 public:
  explicit histogram_series(std::vector<double> bounds);
  void observe(double v) noexcept;
  const std::vector<double>& bounds() const noexcept { return bounds_; }
  /// Cumulative counts per bound (+Inf last), sum and count, read racily (fine for scraping).
  std::vector<uint64_t> cumulative() const;
  double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1 (+Inf)
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

class metrics_registry {
 public:
  counter_series& counter(const std::string& name, const std::string& help,
                          const label_set& labels = {});
  gauge_series& gauge(const std::string& name, const std::string& help,
                      const label_set& labels = {});
  histogram_series& histogram(const std::string& name, const std::string& help,
                              const std::vector<double>& bounds, const label_set& labels = {});

  /// Drops one series (a policy server target that left): it is no longer rendered. The
  /// reference the caller got from counter()/gauge()/histogram() dangles after this.
  void remove(const std::string& name, const label_set& labels);

  /// Prometheus text exposition format 0.0.4: the registry's families, then what every
  /// collector appends.
  std::string render() const;

  /// A scrape-time collector: appends whole families (append_family) for values that live
  /// outside the registry and are read when scraped (/proc). Called by render() outside the
  /// registry's lock, from the scraping thread; it must not register series on this registry.
  using collector = std::function<void(std::string& out)>;
  void add_collector(collector c);

  /// Value of a counter or gauge series, or -1 when absent (for tests and /debug pages).
  double value(const std::string& name, const label_set& labels = {}) const;
  /// Sum of every counter or gauge series of `name` whose labels include all of `match`; -1 when
  /// no series matches (e.g. a replica's resident blocks over its adapters).
  double sum(const std::string& name, const label_set& match) const;

  /// Latency buckets in seconds used for RPC and event-age histograms.
  static std::vector<double> latency_buckets();

 private:
  enum class kind { counter, gauge, histogram };
  struct family {
    kind k;
    std::string help;
    std::map<std::string, std::unique_ptr<counter_series>> counters;
    std::map<std::string, std::unique_ptr<gauge_series>> gauges;
    std::map<std::string, std::unique_ptr<histogram_series>> histograms;
    std::map<std::string, label_set> labels;  // rendered key → labels
  };
  family& get_family(const std::string& name, kind k, const std::string& help);
  std::string render_families() const;  // mu_ held

  mutable std::mutex mu_;
  std::map<std::string, family> families_;
  std::vector<collector> collectors_;
};

/// One sample of a family a collector writes.
struct sample_value {
  label_set labels;
  double value = 0;
};
/// Appends `# HELP`, `# TYPE` and the samples of one family (type "counter", "gauge", "untyped").
void append_family(std::string& out, const std::string& name, const char* type,
                   const std::string& help, const std::vector<sample_value>& samples);

/// A value as the text format writes it: integers without a fraction, NaN, +Inf, -Inf.
std::string format_metric_value(double v);

/// Escapes a label value per the exposition format.
std::string escape_label_value(const std::string& v);

}  // namespace kvrelay
