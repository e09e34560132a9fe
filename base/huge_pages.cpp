// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

#include "base/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace kvrelay::huge_pages {

namespace {

#ifdef MADV_POPULATE_WRITE
constexpr int populate_write = MADV_POPULATE_WRITE;
#else
constexpr int populate_write = 23;  // Linux 5.14's value; older kernels say EINVAL
#endif

}  // namespace

void* map(size_t bytes, bool populate) noexcept {
  bytes = page_rounded(bytes);
  // Over-map by a huge page less a page, then give back what lies before the boundary and after
  // the run: the address space costs nothing, only touched pages are memory.
  const size_t span = bytes + huge_page - page;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = (raw + huge_page - 1) & ~(huge_page - 1);
  if (begin > raw) munmap(p, begin - raw);
  if (raw + span > begin + bytes)
    munmap(reinterpret_cast<void*>(begin + bytes), raw + span - (begin + bytes));
  auto* run = reinterpret_cast<void*>(begin);
  madvise(run, bytes, MADV_HUGEPAGE);
  if (populate) madvise(run, bytes, populate_write);
  return run;
}

void unmap(void* p, size_t bytes) noexcept {
  if (p != nullptr) munmap(p, page_rounded(bytes));
}

}  // namespace kvrelay::huge_pages
