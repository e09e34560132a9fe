// SPDX-FileCopyrightText: 2026 The kvrelay Authors
//
// SPDX-License-Identifier: Apache-2.0

// base/huge_pages.hpp, rules HP1-HP3: where the runs are, what frees them, and the allocator's
// choice of source, read back from /proc/self/maps. Whether the kernel backs a run with huge
// pages is the system's (transparent_hugepage); the tests hold what kvrelay controls.
#include "base/huge_pages.hpp"

#include <gtest/gtest.h>

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>

#include "tests/support/mappings.hpp"

namespace kvrelay {
namespace {

using testing::mapped_bytes;
using testing::mapping_of;
constexpr uintptr_t huge = huge_pages::huge_page;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HugePages, HP1_ARunStartsOnAHugePageBoundaryAndIsZero) {
  const size_t bytes = 3 * huge + 12345;  // not a multiple of anything
  auto* p = static_cast<unsigned char*>(huge_pages::map(bytes, false));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(address(p) % huge, 0u);
  const auto [begin, end] = mapping_of(p);
  EXPECT_LE(begin, address(p));
  EXPECT_GE(end, address(p) + huge_pages::page_rounded(bytes)) << "the whole run is mapped";
  for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(p[i], 0) << i;
  p[bytes - 1] = 7;  // writable to its last byte
  huge_pages::unmap(p, bytes);
  EXPECT_EQ(mapping_of(p).first, 0u) << "unmapped whole";
  EXPECT_EQ(mapping_of(p + bytes - 1).first, 0u);
}

TEST(HugePages, HP1_TheOverMappingThatFoundTheBoundaryIsGivenBack) {
  // A run is found by mapping a huge page more than asked; what lies before the boundary and
  // after the run is unmapped at once, so a run holds its own pages' address space, no more.
  const size_t bytes = huge + 5 * huge_pages::page;
  mapped_bytes();  // whatever reading the maps maps once (its buffers) is in `before` too
  const size_t before = mapped_bytes();
  void* p = huge_pages::map(bytes, true);
  ASSERT_NE(p, nullptr);
  const size_t during = mapped_bytes();
  EXPECT_GE(during, before + bytes);
  EXPECT_LT(during, before + bytes + huge / 4) << "the over-mapping stayed";
  huge_pages::unmap(p, bytes);
  EXPECT_LT(mapped_bytes(), before + huge / 4);
}

TEST(HugePages, HP2_APieceOfARunGoesBackAloneAndTheRestStays) {
  const size_t bytes = 4 * huge;
  auto* p = static_cast<unsigned char*>(huge_pages::map(bytes, true));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, bytes);
  huge_pages::unmap(p + huge, huge + 100);  // a piece of odd length: its pages
  EXPECT_EQ(mapping_of(p + huge).first, 0u);
  EXPECT_EQ(mapping_of(p + 2 * huge + 100).first, 0u) << "the piece's last page too";
  EXPECT_NE(mapping_of(p + 2 * huge + huge_pages::page).first, 0u) << "not the page after it";
  EXPECT_EQ(p[0], 1);  // the rest is the run's, unchanged
  EXPECT_EQ(p[huge - 1], 1);
  EXPECT_EQ(p[3 * huge], 1);
  huge_pages::unmap(p, huge);
  huge_pages::unmap(p + 2 * huge + huge_pages::page, 2 * huge - huge_pages::page);
  EXPECT_EQ(mapping_of(p + 3 * huge).first, 0u);
}

TEST(HugePages, HP3_TheAllocatorMapsBigArraysAndFreesThem) {
  huge_page_allocator<uint64_t> a;
  const size_t big = huge_page_allocator_from / sizeof(uint64_t);
  uint64_t* p = a.allocate(big);
  EXPECT_EQ(address(p) % huge, 0u) << "from map()";
  p[big - 1] = 1;
  a.deallocate(p, big);
  EXPECT_EQ(mapping_of(p).first, 0u) << "back to the system at once";

  // One element less is malloc's: freed to malloc, which keeps it, or not, as it likes; what
  // matters is that deallocate frees where allocate took (a munmap of malloc's memory, or a
  // free() of a mapping, would crash here or under ASan).
  uint64_t* q = a.allocate(big - 1);
  q[big - 2] = 1;
  a.deallocate(q, big - 1);
}

TEST(HugePages, HP3_AMapOnTheAllocatorWorksAndGivesItsArrayBack) {
  using map = absl::flat_hash_map<uint64_t, uint64_t, absl::Hash<uint64_t>,
                                  std::equal_to<uint64_t>,
                                  huge_page_allocator<std::pair<const uint64_t, uint64_t>>>;
  const void* slot = nullptr;
  {
    map m;
    for (uint64_t k = 1; k <= 1'000'000; ++k) m.emplace(k, k * 3);  // ~32 MiB of slots
    for (uint64_t k = 1; k <= 1'000'000; k += 999) ASSERT_EQ(m.at(k), k * 3) << k;
    slot = &*m.find(77);
    EXPECT_EQ(mapping_of(slot).first % huge, 0u) << "its array is a run from map()";
    map().swap(m);  // what pending_set does to release
    EXPECT_EQ(mapping_of(slot).first, 0u) << "the grown array went back";
  }
}

}  // namespace
}  // namespace kvrelay
