// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#pragma once
// Memory for the big arrays kvrelay probes at random (the index's tables, the debouncer's pending
// map): mappings of their own, starting on a 2 MiB boundary, with the kernel's huge-page advice.
//
//  HP1. With 4 KiB pages, a random access into an array of tens of MB that the cache has lost
//       costs a TLB miss and a page walk: ~0.9 µs in the VMs kvrelay was measured in, against
//       ~0.1 µs on 2 MiB pages (a paced engine's batch every few ms finds the cache cold every
//       time). The advice is only that: the kernel backs the run with huge pages when
//       transparent_hugepage is `madvise` or `always` and it has them; otherwise 4 KiB pages, as
//       before.
//  HP2. A run is freed, or any page-aligned piece of it, by unmap(): its pages go back to the
//       system at once (malloc would keep a freed big array in its arena).
//  HP3. huge_page_allocator<T> takes arrays of `huge_page_allocator_from` bytes or more from
//       map() and the rest from std::allocator, deciding by the size alone, so deallocate
//       (which is given the same size) always frees where allocate took.

#include <cstddef>
#include <memory>
#include <new>

namespace kvrelay::huge_pages {

inline constexpr size_t huge_page = size_t{2} << 20;
inline constexpr size_t page = 4096;

inline size_t page_rounded(size_t bytes) noexcept { return (bytes + page - 1) & ~(page - 1); }

/// `bytes` (rounded up to pages) of zero pages from a huge-page boundary, advised (HP1) and,
/// with `populate`, faulted in at once; nullptr when the system has no room.
void* map(size_t bytes, bool populate) noexcept;

/// Frees [p, p + bytes) of a run from map(), or a page-aligned piece of one (HP2).
void unmap(void* p, size_t bytes) noexcept;

}  // namespace kvrelay::huge_pages

namespace kvrelay {

inline constexpr size_t huge_page_allocator_from = size_t{4} << 20;  // past a core's TLB reach

/// HP3: an allocator for containers whose arrays grow past a few MB (absl's flat maps).
template <class T>
struct huge_page_allocator {
  using value_type = T;

  huge_page_allocator() noexcept = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (n * sizeof(T) < huge_page_allocator_from) return std::allocator<T>().allocate(n);
    void* p = huge_pages::map(n * sizeof(T), false);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < huge_page_allocator_from) return std::allocator<T>().deallocate(p, n);
    huge_pages::unmap(p, n * sizeof(T));
  }

  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const huge_page_allocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace kvrelay
