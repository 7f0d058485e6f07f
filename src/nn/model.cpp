#include "nn/model.h"

#include "ops/elementwise.h"

namespace cohort::nn {

Model::Model(std::shared_ptr<const ModelSpec> spec)
    : spec_(std::move(spec)), layers_(spec_->layers()),
      loss_(spec_->loss ? spec_->loss() : std::make_unique<SoftmaxCrossEntropy>()) {
  // The first layer's input is data: nobody needs its gradient.
  if (layers_->size()) layers_->child(0).set_needs_input_grad(false);
  layers_->trace_children();  // top-level layers are the timeline's forward/backward spans
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

const Tensor& Model::forward(const Tensor& x, Context& ctx) {
  const Tensor& in = cast_input(x, ctx.precision, input_);
  if (!hooks_) return layers_->forward(in, ctx);
  const Tensor* h = &in;
  ctx.rows = hooks_->row_stream();
  for (size_t i = 0; i < layers_->size(); ++i) {
    hooks_->before_forward(i);
    ctx.leaves = hooks_->leaf_hooks(i);
    h = &layers_->forward_range(i, i + 1, *h, ctx);
    ctx.leaves = nullptr;
    hooks_->after_forward(i);
  }
  ctx.rows = nullptr;
  return *h;
}

void Model::backward(const Tensor& dout, Context& ctx) {
  if (!hooks_) {
    layers_->backward(dout, ctx);
    return;
  }
  const Tensor* g = &dout;
  ctx.rows = hooks_->row_stream();
  for (size_t i = layers_->size(); i-- > 0;) {
    hooks_->before_backward(i);
    ctx.leaves = hooks_->leaf_hooks(i);
    g = &layers_->backward_range(i, i + 1, *g, ctx);
    ctx.leaves = nullptr;
    hooks_->after_backward(i);
  }
  ctx.rows = nullptr;
}

Ranges Model::layer_ranges(size_t i) const {
  const Module& m = layers_->child(i);
  Ranges r;
  if (m.num_params()) r.push_back({m.param_begin(), m.param_end()});
  const std::string prefix = layers_->child_name(i) + ".";
  for (const Arena::Tie& t : params_.ties()) {
    if (t.name.rfind(prefix, 0) != 0) continue;
    const ParamInfo& owner = params_.infos()[t.owner];
    r.push_back({owner.offset, owner.offset + owner.numel()});
  }
  return r;
}

std::unique_ptr<Model> Model::clone(uint64_t seed) const {
  auto m = build_model(spec_, seed);
  m->freeze(freeze_);
  return m;
}

std::unique_ptr<Model> Model::view() {
  auto m = std::make_unique<Model>(spec_);
  m->build_shared(*this);
  m->freeze(freeze_);
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
