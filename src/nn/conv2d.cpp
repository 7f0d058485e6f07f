#include "core/error.h"
#include "nn/layers.h"

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

ops::ConvShape Conv2d::shape_for(const Shape& x, DType dtype) const {
  COHORT_CHECK(x.size() == 4 && x[3] == c_in_, "conv2d expects {N,H,W,", c_in_, "}, got ",
               shape_str(x));
  return {x[0], x[1], x[2], c_in_, c_out_, k_, k_, stride_, pad_, dtype};
}

Shape Conv2d::output_shape(const Shape& in) const {
  auto s = shape_for(in);
  return {s.n, s.out_h(), s.out_w(), c_out_};
}

double Conv2d::flops(const Shape& in) const {
  return shape_for({1, in[0], in[1], in[2]}).forward_flops();
}

const Tensor& Conv2d::forward(const Tensor& x, Context& ctx) {
  auto& op = ops_[op_key(x)];
  if (!op) op = ops::make_conv2d(ctx.device, shape_for(x.shape(), x.dtype()), relu_);
  op_ = op.get();
  x_ = x;
  ensure(y_, output_shape(x.shape()), x.dtype());
  op_->forward(x, weight_, b_, y_);  // b_ is unbound (a null view) without bias
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy, Context& ctx) {
  const Tensor& g = fused_relu_grad(dy, y_, relu_, dy_relu_);
  op_->backward_weights(x_, g, dweight_, db_, ctx.accumulate);
  if (needs_input_grad_) {
    ensure(dx_, x_.shape(), x_.dtype());
    op_->backward_data(g, weight_, dx_);
  }
  return dx_;
}

}  // namespace cohort::nn
