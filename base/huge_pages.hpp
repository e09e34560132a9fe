#pragma once
// Transparent-huge-page advice for tables probed at random over tens of MB: with 4 KiB pages
// nearly every probe also misses the TLB, and growing such a table faults its memory in 4 KiB at a
// time. Advice only, on the 2 MiB-aligned interior of the block: nothing is rounded up, no memory
// is added, and a kernel with THP off ignores it.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace kvrelay {

inline void advise_huge_pages(void* p, size_t bytes) noexcept {
  constexpr uintptr_t huge = uintptr_t{2} << 20;
  const auto begin = (reinterpret_cast<uintptr_t>(p) + huge - 1) & ~(huge - 1);
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(huge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

/// std::allocator with that advice on every block (only blocks of 2 MiB or more have an aligned
/// interior), for absl's hash tables.
template <class T>
struct huge_page_allocator {
  using value_type = T;
  huge_page_allocator() = default;
  template <class U>
  huge_page_allocator(const huge_page_allocator<U>&) noexcept {}

  T* allocate(size_t n) {
    void* p = std::malloc(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    advise_huge_pages(p, n * sizeof(T));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }

  template <class U>
  bool operator==(const huge_page_allocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const huge_page_allocator<U>&) const noexcept { return false; }
};

}  // namespace kvrelay
