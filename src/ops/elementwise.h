// Elementwise ops over flat f32 buffers: ReLU, residual add, dropout, and the
// NHWC <-> NCHW transposes a flatten needs (so fc weights match PyTorch's order).
#pragma once
#include <cstdint>

#include "core/rng.h"

namespace cohort::ops {

void relu_forward(const float* src, float* dst, int64_t n);
// dsrc = ddst * (dst > 0), from the forward output; dsrc may alias ddst.
void relu_backward(const float* ddst, const float* dst, float* dsrc, int64_t n);

void add(const float* a, const float* b, float* dst, int64_t n);
void add_inplace(float* dst, const float* src, int64_t n);  // dst += src

// Inverted dropout. mask holds 0 or 1/(1-p) per element, or per (n, c) of an
// NHWC tensor when `channels` > 0 (Dropout2d: whole feature maps are dropped).
void dropout_mask(float* mask, int64_t n, float p, Rng& rng);
void dropout_apply(const float* src, const float* mask, float* dst, int64_t n);
void dropout2d_apply(const float* src, const float* mask, float* dst, int64_t n, int64_t hw,
                     int64_t c);

void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t h, int64_t w, int64_t c);
void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w);

}  // namespace cohort::ops
