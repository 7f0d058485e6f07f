// Byte counts of the collectives come from the dtype. A loopback
// communicator (comm/loopback.h) records what goes on the wire, in-process
// and without MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/communicator.h"
#include "comm/loopback.h"
#include "support/support.h"

namespace cohort::comm {
namespace {

using testing_support::error_of;

TEST(CommBytes, RingAllreduceSendsTheVectorOnceAtTwoRanks) {
  // 2(P-1)/P of the vector per rank: at P = 2, n elements' worth of bytes.
  const int64_t n = 1000;
  for (DType t : {DType::kF32, DType::kBF16}) {
    Loopback c;
    Tensor v = Tensor::zeros({n}, t);
    c.allreduce(v, n, ReduceOp::kSum, Algorithm::kRing);
    EXPECT_EQ(c.sent, dtype_bytes(t, n)) << dtype_name(t);
    EXPECT_EQ(c.received, dtype_bytes(t, n)) << dtype_name(t);
  }
  Loopback c;
  Tensor v = Tensor::zeros({n});
  c.allreduce(v, n, ReduceOp::kSum, Algorithm::kTree);
  EXPECT_EQ(c.sent, dtype_bytes(DType::kF32, n));
}

TEST(CommBytes, AllgatherMovesAnyDtype) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32}) {
    Loopback c;
    Tensor mine = Tensor::empty({3}, t), all = Tensor::zeros({6}, t);
    std::memset(mine.data(), 0x5a, mine.nbytes());
    c.allgather(mine, all, 3);
    EXPECT_EQ(c.sent, dtype_bytes(t, 3)) << dtype_name(t);
    // Block 0 is this rank's; block 1 came back from the loopback peer.
    EXPECT_EQ(std::memcmp(all.data(), mine.data(), mine.nbytes()), 0);
    EXPECT_EQ(std::memcmp(static_cast<char*>(all.data()) + mine.nbytes(), mine.data(),
                          mine.nbytes()),
              0);
  }
  Loopback c;
  Tensor a = Tensor::zeros({3}), b = Tensor::zeros({6}, DType::kBF16);
  EXPECT_EQ(error_of([&] { c.allgather(a, b, 3); }), "allgather: dst is bf16, expected f32");
}

TEST(CommBytes, ReductionsNameAnUnsupportedDtype) {
  Loopback c;
  Tensor h = Tensor::zeros({4}, DType::kF16), i = Tensor::zeros({4}, DType::kI32);
  EXPECT_EQ(error_of([&] { c.allreduce(h, 4, ReduceOp::kSum); }),
            "allreduce: dtype f16 is not supported (reductions are built for f32 and bf16)");
  EXPECT_EQ(error_of([&] { c.allreduce(i, 4, ReduceOp::kSum); }),
            "allreduce: dtype i32 is not supported (reductions are built for f32 and bf16)");
  Tensor src = Tensor::zeros({8}, DType::kBF16), dst = Tensor::zeros({4}, DType::kBF16);
  EXPECT_EQ(error_of([&] { c.reduce_scatter(src, dst, 4, ReduceOp::kSum); }),
            "reduce_scatter: dtype bf16 is not supported (f32 only)");
  EXPECT_EQ(c.sent, 0u);  // refused before anything went out
}

TEST(CommBytes, AutoChoosesByBytesNotElements) {
  // On 3 ranks the ring takes over above 256 KiB: 100000 elements are 400 KB
  // in f32 but 200 KB in bf16.
  const int64_t n = 100000;
  EXPECT_EQ(choose_algorithm(dtype_bytes(DType::kF32, n), 3), Algorithm::kRing);
  EXPECT_EQ(choose_algorithm(dtype_bytes(DType::kBF16, n), 3), Algorithm::kTree);
}

}  // namespace
}  // namespace cohort::comm
