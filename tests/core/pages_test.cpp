// Lazily mapped memory (core/memory.h): untouched pages cost nothing,
// released pages leave the resident set and read as zeros, and a release
// leaves the bytes outside its range alone.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace cohort
