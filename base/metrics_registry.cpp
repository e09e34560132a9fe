// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/metrics_registry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace kvrelay {

namespace {

std::string render_labels(const label_set& labels, const char* extra_key = nullptr,
                          const std::string& extra_value = {}) {
  if (labels.empty() && !extra_key) return {};
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += escape_label_value(v);
    out += '"';
  }
  if (extra_key) {
    if (!first) out += ',';
    out += extra_key;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  // The shortest form that reads back as the same double: a start time in seconds since the
  // epoch needs 12 digits, a latency sum 17.
  char buf[32];
  for (int precision = 9; precision < 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

histogram_series::histogram_series(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void histogram_series::observe(double v) noexcept {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double cur = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

std::vector<uint64_t> histogram_series::cumulative() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += buckets_[i].load(std::memory_order_relaxed);
    out[i] = acc;
  }
  return out;
}

metrics_registry::family& metrics_registry::get_family(const std::string& name, kind k,
                                                       const std::string& help) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(name, family{}).first;
    it->second.k = k;
    it->second.help = help;
  } else if (it->second.k != k) {
    // A programming error (one name, two types): fail loudly in tests, not silently in prod.
    throw std::logic_error("metric " + name + " registered with two types");
  }
  return it->second;
}

namespace {

// The series of `labels` in one family's map, made on first use; its labels are kept for render.
template <class Series>
Series& series_of(std::map<std::string, std::unique_ptr<Series>>& slots,
                  std::map<std::string, label_set>& labels_of, std::string key,
                  const label_set& labels) {
  auto& slot = slots[key];
  if (!slot) {
    slot = std::make_unique<Series>();
    labels_of[std::move(key)] = labels;
  }
  return *slot;
}

}  // namespace

counter_series& metrics_registry::counter(const std::string& name, const std::string& help,
                                          const label_set& labels) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& f = get_family(name, kind::counter, help);
  return series_of(f.counters, f.labels, render_labels(labels), labels);
}

gauge_series& metrics_registry::gauge(const std::string& name, const std::string& help,
                                      const label_set& labels) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& f = get_family(name, kind::gauge, help);
  return series_of(f.gauges, f.labels, render_labels(labels), labels);
}

void metrics_registry::remove(const std::string& name, const label_set& labels) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return;
  auto& f = it->second;
  const auto key = render_labels(labels);
  f.counters.erase(key);
  f.gauges.erase(key);
  f.histograms.erase(key);
  f.labels.erase(key);
}

histogram_series& metrics_registry::histogram(const std::string& name, const std::string& help,
                                              const std::vector<double>& bounds,
                                              const label_set& labels) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& f = get_family(name, kind::histogram, help);
  auto key = render_labels(labels);
  auto& slot = f.histograms[key];
  if (!slot) {
    slot = std::make_unique<histogram_series>(bounds);
    f.labels[key] = labels;
  }
  return *slot;
}

void metrics_registry::add_collector(collector c) {
  std::lock_guard<std::mutex> lk(mu_);
  collectors_.push_back(std::move(c));
}

void append_family(std::string& out, const std::string& name, const char* type,
                   const std::string& help, const std::vector<sample_value>& samples) {
  out += "# HELP " + name + ' ' + help + "\n# TYPE " + name + ' ' + type + '\n';
  for (const auto& s : samples)
    out += name + render_labels(s.labels) + ' ' + format_metric_value(s.value) + '\n';
}

std::string metrics_registry::render() const {
  std::string text;
  std::vector<collector> collectors;
  {
    std::lock_guard<std::mutex> lk(mu_);
    text = render_families();
    collectors = collectors_;
  }
  for (const auto& c : collectors) c(text);
  return text;
}

std::string metrics_registry::render_families() const {
  std::ostringstream out;
  for (const auto& [name, f] : families_) {
    const char* type = f.k == kind::counter ? "counter" : f.k == kind::gauge ? "gauge" : "histogram";
    out << "# HELP " << name << ' ' << f.help << '\n' << "# TYPE " << name << ' ' << type << '\n';
    for (const auto& [key, c] : f.counters) out << name << key << ' ' << c->value() << '\n';
    for (const auto& [key, g] : f.gauges) out << name << key << ' ' << format_metric_value(g->value()) << '\n';
    for (const auto& [key, h] : f.histograms) {
      const auto& labels = f.labels.at(key);
      auto cum = h->cumulative();
      for (size_t i = 0; i < h->bounds().size(); ++i)
        out << name << "_bucket" << render_labels(labels, "le", format_metric_value(h->bounds()[i]))
            << ' ' << cum[i] << '\n';
      out << name << "_bucket" << render_labels(labels, "le", "+Inf") << ' ' << cum.back() << '\n';
      out << name << "_sum" << key << ' ' << format_metric_value(h->sum()) << '\n';
      // The +Inf bucket, not count(): read a moment apart, they could differ under load, and
      // Prometheus takes them to be one number.
      out << name << "_count" << key << ' ' << cum.back() << '\n';
    }
  }
  return out.str();
}

double metrics_registry::value(const std::string& name, const label_set& labels) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return -1;
  auto key = render_labels(labels);
  if (auto c = it->second.counters.find(key); c != it->second.counters.end())
    return static_cast<double>(c->second->value());
  if (auto g = it->second.gauges.find(key); g != it->second.gauges.end()) return g->second->value();
  return -1;
}

double metrics_registry::sum(const std::string& name, const label_set& match) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return -1;
  const auto& fam = it->second;
  double total = 0;
  bool any = false;
  for (const auto& kv : fam.labels) {
    // Not a structured binding: clang 14 (the fuzz and sanitizer presets) cannot capture one.
    const auto& key = kv.first;
    const auto& labels = kv.second;
    const bool all = std::all_of(match.begin(), match.end(), [&](const auto& want) {
      return std::find(labels.begin(), labels.end(), want) != labels.end();
    });
    if (!all) continue;
    if (auto c = fam.counters.find(key); c != fam.counters.end()) {
      total += static_cast<double>(c->second->value());
      any = true;
    } else if (auto g = fam.gauges.find(key); g != fam.gauges.end()) {
      total += g->second->value();
      any = true;
    }
  }
  return any ? total : -1;
}

std::vector<double> metrics_registry::latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace kvrelay
