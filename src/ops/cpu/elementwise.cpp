// Elementwise ops as plain OpenMP loops: memory-bound, so one pass each.
#include "ops/elementwise.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include "ops/cpu/dnnl_util.h"

namespace cohort::ops {

void relu_forward(const float* src, float* dst, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] = std::max(src[i], 0.0f);
}

void relu_backward(const float* ddst, const float* dst, float* dsrc, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float g = ddst[i];  // loaded unconditionally so the loop is a vector blend
    dsrc[i] = dst[i] > 0.0f ? g : 0.0f;
  }
}

void add(const float* a, const float* b, float* dst, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

void add_inplace(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void dropout_mask(float* mask, int64_t n, float p, Rng& rng) {
  const float keep = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i) mask[i] = rng.uniform() < p ? 0.0f : keep;
}

void dropout_apply(const float* src, const float* mask, float* dst, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * mask[i];
}

void dropout2d_apply(const float* src, const float* mask, float* dst, int64_t n, int64_t hw,
                     int64_t c) {
#pragma omp parallel for if (n * hw * c > 65536)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p) {
      const int64_t off = (i * hw + p) * c;
#pragma omp simd
      for (int64_t k = 0; k < c; ++k) dst[off + k] = src[off + k] * mask[i * c + k];
    }
}

// Transposes go through oneDNN's jit reorder (a plain loop with a strided
// store was 15% of an mnist-small step), one primitive per shape.
static void transpose(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w,
                      bool to_nchw) {
  static std::mutex mu;
  static std::map<std::array<int64_t, 5>, cpu::Reorder> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& r = cache[{n, c, h, w, to_nchw}];
  if (r.identity()) {
    cpu::memory::desc nhwc({n, c, h, w}, cpu::kF32, cpu::Tag::nhwc);
    cpu::memory::desc nchw({n, c, h, w}, cpu::kF32, cpu::Tag::nchw);
    r = to_nchw ? cpu::Reorder(nhwc, nchw) : cpu::Reorder(nchw, nhwc);
  }
  r(const_cast<float*>(src), dst);
}

void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t h, int64_t w, int64_t c) {
  transpose(src, dst, n, c, h, w, true);
}

void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  transpose(src, dst, n, c, h, w, false);
}

}  // namespace cohort::ops
