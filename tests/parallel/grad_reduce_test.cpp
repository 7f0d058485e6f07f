// Gradients on the wire in bf16 (--grad-dtype bf16), in-process over a
// loopback peer (comm/loopback.h) that sends back what it receives: the sum
// at 2 ranks is twice the vector. bf16 halves the bytes and rounds each
// rank's contribution; f32 is exact. (The ring's blocks must be of equal
// size for the loopback to stand in for the peer: multiples of 32.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "comm/loopback.h"
#include "parallel/grad_reduce.h"

namespace cohort {
namespace {

using comm::Algorithm;
using comm::Loopback;
using comm::ReduceOp;

// 1 + 2^-10 needs 11 mantissa bits: bf16 (8) rounds it to 1.
constexpr float kValue = 1.0f + 1.0f / 1024;

struct Reduced {
  std::vector<float> grads;
  size_t sent;
};

Reduced reduce(DType wire, Algorithm algo, int64_t n, ReduceOp op = ReduceOp::kSum) {
  Loopback c;
  GradReducer r(wire, algo);
  std::vector<float> g(size_t(n), kValue);
  r.allreduce(c, g.data(), n, op);
  return {g, c.sent};
}

TEST(GradReduce, Bf16HalvesTheBytesOfTheDefaultAllreduce) {
  const int64_t n = 100000;  // past the tree's size limit, and several ring segments
  const Reduced f32 = reduce(DType::kF32, Algorithm::kAuto, n);
  const Reduced bf16 = reduce(DType::kBF16, Algorithm::kAuto, n);
  EXPECT_EQ(f32.sent, dtype_bytes(DType::kF32, n));
  EXPECT_EQ(bf16.sent, dtype_bytes(DType::kBF16, n));
  for (int64_t i : {int64_t(0), n / 2, n - 1}) {
    EXPECT_EQ(f32.grads[size_t(i)], 2 * kValue);
    EXPECT_EQ(bf16.grads[size_t(i)], 2.0f);  // each rank's kValue went as bf16 1.0
  }
}

TEST(GradReduce, Bf16RoundsUnderEveryAlgorithm) {
  // Small vectors too: kAuto would pick the tree for f32 at 2 ranks, and
  // bf16 takes the ring, the algorithm that keeps bf16 on the wire.
  for (Algorithm a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kAuto})
    for (int64_t n : {int64_t(32), int64_t(64)}) {
      const Reduced r = reduce(DType::kBF16, a, n);
      for (float v : r.grads) EXPECT_EQ(v, 2.0f) << comm::algorithm_name(a) << " n " << n;
    }
  // The tree and MPI's all-reduce widen bf16 to reduce it: f32 bytes.
  EXPECT_EQ(reduce(DType::kBF16, Algorithm::kTree, 64).sent, dtype_bytes(DType::kF32, 64));
  EXPECT_EQ(reduce(DType::kBF16, Algorithm::kAuto, 64).sent, dtype_bytes(DType::kBF16, 64));
}

TEST(GradReduce, Bf16AveragesLikeF32) {
  const Reduced r = reduce(DType::kBF16, Algorithm::kRing, 64, ReduceOp::kAverage);
  for (float v : r.grads) EXPECT_EQ(v, 1.0f);
}

}  // namespace
}  // namespace cohort
