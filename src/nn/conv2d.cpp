#include "core/error.h"
#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

Conv2d::Conv2d(int64_t c_in, int64_t c_out, int64_t k, int64_t stride, int64_t pad, bool bias,
               bool relu)
    : c_in_(c_in), c_out_(c_out), k_(k), stride_(stride), pad_(pad), bias_(bias), relu_(relu) {}

std::vector<Module::Param> Conv2d::params() {
  const int64_t fan_in = c_in_ * k_ * k_;
  std::vector<Param> p = {{"weight", {c_out_, c_in_, k_, k_}, Init::kUniformFanIn, fan_in,
                           &weight_, &dweight_}};
  if (bias_) p.push_back({"bias", {c_out_}, Init::kUniformFanIn, fan_in, &b_, &db_});
  return p;
}

ops::ConvShape Conv2d::shape_for(const Shape& x) const {
  COHORT_CHECK(x.size() == 4 && x[3] == c_in_, "conv2d expects {N,H,W,", c_in_, "}, got ",
               shape_str(x));
  return {x[0], x[1], x[2], c_in_, c_out_, k_, k_, stride_, pad_};
}

Shape Conv2d::output_shape(const Shape& in) const {
  auto s = shape_for(in);
  return {s.n, s.out_h(), s.out_w(), c_out_};
}

double Conv2d::flops(const Shape& in) const {
  return shape_for({1, in[0], in[1], in[2]}).forward_flops();
}

const Tensor& Conv2d::forward(const Tensor& x, Context& ctx) {
  auto& op = ops_[x.shape()];
  if (!op) op = ops::make_conv2d(ctx.device, shape_for(x.shape()), relu_);
  op_ = op.get();
  x_ = x;
  ensure(y_, output_shape(x.shape()));
  op_->forward(x.f32(), weight_.f32(), bias_ ? b_.f32() : nullptr, y_.f32());
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy, Context& ctx) {
  const float* g = dy.f32();
  if (relu_) {
    ensure(dy_relu_, dy.shape());
    ops::relu_backward(dy.f32(), y_.f32(), dy_relu_.f32(), dy.numel());
    g = dy_relu_.f32();
  }
  op_->backward_weights(x_.f32(), g, dweight_.f32(), bias_ ? db_.f32() : nullptr, ctx.accumulate);
  if (needs_input_grad_) {
    ensure(dx_, x_.shape());
    op_->backward_data(g, weight_.f32(), dx_.f32());
  }
  return dx_;
}

}  // namespace cohort::nn
