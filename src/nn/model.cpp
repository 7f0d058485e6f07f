#include "nn/model.h"

#include "ops/elementwise.h"

namespace cohort::nn {

Model::Model(std::shared_ptr<const ModelSpec> spec)
    : spec_(std::move(spec)), layers_(spec_->layers()),
      loss_(spec_->loss ? spec_->loss() : std::make_unique<SoftmaxCrossEntropy>()) {
  // The first layer's input is data: nobody needs its gradient.
  if (layers_->size()) layers_->child(0).set_needs_input_grad(false);
}

void Model::build(uint64_t seed) {
  ParamRegistry reg{&params_, &buffers_};
  layers_->register_params(reg, "");
  params_.allocate();
  buffers_.allocate();
  Rng rng(seed);
  layers_->init_params(rng, spec_->init);
}

void Model::build_shared(Model& owner) {
  ParamRegistry reg{&params_, &buffers_};
  layers_->register_params(reg, "");
  params_.share(owner.params_);
  buffers_.share(owner.buffers_);
}

std::unique_ptr<Model> Model::clone(uint64_t seed) const { return build_model(spec_, seed); }

std::unique_ptr<Model> Model::view() {
  auto m = std::make_unique<Model>(spec_);
  m->build_shared(*this);
  return m;
}


const Tensor& cast_input(const Tensor& x, DType precision, Tensor& scratch) {
  if (x.dtype() != DType::kF32 || precision == DType::kF32) return x;
  ensure(scratch, x.shape(), activation_dtype(precision));
  if (precision == DType::kBF16) {
    f32_to_bf16(x.f32(), scratch.bf16(), size_t(x.numel()));
  } else {
    scratch.copy_from(x);
    ops::round_to_f16(scratch, scratch.numel());
  }
  return scratch;
}

std::unique_ptr<Model> build_model(std::shared_ptr<const ModelSpec> spec, uint64_t seed) {
  auto m = std::make_unique<Model>(std::move(spec));
  m->build(seed);
  return m;
}

}  // namespace cohort::nn
