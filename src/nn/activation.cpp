// ReLU, dropout and flatten: the layers without parameters.
#include "core/error.h"
#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

const Tensor& ReLU::forward(const Tensor& x, Context&) {
  ensure(y_, x.shape(), x.dtype());
  ops::relu_forward(x, y_, x.numel());
  return y_;
}

const Tensor& ReLU::backward(const Tensor& dy, Context&) {
  if (!needs_input_grad_) return dx_;
  ensure(dx_, dy.shape(), dy.dtype());
  ops::relu_backward(dy, y_, dx_, dy.numel());
  return dx_;
}

const Tensor& Dropout::forward(const Tensor& x, Context& ctx) {
  active_ = ctx.training && !frozen_ && p_ > 0;  // a frozen layer runs as in eval
  if (!active_) return x;
  COHORT_CHECK(ctx.rng, "dropout needs an RNG in training");
  shape_ = x.shape();
  const int64_t c = x.dim(-1), n = x.dim(0);
  ensure(mask_, channels_ ? Shape{n, c} : x.shape());  // f32 at any precision
  ops::dropout_mask(mask_, mask_.numel(), p_, *ctx.rng);
  ensure(y_, x.shape(), x.dtype());
  if (channels_)
    ops::dropout2d_apply(x, mask_, y_, n, x.numel() / (n * c), c);
  else
    ops::dropout_apply(x, mask_, y_, x.numel());
  return y_;
}

const Tensor& Dropout::backward(const Tensor& dy, Context&) {
  if (!active_) return dy;
  ensure(dx_, dy.shape(), dy.dtype());
  const int64_t c = shape_.back(), n = shape_[0];
  if (channels_)
    ops::dropout2d_apply(dy, mask_, dx_, n, dy.numel() / (n * c), c);
  else
    ops::dropout_apply(dy, mask_, dx_, dy.numel());
  return dx_;
}

const Tensor& Flatten::forward(const Tensor& x, Context&) {
  COHORT_CHECK(x.ndim() == 4, "flatten expects NHWC, got ", shape_str(x.shape()));
  in_shape_ = x.shape();
  if (x.dim(1) == 1 && x.dim(2) == 1) {  // (C,H,W) order == (H,W,C) order
    y_ = x.reshape(output_shape(x.shape()));
    return y_;
  }
  ensure(y_, output_shape(x.shape()), x.dtype());
  ops::nhwc_to_nchw(x, y_, x.dim(0), x.dim(1), x.dim(2), x.dim(3));
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dy, Context&) {
  if (in_shape_[1] == 1 && in_shape_[2] == 1) {
    dx_ = dy.reshape(in_shape_);
    return dx_;
  }
  ensure(dx_, in_shape_, dy.dtype());
  ops::nchw_to_nhwc(dy, dx_, in_shape_[0], in_shape_[3], in_shape_[1], in_shape_[2]);
  return dx_;
}

}  // namespace cohort::nn
