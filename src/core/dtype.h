// Element types: f32 for master weights and math, bf16 and f16 for storage and
// mixed precision, i32 for labels and indices, i64 for the integers of
// PyTorch's files (batch-norm's num_batches_tracked). Sizes and names come from here
// only: byte counts anywhere else are dtype_size(dtype) * count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace cohort {

enum class DType { kF32, kBF16, kF16, kI32, kI64 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

// Bytes of n elements of t.
constexpr size_t dtype_bytes(DType t, int64_t n) { return size_t(n) * dtype_size(t); }

// bf16 is the top half of an f32; round to nearest even on conversion.
struct BF16 {
  uint16_t bits;
};

// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
struct F16 {
  uint16_t bits;
};

// The DType of an element type, for typed accessors and views.
// Undefined for other types, so a typed view of one does not compile.
template <class T>
struct DTypeOf;
// clang-format off
template <> struct DTypeOf<float> : std::integral_constant<DType, DType::kF32> {};
template <> struct DTypeOf<BF16> : std::integral_constant<DType, DType::kBF16> {};
template <> struct DTypeOf<F16> : std::integral_constant<DType, DType::kF16> {};
template <> struct DTypeOf<int32_t> : std::integral_constant<DType, DType::kI32> {};
template <> struct DTypeOf<int64_t> : std::integral_constant<DType, DType::kI64> {};
// clang-format on
template <class T>
constexpr DType dtype_of = DTypeOf<T>::value;

// Branch-free (NaN is a select), so loops over it vectorize.
inline BF16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return BF16{uint16_t(nan ? ((u >> 16) | 0x40u) : rounded)};
}

inline float from_bf16(BF16 b) {
  uint32_t u = uint32_t(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; overflow goes to infinity, tiny values to f16
// subnormals or zero, NaN stays NaN (quiet).
F16 to_f16(float f);
float from_f16(F16 h);

void f32_to_bf16(const float* src, BF16* dst, size_t n);
void bf16_to_f32(const BF16* src, float* dst, size_t n);
void f32_to_f16(const float* src, F16* dst, size_t n);
void f16_to_f32(const F16* src, float* dst, size_t n);

}  // namespace cohort
