#include "core/dtype.h"

namespace cohort {

void f32_to_bf16(const float* src, BF16* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void bf16_to_f32(const BF16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = from_bf16(src[i]);
}

}  // namespace cohort
