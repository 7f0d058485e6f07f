// Causal multi-head self-attention of decoder-only transformers (GPT-2, as
// llm.c defines it); forward and backward side by side. Shape letters: B
// batch, T sequence, C channels, NH heads, HS = C / NH. qkv, out and their
// gradients are of the shape's dtype (f32 or bf16); the kept attention
// probabilities are f32.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

// Causal multi-head self-attention over the fused projection qkv {B, T, 3C}
// (q, k, v each {B, T, NH, HS}, in that order along the last dimension, as
// GPT-2's c_attn produces them): out {B, T, C} with, per head,
// softmax(q k^T / sqrt(HS) + causal mask) v. Built once per shape; keeps the
// attention probabilities {B, NH, T, T} (f32) for backward.
struct AttentionShape {
  int64_t b, t, c, heads;
  DType dtype = DType::kF32;
  int64_t head_size() const { return c / heads; }
  // Multiply-adds x2 of one forward (q k^T and att v, causal: about half).
  double forward_flops() const { return 2.0 * 2.0 * double(b) * t * t * c / 2.0; }
};
class Attention {
 public:
  virtual ~Attention() = default;
  virtual void forward(ConstView qkv, View out) = 0;
  // After forward on the same qkv: dqkv {B, T, 3C} (overwritten).
  virtual void backward(ConstView qkv, ConstView dout, View dqkv) = 0;
};
std::unique_ptr<Attention> make_attention(Device device, const AttentionShape& shape);

}  // namespace cohort::ops
