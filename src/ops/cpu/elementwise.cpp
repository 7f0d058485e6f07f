// Elementwise ops as plain OpenMP loops: memory-bound, so one pass each.
#include "ops/elementwise.h"

namespace cohort::ops {

void relu_forward(const float* src, float* dst, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
}

void relu_backward(const float* ddst, const float* dst, float* dsrc, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dsrc[i] = dst[i] > 0.0f ? ddst[i] : 0.0f;
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

void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t h, int64_t w, int64_t c) {
  const int64_t hw = h * w;
#pragma omp parallel for if (n * hw * c > 65536)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k) dst[(i * c + k) * hw + p] = src[(i * hw + p) * c + k];
}

void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  const int64_t hw = h * w;
#pragma omp parallel for if (n * hw * c > 65536)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k) dst[(i * hw + p) * c + k] = src[(i * c + k) * hw + p];
}

}  // namespace cohort::ops
