// The machine's measured matrix-product rate (oneDNN matmul, 2048^3) in the
// precision a run computes in: the peak that model FLOPs utilization is
// reported against.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace cohort {

// The matmul a run computing in `compute` is held against: bf16 for bf16
// (the bf16 dot products of AVX512-BF16), f32 for f32 and for
// fp16 (which computes in f32 on the CPU).
DType peak_dtype(DType compute);

// GFLOP/s of a size^3 oneDNN matmul dst = src x weights^T on the current
// thread count, validated on a sample of entries before it is timed. kF32:
// f32 src, weights and dst; kBF16: bf16 src and weights, f32 dst.
double measure_matmul_gflops(DType dtype = DType::kF32, int size = 2048, int reps = 5);

// Throws Error unless dst {n, n} = src {n, n} x weights {n, n}^T on a sample
// of 64 entries, against a double dot product of the f32 src and weights,
// within what `dtype` allows (see peak.cpp).
void check_matmul_sample(const float* src, const float* weights, const float* dst, int64_t n,
                         DType dtype);

}  // namespace cohort
