// Model: a named Sequential of top-level layers (the units a pipeline cuts
// into stages, DESIGN principle 3) with its parameter and buffer arenas.
#pragma once
#include "nn/sequential.h"

namespace cohort::nn {

class Model {
 public:
  // input: per-image shape {H, W, C}.
  Model(std::string name, Shape input, int num_classes, std::unique_ptr<Sequential> layers,
        InitStyle init = InitStyle::kTorch);

  // Registers, allocates and initializes every parameter from `seed`.
  void build(uint64_t seed);
  // Registers every parameter and buffer as views into `owner`'s arenas (a
  // model of the same layers): the same weights, gradients and statistics,
  // with this model's own activations. Pipeline micro-batches in flight each
  // run on one.
  void build_shared(Model& owner);

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_; }
  int num_classes() const { return num_classes_; }
  Sequential& layers() { return *layers_; }
  Arena& params() { return params_; }
  Arena& buffers() { return buffers_; }
  int64_t num_params() const { return params_.size(); }
  // Forward multiply-adds x2 per image; a training step costs about 3x this.
  double forward_flops_per_image() const { return layers_->flops(input_); }

  // x: {N, H, W, C} -> logits {N, classes}
  const Tensor& forward(const Tensor& x, Context& ctx) { return layers_->forward(x, ctx); }
  void backward(const Tensor& dlogits, Context& ctx) { layers_->backward(dlogits, ctx); }

 private:
  std::string name_;
  Shape input_;
  int num_classes_;
  InitStyle init_;
  std::unique_ptr<Sequential> layers_;
  Arena params_, buffers_;
};

}  // namespace cohort::nn
