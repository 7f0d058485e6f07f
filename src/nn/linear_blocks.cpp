// A Linear tied to another layer's weight (GPT-2's head, tied to wte), at
// f32 or bf16: the output's columns in blocks of kTiedBlockRows weight rows, each
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

// `rows` rows of `n` elements of `bytes` each from `src` (rows `src_ld`
// elements apart) to `dst` (rows `dst_ld` apart): a block's columns out of
// the whole output, or in.
void copy_rows(const void* src, int64_t src_ld, void* dst, int64_t dst_ld, int64_t rows,
               int64_t n, size_t bytes) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + size_t(r * dst_ld) * bytes,
                static_cast<const char*>(src) + size_t(r * src_ld) * bytes, size_t(n) * bytes);
}

// acc (f32) += share (f32 or bf16), n elements.
void add_share(float* acc, const Tensor& share, int64_t n) {
  if (share.dtype() == DType::kF32) {
    ops::add_inplace(acc, share.f32(), n);
    return;
  }
  const BF16* s = share.bf16();
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) acc[i] += from_bf16(s[i]);
}

}  // namespace

ops::Linear& Linear::block_op(int64_t rows, int64_t out, Context& ctx) {
  auto& op = ops_[{x_.dtype(), {rows, out}}];
  if (!op) op = ops::make_linear(ctx.device, {rows, in_, out, x_.dtype()}, false);
  return *op;
}

const Tensor& Linear::forward_blocks(Context& ctx) {
  const int64_t rows = x_.dim(0), block = kTiedBlockRows;
  const DType dt = x_.dtype();
  const size_t bytes = dtype_size(dt);
  Shape y_shape = x_shape_;
  y_shape.back() = out_;
  ensure(y_, y_shape, dt);
  const float* w = weight_.f32();
  for (int64_t r0 = 0; r0 < out_; r0 += block) {
    const int64_t r1 = std::min(out_, r0 + block), n = r1 - r0;
    if (streamed_) streamed_->acquire(in_, r0, r1, r1, std::min(out_, r1 + block));
    ensure(block_y_, {rows, n}, dt);
    ConstView bias = options_.bias ? ConstView(b_.f32() + r0) : ConstView();
    block_op(rows, n, ctx).forward(x_, w + r0 * in_, bias, block_y_);
    if (streamed_) streamed_->release(in_, r0, r1);
    copy_rows(block_y_.data(), n, static_cast<char*>(y_.data()) + size_t(r0) * bytes, out_, rows,
              n, bytes);
  }
  return y_;
}

// dx is the sum of the blocks' shares in block order, added up in f32 (at
// bf16: then rounded once).
const Tensor& Linear::backward_blocks(const Tensor& dy, Context& ctx) {
  const int64_t rows = x_.dim(0), block = kTiedBlockRows;
  const DType dt = x_.dtype();
  const size_t bytes = dtype_size(dt);
  const float* w = weight_.f32();
  Tensor& acc = dt == DType::kF32 ? dx_ : dx_sum_;
  if (needs_input_grad_) {
    ensure(acc, x_shape_);
    acc.zero();
  }
  for (int64_t r0 = 0; r0 < out_; r0 += block) {
    const int64_t r1 = std::min(out_, r0 + block), n = r1 - r0;
    ops::Linear& op = block_op(rows, n, ctx);
    ensure(block_y_, {rows, n}, dt);  // this block's dy
    copy_rows(static_cast<const char*>(dy.data()) + size_t(r0) * bytes, out_, block_y_.data(), n,
              rows, n, bytes);
    View dbias = options_.bias ? View(db_.f32() + r0) : View();
    op.backward_weights(x_, block_y_, dweight_.f32() + r0 * in_, dbias, ctx.accumulate);
    if (streamed_) streamed_->rows_done(in_, r0, r1);
    if (!needs_input_grad_) continue;
    if (streamed_) streamed_->acquire(in_, r0, r1, r1, std::min(out_, r1 + block));
    ensure(block_dx_, x_shape_, dt);
    op.backward_data(block_y_, w + r0 * in_, block_dx_);
    if (streamed_) streamed_->release(in_, r0, r1);
    add_share(acc.f32(), block_dx_, acc.numel());
  }
  if (needs_input_grad_ && dt != DType::kF32) {
    ensure(dx_, x_shape_, dt);
    f32_to_bf16(acc.f32(), dx_.bf16(), size_t(acc.numel()));
  }
  return dx_;
}

}  // namespace cohort::nn
