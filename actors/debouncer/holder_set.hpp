// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Data-parallel merged mode: several DP ranks of one engine report as ONE replica, so a block
// evicted by one rank may still be cached by another. holder_set remembers which ranks hold each
// (adapter, fingerprint) so that only the first holder's add and the last holder's eviction
// reach the server. Pure logic, no CAF.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kvrelay {

class holder_set {
 public:
  /// Ranks are bits of a 64-bit mask; a rank >= max_ranks is ignored (add/remove return false),
  /// so configuration must reject a merged dp_size above it.
  static constexpr unsigned max_ranks = 64;

  holder_set();
  ~holder_set();
  holder_set(holder_set&&) noexcept;
  holder_set& operator=(holder_set&&) noexcept;
  holder_set(const holder_set&) = delete;
  holder_set& operator=(const holder_set&) = delete;

  /// `rank` now holds the key. True iff no rank held it before (forward the add).
  bool add(const std::string& adapter, uint64_t fingerprint, unsigned rank);

  /// `rank` no longer holds the key. True iff it held it and was the last holder (forward the
  /// eviction). A rank that did not hold the key changes nothing and returns false.
  bool remove(const std::string& adapter, uint64_t fingerprint, unsigned rank);

  /// Bitmask of the ranks holding the key (0 if none).
  uint64_t holders(const std::string& adapter, uint64_t fingerprint) const;

  /// Drops `rank` from every key (that rank cleared its cache or restarted); calls
  /// fn(adapter, fingerprint) for each key no rank holds any more. Returns how many.
  size_t clear_rank(unsigned rank,
                    const std::function<void(const std::string& adapter, uint64_t fp)>& fn);

  /// Forgets everything (ALL_CLEARED for the replica).
  void clear();

  /// Keys held by at least one rank.
  size_t size() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvrelay
