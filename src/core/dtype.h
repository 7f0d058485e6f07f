// Element types: f32 for master weights and math, bf16 for storage and mixed precision.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace cohort {

enum class DType { kF32, kBF16 };

inline size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
inline const char* dtype_name(DType t) { return t == DType::kF32 ? "f32" : "bf16"; }

// bf16 is the top half of an f32; round to nearest even on conversion.
struct BF16 {
  uint16_t bits;
};

inline BF16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return BF16{uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return BF16{uint16_t(u >> 16)};
}

inline float from_bf16(BF16 b) {
  uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void f32_to_bf16(const float* src, BF16* dst, size_t n);
void bf16_to_f32(const BF16* src, float* dst, size_t n);

}  // namespace cohort
