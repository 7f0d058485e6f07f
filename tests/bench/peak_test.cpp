// The matmul peak of bench step --peak: the bf16 matmul (bf16 src and
// weights, f32 dst) passes its check against the f32 reference and is timed;
// the check refuses a wrong result; each precision gets its own peak.
#include "bench/peak.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "support/support.h"

namespace cohort {
namespace {

using testing_support::error_of;

TEST(MatmulPeak, Bf16ChecksOutAgainstF32AndIsTimed) {
  // 256^3: milliseconds, and the same validation as the 2048^3 run.
  EXPECT_GT(measure_matmul_gflops(DType::kBF16, 256, 1), 0);
  EXPECT_GT(measure_matmul_gflops(DType::kF32, 256, 1), 0);
}

// dst {n, n} = src x weights^T in double, from inputs rounded to bf16: what
// a correct bf16 kernel computes, up to f32 accumulation.
std::vector<float> bf16_product(const std::vector<float>& a, const std::vector<float>& b,
                                int64_t n) {
  std::vector<float> c(size_t(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k)
        s += double(from_bf16(to_bf16(a[size_t(i * n + k)]))) *
             from_bf16(to_bf16(b[size_t(j * n + k)]));
      c[size_t(i * n + j)] = float(s);
    }
  return c;
}

TEST(MatmulPeak, CheckAcceptsBf16RoundingAndRefusesWrongResults) {
  const int64_t n = 128;
  std::vector<float> a(size_t(n * n)), b(size_t(n * n));
  Rng rng(3);
  for (auto& v : a) v = rng.uniform(-1, 1);
  for (auto& v : b) v = rng.uniform(-1, 1);
  std::vector<float> c = bf16_product(a, b, n);
  EXPECT_EQ(error_of([&] { check_matmul_sample(a.data(), b.data(), c.data(), n, DType::kBF16); }),
            "(no error)");

  std::vector<float> zeros(c.size(), 0.0f);
  EXPECT_NE(error_of([&] {
              check_matmul_sample(a.data(), b.data(), zeros.data(), n, DType::kBF16);
            }).find("bf16 matmul peak: wrong result"),
            std::string::npos);
  // The transpose (weights read the wrong way round) is as wrong.
  std::vector<float> t(c.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) t[size_t(i * n + j)] = c[size_t(j * n + i)];
  EXPECT_NE(error_of([&] { check_matmul_sample(a.data(), b.data(), t.data(), n, DType::kBF16); }),
            "(no error)");
}

TEST(MatmulPeak, EachPrecisionHasItsPeak) {
  EXPECT_EQ(peak_dtype(DType::kF32), DType::kF32);
  EXPECT_EQ(peak_dtype(DType::kBF16), DType::kBF16);
  EXPECT_EQ(peak_dtype(DType::kF16), DType::kF32);  // fp16 computes in f32 on the CPU
  EXPECT_NE(error_of([] { measure_matmul_gflops(DType::kF16, 64, 1); }), "(no error)");
}

}  // namespace
}  // namespace cohort
