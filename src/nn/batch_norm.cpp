#include <cmath>

#include "core/error.h"
#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

std::vector<Module::Param> BatchNorm2d::params() {
  return {{"weight", {c_}, Init::kOnes, 1, &gamma_, &dgamma_},
          {"bias", {c_}, Init::kZeros, 1, &beta_, &dbeta_}};
}

std::vector<Module::Buffer> BatchNorm2d::buffers() {
  // num_batches_tracked: PyTorch's count of training forwards, a scalar
  // (saved as int64, train/checkpoint.h), so state dicts match key for key.
  return {{"running_mean", {c_}, Init::kZeros, &running_mean_},
          {"running_var", {c_}, Init::kOnes, &running_var_},
          {"num_batches_tracked", {}, Init::kZeros, &batches_}};
}

void BatchNorm2d::affine(std::vector<float>& scale, std::vector<float>& shift) const {
  const float eps = ops::BatchNormShape{}.eps;
  scale.resize(size_t(c_));
  shift.resize(size_t(c_));
  for (int64_t k = 0; k < c_; ++k) {
    scale[size_t(k)] = gamma_.f32()[k] / std::sqrt(running_var_.f32()[k] + eps);
    shift[size_t(k)] = beta_.f32()[k] - running_mean_.f32()[k] * scale[size_t(k)];
  }
}

const Tensor& BatchNorm2d::forward(const Tensor& x, Context& ctx) {
  COHORT_CHECK(x.ndim() == 4 && x.dim(3) == c_, "batch_norm2d expects C=", c_, ", got ",
               shape_str(x.shape()));
  if (folded_) return x;  // the conv before it normalized
  auto& op = ops_[op_key(x)];
  if (!op) {
    ops::BatchNormShape s{x.dim(0), x.dim(1), x.dim(2), c_};
    s.dtype = x.dtype();
    s.relu = relu_;
    op = ops::make_batch_norm(ctx.device, s);
  }
  op_ = op.get();
  x_ = x;
  ensure(y_, x.shape(), x.dtype());
  // A frozen layer normalizes with its running statistics and leaves them be
  // (PyTorch users call .eval() on a frozen backbone).
  if (ctx.training && !frozen_) {
    op_->forward_train(x, gamma_, beta_, y_, running_mean_, running_var_);
    batches_.f32()[0] += 1.0f;
  } else {
    op_->forward_infer(x, gamma_, beta_, y_, running_mean_, running_var_);
  }
  return y_;
}

const Tensor& BatchNorm2d::backward(const Tensor& dy, Context& ctx) {
  ensure(dx_, x_.shape(), x_.dtype());
  op_->backward(x_, dy, gamma_, dx_, dgamma_, dbeta_, ctx.accumulate);  // the op masks dy
  return dx_;
}

}  // namespace cohort::nn
