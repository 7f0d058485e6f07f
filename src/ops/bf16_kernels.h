// Where the bf16 ops' arithmetic runs on this machine, for the reports: in
// oneDNN's bf16 kernels (true: CPUs with AVX-512), or in f32 kernels over
// bf16 storage, the operands converted on the way (false: oneDNN 2.6 has no
// bf16 kernel on AVX2-only CPUs; ops/cpu/bf16_fallback.cpp).
#pragma once

namespace cohort::ops {

bool bf16_kernels_native();

}  // namespace cohort::ops
