#include "core/error.h"
#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

std::vector<Module::Param> BatchNorm2d::params() {
  return {{"weight", {c_}, Init::kOnes, 1, &gamma_, &dgamma_},
          {"bias", {c_}, Init::kZeros, 1, &beta_, &dbeta_}};
}

std::vector<Module::Buffer> BatchNorm2d::buffers() {
  return {{"running_mean", {c_}, Init::kZeros, &running_mean_},
          {"running_var", {c_}, Init::kOnes, &running_var_}};
}

const Tensor& BatchNorm2d::forward(const Tensor& x, Context& ctx) {
  COHORT_CHECK(x.ndim() == 4 && x.dim(3) == c_, "batch_norm2d expects C=", c_, ", got ",
               shape_str(x.shape()));
  auto& op = ops_[x.shape()];
  if (!op) op = ops::make_batch_norm(ctx.device, {x.dim(0), x.dim(1), x.dim(2), c_});
  op_ = op.get();
  x_ = x;
  ensure(y_, x.shape());
  if (ctx.training)
    op_->forward_train(x.f32(), gamma_.f32(), beta_.f32(), y_.f32(), running_mean_.f32(),
                       running_var_.f32());
  else
    op_->forward_infer(x.f32(), gamma_.f32(), beta_.f32(), y_.f32(), running_mean_.f32(),
                       running_var_.f32());
  if (relu_) ops::relu_forward(y_.f32(), y_.f32(), y_.numel());
  return y_;
}

const Tensor& BatchNorm2d::backward(const Tensor& dy, Context& ctx) {
  const float* g = dy.f32();
  if (relu_) {
    ensure(dy_relu_, dy.shape());
    ops::relu_backward(dy.f32(), y_.f32(), dy_relu_.f32(), dy.numel());
    g = dy_relu_.f32();
  }
  ensure(dx_, x_.shape());
  op_->backward(x_.f32(), g, gamma_.f32(), dx_.f32(), dgamma_.f32(), dbeta_.f32(),
                ctx.accumulate);
  return dx_;
}

}  // namespace cohort::nn
