// Lazily mapped memory (core/memory.h): untouched pages cost nothing,
// released pages leave the resident set and read as zeros, and a release
// leaves the bytes outside its range alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/memory.h"

namespace cohort {
namespace {

constexpr size_t kMB = 1 << 20;

TEST(Pages, UntouchedCostNothingReleasedLeaveTheResidentSet) {
  const double before = resident_mb();
  std::shared_ptr<void> mem = allocate_pages(64 * kMB);
  EXPECT_LT(resident_mb() - before, 8) << "mapping alone made pages resident";
  auto* f = static_cast<float*>(mem.get());
  std::memset(f, 1, 64 * kMB);
  const double touched = resident_mb();
  EXPECT_GT(touched - before, 56);
  release_pages(f, 48 * kMB, false);
  EXPECT_LT(resident_mb(), touched - 40) << "released pages stayed resident";
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_NE(f[48 * kMB / 4], 0.0f);  // past the range: kept
}

TEST(Pages, ZeroEdgesClearsTheRangeOnSharedPagesAndNothingElse) {
  std::shared_ptr<void> mem = allocate_pages(4 * 4096);
  auto* f = static_cast<float*>(mem.get());
  for (int i = 0; i < 4096; ++i) f[i] = 1.0f + float(i);
  // Elements [100, 3000): partial first page, whole second, partial third.
  release_pages(f + 100, (3000 - 100) * 4, true);
  for (int i = 0; i < 4096; ++i) {
    const bool inside = i >= 100 && i < 3000;
    ASSERT_EQ(f[i], inside ? 0.0f : 1.0f + float(i)) << "element " << i;
  }
}

// In a mapping of huge pages a release returns only the huge pages inside
// its range: the ones it covers in part stay whole (returning part of one
// splits it into 512 small pages that fault back one by one), their bytes
// kept, or zeroed with `zero_edges`.
TEST(Pages, InAHugeMappingOnlyWholeHugePagesGoBack) {
  std::shared_ptr<void> mem = allocate_pages(kHugePagesFrom);
  auto* f = static_cast<float*>(mem.get());
  ASSERT_EQ(release_grain(f), kHugePage);
  ASSERT_EQ(uintptr_t(f) % kHugePage, 0u) << "a mapping of huge pages starts on one";
  const size_t n = kHugePagesFrom / 4, mb = kMB / 4;
  for (size_t i = 0; i < n; ++i) f[i] = 1.0f;
  release_pages(f + mb, 6 * kMB, false);  // [1 MB, 7 MB): huge pages [2, 4) and [4, 6) go back
  for (size_t i = 0; i < 8 * mb; i += 1024) {
    const bool returned = i >= 2 * mb && i < 6 * mb;
    ASSERT_EQ(f[i], returned ? 0.0f : 1.0f) << "element " << i;
  }
  release_pages(f + 9 * mb, 3 * kMB, true);  // [9 MB, 12 MB): [10, 12) back, [9, 10) zeroed
  for (size_t i = 8 * mb; i < 13 * mb; i += 1024) {
    const bool inside = i >= 9 * mb && i < 12 * mb;
    ASSERT_EQ(f[i], inside ? 0.0f : 1.0f) << "element " << i;
  }
  std::shared_ptr<void> small = allocate_pages(kHugePagesFrom / 2);
  EXPECT_EQ(release_grain(small.get()), size_t(sysconf(_SC_PAGESIZE)));
}

TEST(Pages, AskedForHugePagesASmallMappingGetsWholeOnes) {
  // 3 MB asked with kHuge: mapped as 2 whole huge pages from a huge page's
  // start, so its last 1 MB (where a buffer filled from its end starts)
  // is on a huge page too, and releases go back in huge pages.
  const size_t bytes = 3 * kMB;
  std::shared_ptr<void> mem = allocate_pages(bytes, PageSize::kHuge);
  auto* c = static_cast<char*>(mem.get());
  EXPECT_EQ(uintptr_t(c) % kHugePage, 0u);
  EXPECT_EQ(release_grain(c), kHugePage);
  EXPECT_EQ(release_grain(c + bytes - 1), kHugePage);
  EXPECT_EQ(release_grain(c + 2 * kHugePage - 1), kHugePage) << "the rounded-up tail is the mapping's";
  for (size_t i = 0; i < bytes; ++i) c[i] = 1;
  release_pages(c, bytes, true);  // [0, 2 MB) goes back, [2 MB, 3 MB) is zeroed
  for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(c[i], 0) << "byte " << i;
}

}  // namespace
}  // namespace cohort
