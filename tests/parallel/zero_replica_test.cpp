// Bf16Replica (parallel/zero_replica.h) in one process: what it widens into
// the arena outside a rank's shard. Its refresh is collective; the ZeRO
// equality tests at bf16 (zero_test.cpp) cover it against dp.
#include <gtest/gtest.h>

#include <cmath>

#include "core/arena.h"
#include "parallel/zero_replica.h"

namespace cohort {

// Matrices and vectors interleaved, cut over 3 ranks (blocks of 48 elements,
// rounded up to 16), seen from rank 1 (block 2: the last, [106, 126)) and
// with a frozen prefix of 10 elements: every element outside the shard and
// the prefix reads as its weight rounded to bf16 (a matrix's) or exactly
// (a vector's); the shard and the prefix are not written.
TEST(Bf16Replica, WidensMatricesRoundedAndVectorsExactOutsideTheShard) {
  Arena arena;
  Tensor w1, dw1, b1, db1, w2, dw2, g, dg;
  arena.add("a.weight", {6, 5}, &w1, &dw1);   // [0, 30)
  arena.add("a.bias", {6}, &b1, &db1);        // [30, 36)
  arena.add("b.weight", {9, 9}, &w2, &dw2);   // [36, 117)
  arena.add("ln.weight", {9}, &g, &dg);       // [117, 126)
  arena.allocate();
  const int64_t n = arena.size();
  ASSERT_EQ(n, 126);
  float* w = arena.params().f32();
  for (int64_t i = 0; i < n; ++i) w[i] = 1.0f + float(i) * 1.0009765625f / 3.0f;
  for (int64_t i = 10; i < n; ++i)  // so rounding shows
    ASSERT_NE(w[i], from_bf16(to_bf16(w[i]))) << "element " << i << " is a bf16 value";
  const ShardLayout layout(n, 3, 10);
  const auto [sb, se] = layout.shard(1);
  ASSERT_EQ(sb, 106);
  ASSERT_EQ(se, 126);
  Bf16Replica replica(arena, layout, 1);
  replica.build(w);
  std::vector<float> out(size_t(n), -7.0f);
  replica.expand(out.data(), 0, n);
  const auto is_vector = [](int64_t i) { return (i >= 30 && i < 36) || i >= 117; };
  int widened = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i < 10 || (i >= sb && i < se)) {
      EXPECT_EQ(out[size_t(i)], -7.0f) << "element " << i << " is the shard's or the prefix's";
      continue;
    }
    const float want = is_vector(i) ? w[i] : from_bf16(to_bf16(w[i]));
    EXPECT_EQ(out[size_t(i)], want) << "element " << i;
    ++widened;
  }
  EXPECT_EQ(widened, n - 10 - (se - sb));
  // A range inside one vector, one across a matrix's end into a vector, and
  // one across the shard's start.
  std::vector<float> part(size_t(n), -7.0f);
  replica.expand(part.data(), 34, 35);
  replica.expand(part.data(), 25, 33);
  replica.expand(part.data(), 100, 110);
  for (int64_t i = 0; i < n; ++i) {
    const bool in = (i >= 25 && i < 35 && i != 33) || (i >= 100 && i < 106);
    EXPECT_EQ(part[size_t(i)], in ? out[size_t(i)] : -7.0f) << "element " << i;
  }
  // Every element but the shard's at 2 bytes, the vectors at 4.
  EXPECT_EQ(replica.bytes(), (n - (se - sb)) * 2 + (6 + 9) * 4);
}

}  // namespace cohort
