// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Which KV-cache groups of a hybrid model we index (docs/spec/engine-wire.md "Hybrid models", following
// Dynamo's zmq_wire filter): only main-attention groups (full, MLA, sink-full). A sliding-window
// or mamba group evicts blocks outside its window while the full-attention copy stays cached, so
// letting its BlockRemoved through would erase a reusable prefix. Pure logic; one instance per
// pipeline (per engine DP rank), because group numbering is per engine.

#include "base/kv_events.hpp"

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvrelay {

class group_filter {
 public:
  /// Distinct groups remembered at most; a real model has a handful. Beyond it, new groups are
  /// not learned (and so judged by the unlearned rule), which keeps memory bounded.
  static constexpr size_t max_groups = 1024;

  /// Learns group_idx → kind from a stored event that carries both, then says whether the event
  /// is indexable:
  ///  - a kind is present: indexable iff it is a main kind;
  ///  - neither group_idx nor kind: indexable (single-group engines);
  ///  - group_idx without kind: indexable iff the group was learned as main, or it was never
  ///    learned, is group 0, and no group at all was learned yet. Dynamo accepts group 0 even
  ///    when learned as non-main; we trust what we learned instead. Once the engine has stated
  ///    kinds (vLLM ≥ era G), a kind-less store is an offload placeholder of its group (vLLM
  ///    #51243 keeps them for Mamba and sliding-window groups: no tokens, block_size 0, their
  ///    group's index, no kind; kv_connector/v1/offloading/events.py _placeholder_stored
  ///    @ 896c8e6e20f0), so group 0 is no longer presumed main for it.
  bool admit(const block_stored& e);

  /// Whether a removal may evict: the same rule as a stored event without a kind. A removal
  /// from a group known (or presumed) not to be main never evicts.
  bool admit(const block_removed& e) const;

  /// What was learned for `group`; unspecified when nothing was.
  group_kind kind_of(int64_t group) const;

  /// Forgets everything (a new engine incarnation may number its groups differently).
  void reset() { kinds_.clear(); }

  size_t learned() const noexcept { return kinds_.size(); }

  /// Durable index: what was learned, and the reverse (at most max_groups, values
  /// that are no group_kind skipped).
  std::vector<std::pair<int64_t, uint8_t>> export_kinds() const;
  void import_kinds(const std::vector<std::pair<int64_t, uint8_t>>& kinds);

 private:
  bool admit_group(int64_t group, bool presume_zero) const;

  std::unordered_map<int64_t, group_kind> kinds_;
};

}  // namespace kvrelay
