// Reference implementations of every op, for the op harness (ops_test.cpp).
// Plain loops, written to be obviously correct rather than fast: every sum is
// accumulated in double, layouts are indexed explicitly (activations NHWC,
// conv weights OIHW, linear weights {O, I}), and nothing is fused except what
// the op under test fuses itself (the optional ReLU of conv and linear).
#pragma once
#include <cstdint>
#include <vector>

#include "ops/attention.h"
#include "ops/batch_norm.h"
#include "ops/conv2d.h"
#include "ops/embedding.h"
#include "ops/layer_norm.h"
#include "ops/linear.h"
#include "ops/pool.h"

namespace cohort::ref {

// ---- conv2d: x {N,H,W,Ci}, w {Co,Ci,KH,KW}, b {Co} (may be null), y {N,OH,OW,Co}
void conv2d_forward(const ops::ConvShape& s, bool relu, const float* x, const float* w,
                    const float* b, float* y);
// dx = d(sum dy * conv(x, w)) / dx  (dy is the gradient *after* any ReLU backward)
void conv2d_backward_data(const ops::ConvShape& s, const float* dy, const float* w, float* dx);
// dw, and db if non-null, overwritten.
void conv2d_backward_weights(const ops::ConvShape& s, const float* x, const float* dy, float* dw,
                             float* db);

// ---- linear: x {N,I}, w {O,I}, b {O} (may be null), y {N,O}
void linear_forward(const ops::LinearShape& s, bool relu, const float* x, const float* w,
                    const float* b, float* y);
void linear_backward_data(const ops::LinearShape& s, const float* dy, const float* w, float* dx);
void linear_backward_weights(const ops::LinearShape& s, const float* x, const float* dy, float* dw,
                             float* db);

// ---- max-pool k x k, stride s, no padding. The argmax of a window is its first
// maximum in row-major (kh, kw) order; backward recomputes it from x.
void max_pool_forward(const ops::PoolShape& s, const float* x, float* y);
void max_pool_backward(const ops::PoolShape& s, const float* x, const float* dy, float* dx);

// ---- global average pool {N,H,W,C} -> {N,C}
void global_avg_pool_forward(const float* x, float* y, int64_t n, int64_t hw, int64_t c);
void global_avg_pool_backward(const float* dy, float* dx, int64_t n, int64_t hw, int64_t c);
void adaptive_avg_pool_forward(const ops::AdaptivePoolShape& s, const float* x, float* y);
void adaptive_avg_pool_backward(const ops::AdaptivePoolShape& s, const float* dy, float* dx);

// ---- batch-norm over NHWC, per channel.
struct BnStats {
  std::vector<double> mean, var;  // batch mean and *biased* batch variance
};
BnStats batch_norm_stats(const ops::BatchNormShape& s, const float* x);
// Training forward: normalizes with the batch statistics.
void batch_norm_train_forward(const ops::BatchNormShape& s, const float* x, const float* gamma,
                              const float* beta, float* y);
// PyTorch's running update: r = (1 - m) r + m stat, with the unbiased variance.
void batch_norm_running_update(const ops::BatchNormShape& s, const float* x, float* running_mean,
                               float* running_var);
void batch_norm_infer_forward(const ops::BatchNormShape& s, const float* x, const float* gamma,
                              const float* beta, const float* running_mean,
                              const float* running_var, float* y);
// Backward of the training forward (batch statistics depend on x).
void batch_norm_backward(const ops::BatchNormShape& s, const float* x, const float* dy,
                         const float* gamma, float* dx, float* dgamma, float* dbeta);

// ---- elementwise
void relu_forward(const float* x, float* y, int64_t n);
void relu_backward(const float* dy, const float* y, float* dx, int64_t n);
void add(const float* a, const float* b, float* y, int64_t n);
void dropout_apply(const float* x, const float* mask, float* y, int64_t n);
// mask {N, C} broadcast over the hw positions of x {N, hw, C}.
void dropout2d_apply(const float* x, const float* mask, float* y, int64_t n, int64_t hw,
                     int64_t c);
void nhwc_to_nchw(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t c);
void nchw_to_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t h, int64_t w);

// ---- transformer ops (GPT-2's, as llm.c writes them)
// embedding: y {B,T,C} = wte[ids] + wpe[t]; backward overwrites dwte {V,C}
// (zero for unseen tokens) and dwpe's first T rows.
void embedding_forward(const ops::EmbeddingShape& s, const int32_t* ids, const float* wte,
                       const float* wpe, float* y);
void embedding_backward(const ops::EmbeddingShape& s, const int32_t* ids, const float* dy,
                        float* dwte, float* dwpe);
// layer-norm over rows of C, biased variance, y = gamma * xhat + beta.
void layer_norm_forward(const ops::LayerNormShape& s, const float* x, const float* gamma,
                        const float* beta, float* y);
void layer_norm_backward(const ops::LayerNormShape& s, const float* x, const float* dy,
                         const float* gamma, float* dx, float* dgamma, float* dbeta);
// GELU, tanh approximation.
void gelu_forward(const float* x, float* y, int64_t n);
void gelu_backward(const float* dy, const float* x, float* dx, int64_t n);
// Causal self-attention over qkv {B,T,3C} -> out {B,T,C}; dqkv overwritten.
void attention_forward(const ops::AttentionShape& s, const float* qkv, float* out);
void attention_backward(const ops::AttentionShape& s, const float* qkv, const float* dout,
                        float* dqkv);

// ---- softmax cross-entropy over logits {N,K}; dlogits (if non-null) is the
// gradient of grad_scale * loss_sum.
struct LossRef {
  double loss_sum = 0;
  int64_t correct = 0;
};
LossRef softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t n, int64_t k,
                              float* dlogits, float grad_scale);

// ---- comparison helpers
// max |a - b| / max(1, max |b|): the harness's relative error.
double rel_error(const float* a, const float* b, int64_t n);
double max_abs(const float* a, int64_t n);

}  // namespace cohort::ref
