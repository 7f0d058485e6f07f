// The ops of decoder-only transformers (GPT-2, as llm.c defines them),
// declared once for every backend; forward and backward side by side.
// Shape letters: B batch, T sequence, C channels, NH heads, HS = C / NH,
// V vocabulary. Activations are row-major {B, T, C}; token ids are i32.
// As in every op: activations (src, dst and their gradients) in the shape's
// dtype (f32 or bf16), weights and their gradients f32 (master copies).
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

// Token + position embedding: dst[b, t, :] = wte[ids[b, t], :] + wpe[t, :].
// wte {V, C}, wpe {maxT, C}; dst {B, T, C}. Backward adds (accumulate) or
// writes dwte (rows of the tokens seen; the others zeroed when !accumulate)
// and dwpe (rows 0..T-1). An id outside [0, V) is an InputError naming it.
struct EmbeddingShape {
  int64_t b, t, c, vocab, max_t;
  DType dtype = DType::kF32;
};
void embedding_forward(const EmbeddingShape& s, const int32_t* ids, ConstView wte, ConstView wpe,
                       View dst);
void embedding_backward(const EmbeddingShape& s, const int32_t* ids, ConstView ddst, View dwte,
                        View dwpe, bool accumulate);

// Layer-norm over the last dimension C of `rows` rows, with f32 gamma/beta {C}
// (PyTorch's nn.LayerNorm, eps 1e-5). Built once per shape; keeps what
// backward needs (mean, rstd) from the last forward.
struct LayerNormShape {
  int64_t rows, c;
  float eps = 1e-5f;
  DType dtype = DType::kF32;
};
class LayerNorm {
 public:
  virtual ~LayerNorm() = default;
  virtual void forward(ConstView src, ConstView gamma, ConstView beta, View dst) = 0;
  // After forward on the same src. dgamma, dbeta: = or += (accumulate).
  virtual void backward(ConstView src, ConstView ddst, ConstView gamma, View dsrc, View dgamma,
                        View dbeta, bool accumulate) = 0;
};
std::unique_ptr<LayerNorm> make_layer_norm(Device device, const LayerNormShape& shape);

// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// dsrc = ddst * gelu'(src); dsrc may alias ddst.
void gelu_forward(ConstView src, View dst, int64_t n);
void gelu_backward(ConstView ddst, ConstView src, View dsrc, int64_t n);

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
