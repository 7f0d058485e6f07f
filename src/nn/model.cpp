#include "nn/model.h"

namespace cohort::nn {

Model::Model(std::string name, Shape input, int num_classes, std::unique_ptr<Sequential> layers,
             InitStyle init)
    : name_(std::move(name)), input_(std::move(input)), num_classes_(num_classes), init_(init),
      layers_(std::move(layers)) {
  // The first layer's input is data: nobody needs its gradient.
  if (layers_->size()) layers_->child(0).set_needs_input_grad(false);
}

void Model::build(uint64_t seed) {
  ParamRegistry reg{&params_, &buffers_};
  layers_->register_params(reg, "");
  params_.allocate();
  buffers_.allocate();
  Rng rng(seed);
  layers_->init_params(rng, init_);
}

void Model::build_shared(Model& owner) {
  ParamRegistry reg{&params_, &buffers_};
  layers_->register_params(reg, "");
  params_.share(owner.params_);
  buffers_.share(owner.buffers_);
}

}  // namespace cohort::nn
