#include "nn/transformer.h"

#include <cmath>

#include "core/error.h"

namespace cohort::nn {

// ------------------------------------------------------------------ embedding

std::vector<Module::Param> TokenEmbedding::params() {
  Param wte{"wte.weight", {vocab_, c_}, Init::kNormal, c_, &wte_, &dwte_};
  Param wpe{"wpe.weight", {max_t_, c_}, Init::kNormal, c_, &wpe_, &dwpe_};
  wte.std = wpe.std = 0.02f;
  return {wte, wpe};
}

ops::EmbeddingShape TokenEmbedding::shape_for(const Tensor& ids, DType dtype) const {
  COHORT_CHECK(ids.ndim() == 2 && ids.dtype() == DType::kI32,
               "embedding expects i32 token ids {B, T}, got ", dtype_name(ids.dtype()), " ",
               shape_str(ids.shape()));
  COHORT_INPUT_CHECK(ids.dim(1) <= max_t_, "a sequence of ", ids.dim(1),
                     " tokens exceeds the model's context of ", max_t_);
  return {ids.dim(0), ids.dim(1), c_, vocab_, max_t_, dtype};
}

const Tensor& TokenEmbedding::forward(const Tensor& x, Context& ctx) {
  const DType dtype = activation_dtype(ctx.precision);
  const auto s = shape_for(x, dtype);
  ids_ = x;
  ensure(y_, {s.b, s.t, c_}, dtype);
  // A streamed wte (ZeRO): only this batch's rows are read, so only they are fetched.
  streamed_ = ctx.rows && ctx.rows->streams(wte_.f32()) ? ctx.rows : nullptr;
  if (streamed_) streamed_->acquire_ids(c_, x.i32(), x.numel());
  ops::embedding_forward(s, x.i32(), wte_, wpe_, y_);
  if (streamed_) streamed_->release_ids();
  return y_;
}

const Tensor& TokenEmbedding::backward(const Tensor& dy, Context& ctx) {
  const auto s = shape_for(ids_, dy.dtype());
  // wte may be tied to the output projection, whose backward ran first and
  // wrote its share: add to it. wpe is this layer's alone.
  if (!ctx.accumulate) dwpe_.zero();
  ops::embedding_backward(s, ids_.i32(), dy, dwte_, dwpe_, true);
  if (streamed_) streamed_->ids_done(c_, ids_.i32(), ids_.numel());
  return dx_;  // no input gradient: the input is token ids (dx_ stays empty)
}

// ------------------------------------------------------------------ layer-norm

std::vector<Module::Param> LayerNorm::params() {
  return {{"weight", {c_}, Init::kOnes, 1, &gamma_, &dgamma_},
          {"bias", {c_}, Init::kZeros, 1, &beta_, &dbeta_}};
}

const Tensor& LayerNorm::forward(const Tensor& x, Context& ctx) {
  COHORT_CHECK(x.ndim() >= 1 && x.dim(-1) == c_, "layer_norm expects {..., ", c_, "}, got ",
               shape_str(x.shape()));
  const int64_t rows = x.numel() / c_;
  auto& op = ops_[{x.dtype(), {rows}}];
  if (!op) op = ops::make_layer_norm(ctx.device, {rows, c_, 1e-5f, x.dtype()});
  op_ = op.get();
  x_ = x;
  ensure(y_, x.shape(), x.dtype());
  op_->forward(x, gamma_, beta_, y_);
  return y_;
}

const Tensor& LayerNorm::backward(const Tensor& dy, Context& ctx) {
  ensure(dx_, x_.shape(), x_.dtype());
  op_->backward(x_, dy, gamma_, dx_, dgamma_, dbeta_, ctx.accumulate);
  return dx_;
}

// ------------------------------------------------------------------ GELU

const Tensor& Gelu::forward(const Tensor& x, Context&) {
  x_ = x;
  ensure(y_, x.shape(), x.dtype());
  ops::gelu_forward(x, y_, x.numel());
  return y_;
}

const Tensor& Gelu::backward(const Tensor& dy, Context&) {
  ensure(dx_, dy.shape(), dy.dtype());
  ops::gelu_backward(dy, x_, dx_, dy.numel());
  return dx_;
}

// ------------------------------------------------------------------ attention

double CausalAttention::flops(const Shape& in) const {
  const ops::AttentionShape s{1, in[0], c_, heads_};
  return s.forward_flops();
}

double CausalAttention::activation_elems(const Shape& in) const {
  return double(numel(output_shape(in))) + 2.0 * double(in[0] * heads_) * double(in[1] * in[1]);
}

const Tensor& CausalAttention::forward(const Tensor& x, Context& ctx) {
  COHORT_CHECK(x.ndim() == 3 && x.dim(2) == 3 * c_, "attention expects qkv {B, T, ", 3 * c_,
               "}, got ", shape_str(x.shape()));
  auto& op = ops_[op_key(x)];
  if (!op) op = ops::make_attention(ctx.device, {x.dim(0), x.dim(1), c_, heads_, x.dtype()});
  op_ = op.get();
  qkv_ = x;
  ensure(y_, output_shape(x.shape()), x.dtype());
  op_->forward(x, y_);
  return y_;
}

const Tensor& CausalAttention::backward(const Tensor& dy, Context&) {
  ensure(dx_, qkv_.shape(), qkv_.dtype());
  op_->backward(qkv_, dy, dx_);
  return dx_;
}

}  // namespace cohort::nn
