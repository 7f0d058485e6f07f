// Gradient clipping by global L2 norm (torch.nn.utils.clip_grad_norm_).
#pragma once
#include <cstdint>

namespace cohort {

// Returns the L2 norm of grads[0, n) before clipping; if it exceeds max_norm
// (> 0), scales the gradients by max_norm / (norm + 1e-6). A non-finite norm
// is returned without touching the gradients, so the caller can skip the step
// instead of turning every gradient into NaN.
float clip_grad_norm(float* grads, int64_t n, float max_norm);

// The pieces, for a gradient split across ranks (ZeRO): sum the local squares,
// all-reduce them, then apply clip_scale(sqrt(total), max_norm) locally.
double sum_squares(const float* x, int64_t n);
float clip_scale(double norm, float max_norm);  // 1 when no clipping is needed
void scale_inplace(float* x, int64_t n, float factor);

}  // namespace cohort
