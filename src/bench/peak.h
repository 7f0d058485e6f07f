// The machine's measured fp32 matrix-product rate (oneDNN matmul, 2048^3),
// the peak that model FLOPs utilization is reported against.
#pragma once

namespace cohort {

// GFLOP/s of a validated 2048x2048x2048 f32 matmul on the current thread count.
double measure_matmul_gflops(int size = 2048, int reps = 5);

}  // namespace cohort
