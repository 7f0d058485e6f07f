#include "core/dtype.h"

namespace cohort {

F16 to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or NaN
    return F16{uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  if (abs >= 0x477ff000u) return F16{uint16_t(sign | 0x7c00u)};  // rounds past 65504
  if (abs < 0x38800000u) {
    // Below the smallest normal (2^-14): a subnormal, mantissa = |f| / 2^-24.
    if (abs < 0x33000000u) return F16{sign};  // under half the smallest subnormal
    // value = mant24 * 2^(e - 150) and a subnormal is q * 2^-24, so q = mant24 >> (126 - e).
    const int drop = 126 - int(abs >> 23);  // 14 .. 24
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t q = mant >> drop;
    const uint32_t rest = mant & ((1u << drop) - 1), mid = 1u << (drop - 1);
    if (rest > mid || (rest == mid && (q & 1u))) ++q;
    return F16{uint16_t(sign | q)};
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa to 10 bits;
  // a carry out of the mantissa bumps the exponent, as it should.
  uint32_t v = abs - 0x38000000u;
  v += 0xfffu + ((v >> 13) & 1u);
  return F16{uint16_t(sign | (v >> 13))};
}

float from_f16(F16 h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu, mant = h.bits & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    float f = float(mant) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Whole buffers, threaded past 64k elements (a bf16 model converts weights
// and logits every step: fc1 of mnist-large is 2.4M weights a forward).
void f32_to_bf16(const float* src, BF16* dst, size_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void bf16_to_f32(const BF16* src, float* dst, size_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = uint32_t(src[i].bits) << 16;
    std::memcpy(dst + i, &u, 4);
  }
}

void f32_to_f16(const float* src, F16* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = to_f16(src[i]);
}

void f16_to_f32(const F16* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = from_f16(src[i]);
}

}  // namespace cohort
