// Sequential container and the ResNet residual blocks built from it.
#pragma once
#include "nn/layers.h"

namespace cohort::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  std::string type() const override { return "sequential"; }
  // `name` is the parameter prefix of the child ("conv1", "layer1.0").
  Sequential& add(const std::string& name, std::unique_ptr<Module> m);
  template <typename M, typename... Args>
  Sequential& add(const std::string& name, Args&&... args) {
    return add(name, std::make_unique<M>(std::forward<Args>(args)...));
  }
  void register_params(ParamRegistry& reg, const std::string& prefix) override;
  void init_params(Rng& rng, InitStyle style) override;
  Shape output_shape(const Shape& in) const override;
  double flops(const Shape& in) const override;
  double activation_elems(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  // Announces each child's gradient range through ctx.grad_ready as it
  // completes; stops at the first frozen child (all before it are frozen).
  const Tensor& backward(const Tensor& dy, Context& ctx) override;
  void collect_leaves(std::vector<const Module*>& out) const override;
  // The first child receives the input.
  void set_needs_input_grad(bool v) override;
  void set_frozen(bool v) override;
  void fold_frozen_norms() override;

  size_t size() const { return children_.size(); }
  Module& child(size_t i) { return *children_[i].second; }
  const std::string& child_name(size_t i) const { return children_[i].first; }
  // Runs children [begin, end) only: the pieces a pipeline stage runs.
  const Tensor& forward_range(size_t begin, size_t end, const Tensor& x, Context& ctx);
  const Tensor& backward_range(size_t begin, size_t end, const Tensor& dy, Context& ctx);
  // A model's top level: each child's forward and backward become timeline
  // spans named "forward <child>" and "backward <child>" (core/timeline.h).
  void trace_children();

 private:
  // The ranges' loops with a timeline span around each child (timeline on).
  const Tensor& forward_traced(size_t begin, size_t end, const Tensor& x, Context& ctx);
  const Tensor& backward_traced(size_t begin, size_t end, const Tensor& dy, Context& ctx);
  const Tensor& forward_child(size_t i, const Tensor& x, Context& ctx);
  const Tensor& backward_child(size_t i, const Tensor& dy, Context& ctx);

  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  // Interned span names per child, {forward, backward}; empty unless traced.
  std::vector<std::pair<const char*, const char*>> trace_names_;
};

// What follows a residual sum: ReLU (ResNet) or nothing (pre-norm transformers).
enum class PostActivation { kReLU, kNone };

// out = post(branch(x) + shortcut(x)); the shortcut is identity (null) or
// conv1x1+BN.
class Residual final : public Module {
 public:
  Residual(std::unique_ptr<Sequential> branch, std::unique_ptr<Sequential> shortcut,
           PostActivation post = PostActivation::kReLU);
  std::string type() const override { return "residual"; }
  void register_params(ParamRegistry& reg, const std::string& prefix) override;
  void init_params(Rng& rng, InitStyle style) override;
  Shape output_shape(const Shape& in) const override { return branch_->output_shape(in); }
  double flops(const Shape& in) const override;
  double activation_elems(const Shape& in) const override;
  const Tensor& forward(const Tensor& x, Context& ctx) override;
  const Tensor& backward(const Tensor& dy, Context& ctx) override;
  void collect_leaves(std::vector<const Module*>& out) const override;
  // Both paths receive the input; without it the sum of their dx is skipped.
  void set_needs_input_grad(bool v) override;
  void set_frozen(bool v) override;
  void fold_frozen_norms() override;

 private:
  std::unique_ptr<Sequential> branch_, shortcut_;  // shortcut_ may be null (identity)
  bool relu_;
  Tensor x_, y_, dsum_, dx_;
};

// ResNet blocks (torchvision naming: conv1, bn1, ..., downsample.0/.1).
std::unique_ptr<Module> basic_block(int64_t c_in, int64_t c_out, int64_t stride);
std::unique_ptr<Module> bottleneck_block(int64_t c_in, int64_t width, int64_t stride);

}  // namespace cohort::nn
