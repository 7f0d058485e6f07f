#include "nn/module.h"

#include <cmath>

#include "ops/elementwise.h"

namespace cohort::nn {

void Module::register_params(ParamRegistry& reg, const std::string& prefix) {
  param_begin_ = reg.params->size();
  buffer_begin_ = reg.buffers->size();
  for (auto& p : params()) {
    if (p.tied_to.empty())
      reg.params->add(prefix + p.name, p.shape, p.value, p.grad);
    else
      reg.params->tie(prefix + p.name, p.tied_to, p.shape, p.value, p.grad);
  }
  for (auto& b : buffers()) reg.buffers->add(prefix + b.name, b.shape, b.value, nullptr);
  param_end_ = reg.params->size();
  buffer_end_ = reg.buffers->size();
}

static void apply_init(const Tensor& t, Init init, int64_t fan_in, float std, InitStyle style,
                       Rng& rng) {
  if (init == Init::kOnes) return t.fill(1.0f);
  if (init == Init::kZeros) return t.fill(0.0f);
  if (init == Init::kNormal) return init_normal(t, std, rng);
  if (style == InitStyle::kKeras) {
    if (t.ndim() == 1) return t.fill(0.0f);  // bias
    // glorot_uniform: U(+-sqrt(6 / (fan_in + fan_out))), fan_out = O * KH * KW.
    const int64_t fan_out = t.numel() / t.dim(1);
    const float bound = std::sqrt(6.0f / float(fan_in + fan_out));
    float* p = t.f32();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = rng.uniform(-bound, bound);
    return;
  }
  // PyTorch's default for conv and linear: kaiming_uniform(a=sqrt(5)) for the
  // weight and the same bound for the bias, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  const float bound = 1.0f / std::sqrt(float(fan_in));
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = rng.uniform(-bound, bound);
}

void Module::init_params(Rng& rng, InitStyle style) {
  for (auto& p : params())  // a tied parameter's values are its owner's, set by the owner
    if (p.tied_to.empty()) apply_init(*p.value, p.init, p.fan_in, p.std, style, rng);
  for (auto& b : buffers()) apply_init(*b.value, b.init, 1, 0, style, rng);
}

void init_normal(const Tensor& t, float std, Rng& rng) {
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = std * rng.normal();
}

DType activation_dtype(DType precision) {
  return precision == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

void ensure(Tensor& t, const Shape& shape, DType dtype) {
  if (t.data() && t.dtype() == dtype && t.shape() == shape) return;
  if (t.data() && t.dtype() == dtype && t.numel() == cohort::numel(shape)) {
    t = t.reshape(shape);
    return;
  }
  t = Tensor::empty(shape, dtype);
}

const Tensor& fused_relu_grad(const Tensor& dy, const Tensor& y, bool relu, Tensor& scratch) {
  if (!relu) return dy;
  ensure(scratch, dy.shape(), dy.dtype());
  ops::relu_backward(dy, y, scratch, dy.numel());
  return scratch;
}

}  // namespace cohort::nn
