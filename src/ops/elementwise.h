// Elementwise ops over flat buffers: ReLU, GELU, residual add, dropout, and the
// NHWC <-> NCHW transposes a flatten needs (so fc weights match PyTorch's order).
// Operands are typed views (core/tensor.h) of f32 or bf16, with f32 arithmetic
// (an Error names the op and dtype otherwise); the transposes move any dtype.
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"

namespace cohort::ops {

void relu_forward(ConstView src, View dst, int64_t n);
// dsrc = ddst * (dst > 0), from the forward output; dsrc may alias ddst.
void relu_backward(ConstView ddst, ConstView dst, View dsrc, int64_t n);

// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// dsrc = ddst * gelu'(src); dsrc may alias ddst.
void gelu_forward(ConstView src, View dst, int64_t n);
void gelu_backward(ConstView ddst, ConstView src, View dsrc, int64_t n);

void add(ConstView a, ConstView b, View dst, int64_t n);
void add_inplace(View dst, ConstView src, int64_t n);  // dst += src

// Inverted dropout. mask holds 0 or 1/(1-p) per element, or per (n, c) of an
// NHWC tensor when `channels` > 0 (Dropout2d: whole feature maps are dropped).
void dropout_mask(View mask, int64_t n, float p, Rng& rng);
void dropout_apply(ConstView src, ConstView mask, View dst, int64_t n);
void dropout2d_apply(ConstView src, ConstView mask, View dst, int64_t n, int64_t hw, int64_t c);

// Rounds each f32 of x in place to the nearest fp16 value (ties to even;
// past 65504 to +-inf, tiny values to fp16 subnormals or zero, NaN stays NaN),
// as storing it in fp16 would: fp16 emulation runs it over every activation.
// The same values as core/dtype.h's to_f16, with the CPU's conversion
// instructions (AVX-512 or F16C) where it has them.
void round_to_f16(View x, int64_t n);

void nhwc_to_nchw(ConstView src, View dst, int64_t n, int64_t h, int64_t w, int64_t c);
void nchw_to_nhwc(ConstView src, View dst, int64_t n, int64_t c, int64_t h, int64_t w);

}  // namespace cohort::ops
