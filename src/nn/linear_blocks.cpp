// A Linear tied to another layer's weight (GPT-2's head, tied to wte) at
// f32: the output's columns in blocks of kTiedBlockRows weight rows, each
// block's output, weight gradient and share of dx in turn, dx the sum of
// the shares in block order. Every strategy computes it so, the same sums
// in the same order; under a RowStream (ZeRO) each block is fetched before
// its use and its gradient handed back as soon as it is written, so the
// weight and its gradient are never whole on a rank.
#include <cstring>

#include "core/error.h"
#include "nn/layers.h"

namespace cohort::nn {

namespace {

// Columns [c0, c0 + n) of `a` {rows, lda} <-> `b` {rows, n}.
void copy_columns(const float* a, int64_t lda, int64_t c0, float* b, int64_t n, int64_t rows,
                  bool into_a) {
  for (int64_t r = 0; r < rows; ++r) {
    float* wide = const_cast<float*>(a) + r * lda + c0;
    float* narrow = b + r * n;
    if (into_a)
      std::memcpy(wide, narrow, size_t(n) * sizeof(float));
    else
      std::memcpy(narrow, wide, size_t(n) * sizeof(float));
  }
}

}  // namespace

ops::Linear& Linear::block_op(int64_t rows, int64_t out, Context& ctx) {
  auto& op = ops_[{DType::kF32, {rows, out}}];
  if (!op) op = ops::make_linear(ctx.device, {rows, in_, out, DType::kF32}, false);
  return *op;
}

const Tensor& Linear::forward_blocks(Context& ctx) {
  const int64_t rows = x_.dim(0), block = kTiedBlockRows;
  Shape y_shape = x_shape_;
  y_shape.back() = out_;
  ensure(y_, y_shape);
  const float* w = weight_.f32();
  for (int64_t r0 = 0; r0 < out_; r0 += block) {
    const int64_t r1 = std::min(out_, r0 + block), n = r1 - r0;
    if (streamed_) streamed_->acquire(w, in_, r0, r1, r1, std::min(out_, r1 + block));
    ensure(block_y_, {rows, n});
    ConstView bias = options_.bias ? ConstView(b_.f32() + r0) : ConstView();
    block_op(rows, n, ctx).forward(x_, w + r0 * in_, bias, block_y_);
    if (streamed_) streamed_->release(w, in_, r0, r1);
    copy_columns(y_.f32(), out_, r0, block_y_.f32(), n, rows, true);
  }
  return y_;
}

const Tensor& Linear::backward_blocks(const Tensor& dy, Context& ctx) {
  const int64_t rows = x_.dim(0), block = kTiedBlockRows;
  const float* w = weight_.f32();
  if (needs_input_grad_) {
    ensure(dx_, x_shape_);
    dx_.zero();
  }
  for (int64_t r0 = 0; r0 < out_; r0 += block) {
    const int64_t r1 = std::min(out_, r0 + block), n = r1 - r0;
    ops::Linear& op = block_op(rows, n, ctx);
    ensure(block_y_, {rows, n});  // this block's dy
    copy_columns(dy.f32(), out_, r0, block_y_.f32(), n, rows, false);
    View dbias = options_.bias ? View(db_.f32() + r0) : View();
    op.backward_weights(x_, block_y_, dweight_.f32() + r0 * in_, dbias, ctx.accumulate);
    if (streamed_) streamed_->rows_done(dweight_.f32(), in_, r0, r1);
    if (!needs_input_grad_) continue;
    if (streamed_) streamed_->acquire(w, in_, r0, r1, r1, std::min(out_, r1 + block));
    ensure(block_dx_, x_shape_);
    op.backward_data(block_y_, w + r0 * in_, block_dx_);
    if (streamed_) streamed_->release(w, in_, r0, r1);
    float* d = dx_.f32();
    const float* part = block_dx_.f32();
    for (int64_t i = 0, e = dx_.numel(); i < e; ++i) d[i] += part[i];
  }
  return dx_;
}

}  // namespace cohort::nn
