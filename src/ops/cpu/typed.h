// Element access for the plain-loop ops at any float dtype: they read and
// write f32 or bf16 storage and compute in f32 (load/store convert), and
// dispatch once per call on the operands' dtype.
#pragma once
#include <type_traits>

#include "core/error.h"
#include "core/tensor.h"

namespace cohort::ops::cpu {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const BF16* p, int64_t i) { return from_bf16(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(BF16* p, int64_t i, float v) { p[i] = to_bf16(v); }
// v as a T holds it: rounded to bf16 for BF16, itself for float.
template <class T>
inline float rounded(float v) {
  if constexpr (std::is_same_v<T, BF16>) return from_bf16(to_bf16(v));
  return v;
}

// Calls f(T{}) with T the element type of `dtype` (float or BF16); an Error
// naming the op otherwise.
template <class F>
void dispatch_float(const char* op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kBF16: return f(BF16{});
    default:
      throw Error(detail::concat(op, ": dtype ", dtype_name(dtype),
                                 " is not supported by the CPU ops (f32 and bf16 only)"));
  }
}

}  // namespace cohort::ops::cpu
