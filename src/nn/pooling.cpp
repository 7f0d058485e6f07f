#include "core/error.h"
#include "nn/layers.h"

namespace cohort::nn {

ops::PoolShape MaxPool2d::shape_for(const Shape& x, DType dtype) const {
  return {x[0], x[1], x[2], x[3], k_, stride_, dtype, pad_};
}

Shape MaxPool2d::output_shape(const Shape& in) const {
  const ops::PoolShape s = shape_for(in);
  return {in[0], s.out_h(), s.out_w(), in[3]};
}

const Tensor& MaxPool2d::forward(const Tensor& x, Context& ctx) {
  COHORT_CHECK(x.ndim() == 4 && x.dim(1) + 2 * pad_ >= k_ && x.dim(2) + 2 * pad_ >= k_,
               "max_pool2d input ", shape_str(x.shape()));
  auto& op = ops_[op_key(x)];
  if (!op) op = ops::make_max_pool2d(ctx.device, shape_for(x.shape(), x.dtype()));
  op_ = op.get();
  ensure(y_, output_shape(x.shape()), x.dtype());
  ensure(dx_, x.shape(), x.dtype());
  op_->forward(x, y_);
  return y_;
}

const Tensor& MaxPool2d::backward(const Tensor& dy, Context&) {
  if (needs_input_grad_) op_->backward(dy, dx_);
  return dx_;
}

const Tensor& GlobalAvgPool::forward(const Tensor& x, Context&) {
  in_shape_ = x.shape();
  ensure(y_, output_shape(x.shape()), x.dtype());
  ops::global_avg_pool_forward(x, y_, x.dim(0), x.dim(1) * x.dim(2), x.dim(3));
  return y_;
}

const Tensor& GlobalAvgPool::backward(const Tensor& dy, Context&) {
  if (!needs_input_grad_) return dx_;
  ensure(dx_, in_shape_, dy.dtype());
  ops::global_avg_pool_backward(dy, dx_, in_shape_[0], in_shape_[1] * in_shape_[2], in_shape_[3]);
  return dx_;
}

ops::AdaptivePoolShape AdaptiveAvgPool2d::shape_for(const Shape& x) const {
  return {x[0], x[1], x[2], x[3], out_h_, out_w_};
}

const Tensor& AdaptiveAvgPool2d::forward(const Tensor& x, Context&) {
  COHORT_CHECK(x.ndim() == 4, "adaptive_avg_pool2d input ", shape_str(x.shape()));
  in_shape_ = x.shape();
  ensure(y_, output_shape(x.shape()), x.dtype());
  ops::adaptive_avg_pool_forward(x, y_, shape_for(in_shape_));
  return y_;
}

const Tensor& AdaptiveAvgPool2d::backward(const Tensor& dy, Context&) {
  if (!needs_input_grad_) return dx_;
  ensure(dx_, in_shape_, dy.dtype());
  ops::adaptive_avg_pool_backward(dy, dx_, shape_for(in_shape_));
  return dx_;
}

}  // namespace cohort::nn
