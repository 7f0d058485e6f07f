// Gradient clipping. The norm is accumulated in double: a sum of millions of
// f32 squares loses the small terms otherwise.
#include "optim/clip.h"

#include <cmath>

#include "core/error.h"

namespace cohort {

constexpr int64_t kParallelThreshold = 1 << 16;

double sum_squares(const float* x, int64_t n) {
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) if (n >= kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  return sum;
}

float clip_scale(double norm, float max_norm) {
  COHORT_CHECK(max_norm > 0.0f, "clip max norm ", max_norm);
  if (!std::isfinite(norm) || norm <= double(max_norm)) return 1.0f;
  return float(double(max_norm) / (norm + 1e-6));
}

void scale_inplace(float* x, int64_t n, float factor) {
#pragma omp parallel for simd if (n >= kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

float clip_grad_norm(float* grads, int64_t n, float max_norm) {
  double norm = std::sqrt(sum_squares(grads, n));
  float scale = clip_scale(norm, max_norm);
  if (scale != 1.0f) scale_inplace(grads, n, scale);
  return float(norm);
}

}  // namespace cohort
