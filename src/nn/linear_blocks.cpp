// A Linear tied to another layer's weight (GPT-2's head, tied to wte) at
// f32: the output's columns in blocks of kTiedBlockRows weight rows, each
// block's output, weight gradient and share of dx in turn, dx the sum of
// the shares in block order. Every strategy computes it so, the same sums
// in the same order; under a RowStream (ZeRO) each block is fetched before
// its use and its gradient handed back as soon as it is written, so the
// weight and its gradient are never whole on a rank.
#include <cstring>

#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

namespace {

// `rows` rows of `n` floats from `src` (rows `src_ld` apart) to `dst`
// (rows `dst_ld` apart): a block's columns out of the whole output, or in.
void copy_rows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
               int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_ld, src + r * src_ld, size_t(n) * sizeof(float));
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
    if (streamed_) streamed_->acquire(in_, r0, r1, r1, std::min(out_, r1 + block));
    ensure(block_y_, {rows, n});
    ConstView bias = options_.bias ? ConstView(b_.f32() + r0) : ConstView();
    block_op(rows, n, ctx).forward(x_, w + r0 * in_, bias, block_y_);
    if (streamed_) streamed_->release(in_, r0, r1);
    copy_rows(block_y_.f32(), n, y_.f32() + r0, out_, rows, n);
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
    copy_rows(dy.f32() + r0, out_, block_y_.f32(), n, rows, n);
    View dbias = options_.bias ? View(db_.f32() + r0) : View();
    op.backward_weights(x_, block_y_, dweight_.f32() + r0 * in_, dbias, ctx.accumulate);
    if (streamed_) streamed_->rows_done(in_, r0, r1);
    if (!needs_input_grad_) continue;
    if (streamed_) streamed_->acquire(in_, r0, r1, r1, std::min(out_, r1 + block));
    ensure(block_dx_, x_shape_);
    op.backward_data(block_y_, w + r0 * in_, block_dx_);
    if (streamed_) streamed_->release(in_, r0, r1);
    ops::add_inplace(dx_, block_dx_, dx_.numel());
  }
  return dx_;
}

}  // namespace cohort::nn
