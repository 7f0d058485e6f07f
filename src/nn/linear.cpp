#include "core/error.h"
#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

Linear::Linear(int64_t in, int64_t out, bool relu) : in_(in), out_(out), relu_(relu) {}

std::vector<Module::Param> Linear::params() {
  return {{"weight", {out_, in_}, Init::kUniformFanIn, in_, &weight_, &dweight_},
          {"bias", {out_}, Init::kUniformFanIn, in_, &b_, &db_}};
}

const Tensor& Linear::forward(const Tensor& x, Context& ctx) {
  COHORT_CHECK(x.ndim() == 2 && x.dim(1) == in_, "linear expects {N,", in_, "}, got ",
               shape_str(x.shape()));
  auto& op = ops_[x.dim(0)];
  if (!op) op = ops::make_linear(ctx.device, {x.dim(0), in_, out_}, relu_);
  op_ = op.get();
  x_ = x;
  ensure(y_, {x.dim(0), out_});
  op_->forward(x.f32(), weight_.f32(), b_.f32(), y_.f32());
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy, Context& ctx) {
  const float* g = dy.f32();
  if (relu_) {
    ensure(dy_relu_, dy.shape());
    ops::relu_backward(dy.f32(), y_.f32(), dy_relu_.f32(), dy.numel());
    g = dy_relu_.f32();
  }
  op_->backward_weights(x_.f32(), g, dweight_.f32(), db_.f32(), ctx.accumulate);
  if (needs_input_grad_) {
    ensure(dx_, x_.shape());
    op_->backward_data(g, weight_.f32(), dx_.f32());
  }
  return dx_;
}

}  // namespace cohort::nn
