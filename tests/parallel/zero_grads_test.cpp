// The bf16 gradient shard of ZeRO with --grad-dtype bf16 (parallel/zero_grads.h):
// a step's first add to an element writes it, later ones add in f32 and
// round, elements nothing was added to since clear() widen as zeros, and
// -0 reads as +0 (as adding it to a zero would).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "parallel/zero_grads.h"

namespace cohort {
namespace {

TEST(Bf16GradShard, FirstAddWritesLaterAddsSumAndUnwrittenReadsZero) {
  const ShardLayout layout(100, 2);  // rank 1's shard: elements [b, e)
  const auto [b, e] = layout.shard(1);
  const int64_t n = e - b;
  Bf16GradShard g(layout, 1);
  std::vector<BF16> ones(100, to_bf16(1.5f)), neg_zero(100, to_bf16(-0.0f));
  std::vector<float> quarter(100, 0.25f);
  // Three steps, so later steps' first adds overwrite what earlier ones left.
  for (int step = 0; step < 3; ++step) {
    g.add(ones.data() + b + 2, b + 2, b + 10);     // [2, 10): 1.5
    g.add(quarter.data() + b + 5, b + 5, b + 20);  // [5, 10): 1.75, [10, 20): 0.25
    g.add(neg_zero.data(), 0, b + 30);             // reaches [0, 30) of the shard: -0 added
    g.add(ones.data() + e - 3, e - 3, e);          // the last 3: 1.5
    std::vector<float> out(size_t(n), -7.0f);
    g.widen(0, n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      float want = 0.0f;
      if (i >= 2 && i < 5) want = 1.5f;
      if (i >= 5 && i < 10) want = 1.75f;
      if (i >= 10 && i < 20) want = 0.25f;
      if (i >= n - 3) want = 1.5f;
      EXPECT_EQ(out[size_t(i)], want) << "step " << step << " element " << i;
      EXPECT_FALSE(std::signbit(out[size_t(i)])) << "step " << step << " element " << i;
    }
    // A piece starting inside a written range and ending in a gap.
    std::vector<float> piece(20, -7.0f);
    g.widen(15, 20, piece.data());
    for (int i = 0; i < 20; ++i) EXPECT_EQ(piece[size_t(i)], i < 5 ? 0.25f : 0.0f) << i;
    g.clear();
    std::vector<float> cleared(size_t(n), -7.0f);
    g.widen(0, n, cleared.data());
    for (float v : cleared) EXPECT_EQ(v, 0.0f);
  }
}

}  // namespace
}  // namespace cohort
