// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// The one way a shell publishes a protocol's plain counters: a table of rows (metric name, help,
// label, the counters struct's field), declared once at the top of the shell. A counter_table
// resolves each row's series and remembers what it last published; publish() adds each field's
// growth since then. A new counter is one field in the protocol's struct and one row here.
//
// Families whose label values are computed (per medium, per decode error, per engine value) are
// not rows: their shells keep their loops. Gauges are set directly.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/metrics_registry.hpp"

namespace kvrelay {

/// One counter series of a protocol's counters struct. A row with a label is one series of a
/// family whose other rows share the name and help.
template <class Counters>
struct counter_row {
  const char* name;
  const char* help;
  const char* label_key;  // nullptr: no label of its own
  const char* label_value;
  uint64_t Counters::*field;
};

template <class Counters>
class counter_table {
 public:
  /// When a row's series is created: at once (at 0, so dashboards see it), or on the first count
  /// (families with many label sets, e.g. per adapter partition, list only what happened).
  enum class create { at_once, on_first_count };

  /// `labels` go on every series (the pipeline's, e.g. pipeline_context::labels()), before the
  /// row's own label. `rows` must outlive the table (a constexpr array at namespace scope).
  template <size_t N>
  counter_table(const counter_row<Counters> (&rows)[N], std::shared_ptr<metrics_registry> registry,
                label_set labels, create when = create::at_once)
      : rows_(rows), registry_(std::move(registry)), labels_(std::move(labels)), series_(N) {
    if (when == create::at_once)
      for (size_t i = 0; i < N; ++i) series_[i] = &resolve(i);
  }

  /// Adds each field's growth since the last call to its series.
  void publish(const Counters& now) {
    for (size_t i = 0; i < series_.size(); ++i) {
      const uint64_t total = now.*(rows_[i].field);
      uint64_t& published = published_.*(rows_[i].field);
      if (total == published) continue;
      if (series_[i] == nullptr) series_[i] = &resolve(i);
      series_[i]->advance(total, published);
    }
  }

  /// What the last publish() saw of each row's field (fields no row names stay 0).
  const Counters& published() const noexcept { return published_; }

 private:
  counter_series& resolve(size_t i) {
    label_set l = labels_;
    if (rows_[i].label_key) l.emplace_back(rows_[i].label_key, rows_[i].label_value);
    return registry_->counter(rows_[i].name, rows_[i].help, l);
  }

  const counter_row<Counters>* rows_;
  std::shared_ptr<metrics_registry> registry_;
  label_set labels_;
  std::vector<counter_series*> series_;
  Counters published_{};
};

}  // namespace kvrelay
