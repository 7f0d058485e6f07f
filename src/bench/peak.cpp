#include "bench/peak.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "ops/cpu/dnnl_util.h"

namespace cohort {
namespace {

using ops::cpu::memory;
using ops::cpu::Tag;

// dst {N, N} f32 = src {N, N} x weights^T, src and weights in one dtype; the
// weights {N, N} row-major are read as their transpose {K, N} through the
// `ba` layout, as ops/cpu/linear.cpp reads a linear layer's weight.
class Matmul {
 public:
  Matmul(DType dtype, int64_t n) {
    const auto in = ops::cpu::dnnl_type(dtype);
    src_md_ = memory::desc({n, n}, in, Tag::ab);
    w_md_ = memory::desc({n, n}, in, Tag::ba);
    dst_md_ = memory::desc({n, n}, memory::data_type::f32, Tag::ab);
    try {
      const auto k = [](const memory::desc& m) { return ops::cpu::kernel_md(m); };
      prim_ = dnnl::matmul(dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(k(src_md_), k(w_md_), dst_md_), ops::cpu::engine()));
    } catch (const dnnl::error& e) {
      throw Error(detail::concat(__FILE__, ":", __LINE__, ": oneDNN has no ", dtype_name(dtype),
                                 " matmul on this CPU: ", e.what()));
    }
  }

  void operator()(const void* src, const void* weights, float* dst) {
    ops::cpu::run(prim_, {{DNNL_ARG_SRC, ops::cpu::mem(src_md_, src)},
                          {DNNL_ARG_WEIGHTS, ops::cpu::mem(w_md_, weights)},
                          {DNNL_ARG_DST, ops::cpu::mem(dst_md_, dst)}});
  }

 private:
  memory::desc src_md_, w_md_, dst_md_;
  dnnl::primitive prim_;
};

}  // namespace

DType peak_dtype(DType compute) { return compute == DType::kBF16 ? DType::kBF16 : DType::kF32; }

// Tolerance per entry: rel * sum_k |src_ik * weights_jk|. f32: the f32
// accumulation of n = 2048 terms (n * 2^-24 is 1.2e-4 at worst). bf16: each
// input is rounded to 8 significant bits (relative error <= 2^-9), so each
// product is off by <= ~2^-8 of itself; 2^-7 leaves room for the f32
// accumulation. A wrong kernel misses by about |dst| itself, which is several
// times the bf16 bound for most of the 64 entries sampled.
void check_matmul_sample(const float* src, const float* weights, const float* dst, int64_t n,
                         DType dtype) {
  const double rel = dtype == DType::kBF16 ? 1.0 / 128 : 2e-4;
  for (int64_t t = 0; t < 64; ++t) {
    const int64_t i = (t * 977 + 13) % n, j = (t * 1231 + 7) % n;
    double ref = 0, mag = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double p = double(src[i * n + k]) * weights[j * n + k];
      ref += p;
      mag += std::fabs(p);
    }
    const double got = dst[i * n + j];
    COHORT_CHECK(std::isfinite(got) && std::fabs(got - ref) <= rel * mag + 1e-6, dtype_name(dtype),
                 " matmul peak: wrong result at (", i, ", ", j, "): ", got, ", f32 reference ", ref,
                 " (tolerance ", rel * mag, "); not timing it");
  }
}

double measure_matmul_gflops(DType dtype, int size, int reps) {
  COHORT_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, "matmul peak: f32 or bf16 only, not ",
               dtype_name(dtype));
  const int64_t n = size;
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  Rng rng(1);
  for (auto& v : a) v = rng.uniform(-1, 1);
  for (auto& v : b) v = rng.uniform(-1, 1);
  std::vector<BF16> a16, b16;
  const void* src = a.data();
  const void* weights = b.data();
  if (dtype == DType::kBF16) {
    a16.resize(a.size());
    b16.resize(b.size());
    f32_to_bf16(a.data(), a16.data(), a.size());
    f32_to_bf16(b.data(), b16.data(), b.size());
    src = a16.data();
    weights = b16.data();
  }
  Matmul matmul(dtype, n);
  matmul(src, weights, c.data());
  check_matmul_sample(a.data(), b.data(), c.data(), n, dtype);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    matmul(src, weights, c.data());
    best = std::min(best, t.seconds());
  }
  return 2.0 * n * n * n / best / 1e9;
}

}  // namespace cohort
