#include "core/error.h"
#include "nn/layers.h"

namespace cohort::nn {

Linear::Linear(int64_t in, int64_t out, bool relu, LinearOptions options)
    : in_(in), out_(out), relu_(relu), options_(std::move(options)) {}

std::vector<Module::Param> Linear::params() {
  const bool normal = options_.init_std > 0;
  Param w{"weight", {out_, in_}, normal ? Init::kNormal : Init::kUniformFanIn, in_,
          &weight_, &dweight_};
  w.std = options_.init_std;
  w.tied_to = options_.tied_to;
  std::vector<Param> p = {w};
  if (options_.bias)
    p.push_back({"bias", {out_}, normal ? Init::kZeros : Init::kUniformFanIn, in_, &b_, &db_});
  return p;
}

Shape Linear::output_shape(const Shape& in) const {
  COHORT_CHECK(!in.empty() && in.back() == in_, "linear expects {...,", in_, "}, got ",
               shape_str(in));
  Shape out = in;
  out.back() = out_;
  return out;
}

// {B, T, I} runs as {B*T, I}: the rows are contiguous either way.
const Tensor& Linear::forward(const Tensor& x, Context& ctx) {
  const Shape y_shape = output_shape(x.shape());
  const int64_t rows = x.numel() / in_;
  x_shape_ = x.shape();
  x_ = x.reshape({rows, in_});
  blocks_ = !options_.tied_to.empty() && !relu_;
  streamed_ = blocks_ && ctx.rows && ctx.rows->streams(weight_.f32()) ? ctx.rows : nullptr;
  if (blocks_) return forward_blocks(ctx);
  auto& op = ops_[{x.dtype(), {rows}}];
  if (!op) op = ops::make_linear(ctx.device, {rows, in_, out_, x.dtype()}, relu_);
  op_ = op.get();
  ensure(y_, y_shape, x.dtype());
  op_->forward(x_, weight_, b_, y_);
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy, Context& ctx) {
  if (blocks_) return backward_blocks(dy, ctx);
  const Tensor& g = fused_relu_grad(dy, y_, relu_, dy_relu_);
  op_->backward_weights(x_, g, dweight_, db_, ctx.accumulate);
  if (needs_input_grad_) {
    ensure(dx_, x_shape_, x_.dtype());
    op_->backward_data(g, weight_, dx_);
  }
  return dx_;
}

}  // namespace cohort::nn
