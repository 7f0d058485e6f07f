// The layers of decoder-only transformers (GPT-2, as llm.c defines them), over
// activations {B, T, C}: token + position embedding, layer-norm, GELU, causal
// self-attention. Parameter names follow Hugging Face's GPT-2 (wte, wpe,
// h.{i}.ln_1, h.{i}.attn.c_attn, ...), so checkpoints read as its names.
#pragma once
#include <map>

#include "nn/module.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"

namespace cohort::nn {

// ids {B, T} (i32) -> wte[ids] + wpe[0..T) {B, T, C}. Parameters "wte.weight"
// {V, C} and "wpe.weight" {max_t, C}, normal(0, 0.02). The output projection
// may tie to wte and run its backward first: wte's gradient is always added to.
// Under a RowStream (ZeRO) only the batch's rows of wte are fetched and reduced.
class TokenEmbedding final : public Module {
 public:
  TokenEmbedding(int64_t vocab, int64_t max_t, int64_t c) : vocab_(vocab), max_t_(max_t), c_(c) {}
  std::string type() const override { return "embedding"; }
  Shape output_shape(const Shape& in) const override { return {in[0], in[1], c_}; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 protected:
  std::vector<Param> params() override;

 private:
  ops::EmbeddingShape shape_for(const Tensor& ids, DType dtype) const;
  int64_t vocab_, max_t_, c_;
  Tensor wte_, dwte_, wpe_, dwpe_;
  Tensor ids_, y_, dx_;
  RowStream* streamed_ = nullptr;  // the stream of the last forward
};

// Layer-norm over the last dimension (PyTorch's nn.LayerNorm(C)): weight ones, bias zeros.
class LayerNorm final : public Module {
 public:
  explicit LayerNorm(int64_t c) : c_(c) {}
  std::string type() const override { return "layer_norm"; }
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 protected:
  std::vector<Param> params() override;

 private:
  int64_t c_;
  Tensor gamma_, dgamma_, beta_, dbeta_;
  Tensor x_, y_, dx_;
  std::map<OpKey, std::unique_ptr<ops::LayerNorm>> ops_;
  ops::LayerNorm* op_ = nullptr;
};

// GELU, tanh approximation.
class Gelu final : public Module {
 public:
  std::string type() const override { return "gelu"; }
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  Tensor x_, y_, dx_;
};

// Causal multi-head self-attention on the fused projection: qkv {B, T, 3C}
// -> {B, T, C} (no parameters: c_attn and c_proj are Linear layers around it).
class CausalAttention final : public Module {
 public:
  CausalAttention(int64_t c, int64_t heads) : c_(c), heads_(heads) {}
  std::string type() const override { return "causal_attention"; }
  Shape output_shape(const Shape& in) const override { return {in[0], in[1], c_}; }
  // Per sample of T tokens: q k^T and att v, about half of each under the mask.
  double flops(const Shape& in) const override;
  // y {B, T, C} plus the op's probabilities and their gradient, {B, heads, T, T} each.
  double activation_elems(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;

 private:
  int64_t c_, heads_;
  Tensor qkv_, y_, dx_;
  std::map<OpKey, std::unique_ptr<ops::Attention>> ops_;
  ops::Attention* op_ = nullptr;
};

}  // namespace cohort::nn
