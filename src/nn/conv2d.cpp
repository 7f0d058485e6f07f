#include <utility>

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
  // A frozen conv's weights are constants: each op lays them out (reorders
  // them into its blocked format) once, not every step. The layout is kept
  // while the weights stay at the same address; set_frozen starts afresh.
  const bool fresh =
      !frozen_ || std::exchange(laid_out_[op_], weight_.data()) != weight_.data();
  if (folded_) {
    const ConstView w = folded_weights();
    op_->forward(x, fresh ? w : nullptr, folded_b_.data(), y_);
  } else {
    op_->forward(x, fresh ? ConstView(weight_) : nullptr, b_, y_);  // b_: null without bias
  }
  return y_;
}

void Conv2d::set_frozen(bool v) {
  Module::set_frozen(v);
  laid_out_.clear();
  COHORT_CHECK(v || !folded_, "conv2d: a folded batch-norm cannot be unfrozen");
}

void Conv2d::fold(BatchNorm2d& norm) {
  COHORT_CHECK(frozen_ && norm.frozen() && !relu_, "conv2d: folds a frozen batch-norm only");
  folded_ = &norm;
  relu_ = norm.relu();
  ops_.clear();  // their ReLU changed
  laid_out_.clear();
  norm.set_folded();
}

// w'[o] = w[o] * scale[o], b'[o] = b[o] * scale[o] + shift[o], made again
// only when the weights move.
ConstView Conv2d::folded_weights() {
  if (folded_from_ == weight_.data()) return folded_w_.data();
  std::vector<float> scale, shift;
  folded_->affine(scale, shift);
  const float* w = weight_.f32();
  const int64_t per = c_in_ * k_ * k_;
  folded_w_.resize(size_t(c_out_ * per));
  folded_b_.resize(size_t(c_out_));
  for (int64_t o = 0; o < c_out_; ++o) {
    for (int64_t j = 0; j < per; ++j) folded_w_[size_t(o * per + j)] = w[o * per + j] * scale[size_t(o)];
    const float b = bias_ ? b_.f32()[o] : 0.0f;
    folded_b_[size_t(o)] = b * scale[size_t(o)] + shift[size_t(o)];
  }
  folded_from_ = weight_.data();
  return folded_w_.data();
}

const Tensor& Conv2d::backward(const Tensor& dy, Context& ctx) {
  COHORT_CHECK(!folded_, "conv2d: a frozen conv has no backward");
  const Tensor& g = fused_relu_grad(dy, y_, relu_, dy_relu_);
  op_->backward_weights(x_, g, dweight_, db_, ctx.accumulate);
  if (needs_input_grad_) {
    ensure(dx_, x_.shape(), x_.dtype());
    op_->backward_data(g, weight_, dx_);
  }
  return dx_;
}

}  // namespace cohort::nn
