// Gradient clipping by global norm.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "optim/clip.h"

namespace cohort {
namespace {

TEST(Clip, ScalesToMaxNorm) {
  std::vector<float> g = {3.0f, 4.0f};  // norm 5
  float norm = clip_grad_norm(g.data(), 2, 1.0f);
  EXPECT_FLOAT_EQ(norm, 5.0f);
  const double scale = 1.0 / (5.0 + 1e-6);
  EXPECT_FLOAT_EQ(g[0], float(3.0 * scale));
  EXPECT_FLOAT_EQ(g[1], float(4.0 * scale));
  EXPECT_NEAR(std::hypot(g[0], g[1]), 1.0, 1e-6);
}

TEST(Clip, LeavesSmallGradientsAlone) {
  std::vector<float> g = {0.3f, -0.4f};
  EXPECT_FLOAT_EQ(clip_grad_norm(g.data(), 2, 1.0f), 0.5f);
  EXPECT_EQ(g[0], 0.3f);
  EXPECT_EQ(g[1], -0.4f);
}

TEST(Clip, LargeBufferNormAccumulatedInDouble) {
  // 2^20 + 1 elements: large enough for the parallel path. One big element
  // plus many small ones whose squares an f32 running sum would drop.
  const int64_t n = (1 << 20) + 1;
  std::vector<float> g(n, 1e-3f);
  g[0] = 1000.0f;
  double expected = std::sqrt(1e6 + double(n - 1) * double(1e-3f) * double(1e-3f));
  float norm = clip_grad_norm(g.data(), n, 2000.0f);
  EXPECT_NEAR(norm, expected, 1e-6 * expected);
  EXPECT_EQ(g[0], 1000.0f);  // under max_norm: untouched
  norm = clip_grad_norm(g.data(), n, 10.0f);
  EXPECT_NEAR(std::sqrt(sum_squares(g.data(), n)), 10.0, 1e-4);
}

TEST(Clip, NonFiniteNormIsReportedNotApplied) {
  std::vector<float> g = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(std::isinf(clip_grad_norm(g.data(), 2, 1.0f)));
  EXPECT_EQ(g[0], 1.0f);
  g[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(clip_grad_norm(g.data(), 2, 1.0f)));
  EXPECT_EQ(g[0], 1.0f);
}

TEST(Clip, ShardedPiecesMatchWholeBuffer) {
  std::vector<float> whole = {1, 2, 3, 4, 5, 6}, shards = whole;
  clip_grad_norm(whole.data(), 6, 2.0f);
  double total = sum_squares(shards.data(), 3) + sum_squares(shards.data() + 3, 3);
  float scale = clip_scale(std::sqrt(total), 2.0f);
  scale_inplace(shards.data(), 3, scale);
  scale_inplace(shards.data() + 3, 3, scale);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(shards[i], whole[i]);
  EXPECT_EQ(clip_scale(1.0, 2.0f), 1.0f);
}

}  // namespace
}  // namespace cohort
