#include "nn/sequential.h"

#include "core/error.h"
#include "core/timeline.h"
#include "nn/layers.h"
#include "ops/elementwise.h"

namespace cohort::nn {

Sequential& Sequential::add(const std::string& name, std::unique_ptr<Module> m) {
  children_.emplace_back(name, std::move(m));
  return *this;
}

void Sequential::register_params(ParamRegistry& reg, const std::string& prefix) {
  param_begin_ = reg.params->size();
  buffer_begin_ = reg.buffers->size();
  // An unnamed child adds no level to its parameters' names (GPT-2's wte, wpe).
  for (auto& [name, m] : children_) m->register_params(reg, name.empty() ? prefix : prefix + name + ".");
  param_end_ = reg.params->size();
  buffer_end_ = reg.buffers->size();
}

void Sequential::init_params(Rng& rng, InitStyle style) {
  for (auto& c : children_) c.second->init_params(rng, style);
}

Shape Sequential::output_shape(const Shape& in) const {
  Shape s = in;
  for (auto& c : children_) s = c.second->output_shape(s);
  return s;
}

double Sequential::flops(const Shape& in) const {
  // Shapes here are per image {H, W, C} or {F}; children see {1, ...}.
  double total = 0;
  Shape s = in;
  s.insert(s.begin(), 1);
  for (auto& c : children_) {
    Shape per_image(s.begin() + 1, s.end());
    total += c.second->flops(per_image);
    s = c.second->output_shape(s);
  }
  return total;
}

double Sequential::activation_elems(const Shape& in) const {
  double total = 0;  // the children's own; the container returns the last one's output
  Shape s = in;
  for (auto& c : children_) {
    total += c.second->activation_elems(s);
    s = c.second->output_shape(s);
  }
  return total;
}

void Sequential::collect_leaves(std::vector<const Module*>& out) const {
  for (auto& c : children_) c.second->collect_leaves(out);
}

const Tensor& Sequential::forward(const Tensor& x, Context& ctx) {
  return forward_range(0, children_.size(), x, ctx);
}

const Tensor& Sequential::backward(const Tensor& dy, Context& ctx) {
  return backward_range(0, children_.size(), dy, ctx);
}

// fp16 on the CPU (Context::precision): f32 arithmetic, but what travels
// between layers is rounded to fp16, so values past 65504 overflow as they
// would in fp16 storage (the loss scaler's overflow is real).
static void store_as_f16(const Tensor& t, const Context& ctx) {
  if (ctx.precision == DType::kF16 && t.dtype() == DType::kF32)
    ops::round_to_f16(t, t.numel());
}

const Tensor& Sequential::forward_range(size_t begin, size_t end, const Tensor& x, Context& ctx) {
  if (timeline::on()) [[unlikely]]
    return forward_traced(begin, end, x, ctx);
  const Tensor* h = &x;
  for (size_t i = begin; i < end; ++i) h = &forward_child(i, *h, ctx);
  return *h;
}

// Child i's forward, between the leaf hooks when a split layer runs
// (containers among the children pass them on to their own).
const Tensor& Sequential::forward_child(size_t i, const Tensor& x, Context& ctx) {
  Module& m = *children_[i].second;
  if (ctx.leaves) ctx.leaves->before_forward(m);
  const Tensor& h = m.forward(x, ctx);
  store_as_f16(h, ctx);
  if (ctx.leaves) ctx.leaves->after_forward(m);
  return h;
}

// Child i's backward; then its gradient range is announced (after the span
// of its backward, when traced: the bucket it completes is queued after it).
const Tensor& Sequential::backward_child(size_t i, const Tensor& dy, Context& ctx) {
  Module& m = *children_[i].second;
  if (ctx.leaves) ctx.leaves->before_backward(m);
  const Tensor& g = m.backward(dy, ctx);
  if (m.needs_input_grad()) store_as_f16(g, ctx);
  if (ctx.leaves) ctx.leaves->after_backward(m);
  return g;
}

static void announce(Module& m, Context& ctx) {
  // A nested Sequential has announced its children already.
  const bool nested = dynamic_cast<Sequential*>(&m) != nullptr;
  if (m.num_params() && ctx.grad_ready && !nested) ctx.grad_ready(m.param_begin(), m.param_end());
}

const Tensor& Sequential::backward_range(size_t begin, size_t end, const Tensor& dy,
                                         Context& ctx) {
  if (timeline::on()) [[unlikely]]
    return backward_traced(begin, end, dy, ctx);
  const Tensor* g = &dy;
  for (size_t i = end; i-- > begin;) {
    if (children_[i].second->frozen()) break;  // so is everything below it: no gradient work
    g = &backward_child(i, *g, ctx);
    announce(*children_[i].second, ctx);
  }
  return *g;
}

void Sequential::trace_children() {
  trace_names_.clear();
  for (auto& [name, m] : children_)
    trace_names_.push_back({timeline::intern("forward " + name), timeline::intern("backward " + name)});
}

const Tensor& Sequential::forward_traced(size_t begin, size_t end, const Tensor& x, Context& ctx) {
  const Tensor* h = &x;
  for (size_t i = begin; i < end; ++i) {
    const char* name = trace_names_.empty() ? nullptr : trace_names_[i].first;
    timeline::Span span("forward", name, "layer", int64_t(i));
    h = &forward_child(i, *h, ctx);
  }
  return *h;
}

const Tensor& Sequential::backward_traced(size_t begin, size_t end, const Tensor& dy,
                                          Context& ctx) {
  const Tensor* g = &dy;
  for (size_t i = end; i-- > begin;) {
    if (children_[i].second->frozen()) break;  // so is everything below it: no gradient work
    {
      const char* name = trace_names_.empty() ? nullptr : trace_names_[i].second;
      timeline::Span span("backward", name, "layer", int64_t(i));
      g = &backward_child(i, *g, ctx);
    }
    announce(*children_[i].second, ctx);
  }
  return *g;
}

void Sequential::set_needs_input_grad(bool v) {
  needs_input_grad_ = v;
  if (!children_.empty()) children_.front().second->set_needs_input_grad(v);
}

void Sequential::set_frozen(bool v) {
  frozen_ = v;
  for (auto& c : children_) c.second->set_frozen(v);
}

void Sequential::fold_frozen_norms() {
  for (size_t i = 0; i < children_.size(); ++i) {
    children_[i].second->fold_frozen_norms();
    if (i == 0) continue;
    auto* conv = dynamic_cast<Conv2d*>(children_[i - 1].second.get());
    auto* norm = dynamic_cast<BatchNorm2d*>(children_[i].second.get());
    if (conv && norm && conv->frozen() && norm->frozen()) conv->fold(*norm);
  }
}

Residual::Residual(std::unique_ptr<Sequential> branch, std::unique_ptr<Sequential> shortcut,
                   PostActivation post)
    : branch_(std::move(branch)),
      shortcut_(std::move(shortcut)),
      relu_(post == PostActivation::kReLU) {}

void Residual::register_params(ParamRegistry& reg, const std::string& prefix) {
  param_begin_ = reg.params->size();
  buffer_begin_ = reg.buffers->size();
  branch_->register_params(reg, prefix);
  if (shortcut_) shortcut_->register_params(reg, prefix + "downsample.");
  param_end_ = reg.params->size();
  buffer_end_ = reg.buffers->size();
}

void Residual::collect_leaves(std::vector<const Module*>& out) const {
  branch_->collect_leaves(out);
  if (shortcut_) shortcut_->collect_leaves(out);
}

void Residual::init_params(Rng& rng, InitStyle style) {
  branch_->init_params(rng, style);
  if (shortcut_) shortcut_->init_params(rng, style);
}

double Residual::flops(const Shape& in) const {
  return branch_->flops(in) + (shortcut_ ? shortcut_->flops(in) : 0);
}

double Residual::activation_elems(const Shape& in) const {
  return branch_->activation_elems(in) + (shortcut_ ? shortcut_->activation_elems(in) : 0) +
         double(numel(output_shape(in)));  // y_, the sum
}

const Tensor& Residual::forward(const Tensor& x, Context& ctx) {
  x_ = x;
  const Tensor& b = branch_->forward(x, ctx);
  const Tensor& s = shortcut_ ? shortcut_->forward(x, ctx) : x;
  COHORT_CHECK(b.shape() == s.shape(), "residual branch ", shape_str(b.shape()), " vs shortcut ",
               shape_str(s.shape()));
  ensure(y_, b.shape(), b.dtype());
  ops::add(b, s, y_, y_.numel());
  if (relu_) ops::relu_forward(y_, y_, y_.numel());
  return y_;
}

const Tensor& Residual::backward(const Tensor& dy, Context& ctx) {
  const Tensor& dsum = fused_relu_grad(dy, y_, relu_, dsum_);
  // Inner announcements would be finer than the whole block; the block announces once.
  auto ready = std::move(ctx.grad_ready);
  ctx.grad_ready = nullptr;
  const Tensor& db = branch_->backward(dsum, ctx);
  const Tensor& ds = shortcut_ ? shortcut_->backward(dsum, ctx) : dsum;
  ctx.grad_ready = std::move(ready);
  if (!needs_input_grad_) return dx_;
  ensure(dx_, x_.shape(), x_.dtype());
  ops::add(db, ds, dx_, dx_.numel());
  return dx_;
}

void Residual::set_frozen(bool v) {
  frozen_ = v;
  branch_->set_frozen(v);
  if (shortcut_) shortcut_->set_frozen(v);
}

void Residual::fold_frozen_norms() {
  branch_->fold_frozen_norms();
  if (shortcut_) shortcut_->fold_frozen_norms();
}

void Residual::set_needs_input_grad(bool v) {
  needs_input_grad_ = v;
  branch_->set_needs_input_grad(v);
  if (shortcut_) shortcut_->set_needs_input_grad(v);
}

std::unique_ptr<Module> basic_block(int64_t c_in, int64_t c_out, int64_t stride) {
  auto branch = std::make_unique<Sequential>();
  branch->add<Conv2d>("conv1", c_in, c_out, 3, stride, 1, false)
      .add<BatchNorm2d>("bn1", c_out, true)
      .add<Conv2d>("conv2", c_out, c_out, 3, 1, 1, false)
      .add<BatchNorm2d>("bn2", c_out);
  std::unique_ptr<Sequential> shortcut;
  if (stride != 1 || c_in != c_out) {
    shortcut = std::make_unique<Sequential>();
    shortcut->add<Conv2d>("0", c_in, c_out, 1, stride, 0, false).add<BatchNorm2d>("1", c_out);
  }
  return std::make_unique<Residual>(std::move(branch), std::move(shortcut));
}

std::unique_ptr<Module> bottleneck_block(int64_t c_in, int64_t width, int64_t stride) {
  const int64_t c_out = width * 4;
  auto branch = std::make_unique<Sequential>();
  branch->add<Conv2d>("conv1", c_in, width, 1, 1, 0, false)
      .add<BatchNorm2d>("bn1", width, true)
      .add<Conv2d>("conv2", width, width, 3, stride, 1, false)
      .add<BatchNorm2d>("bn2", width, true)
      .add<Conv2d>("conv3", width, c_out, 1, 1, 0, false)
      .add<BatchNorm2d>("bn3", c_out);
  std::unique_ptr<Sequential> shortcut;
  if (stride != 1 || c_in != c_out) {
    shortcut = std::make_unique<Sequential>();
    shortcut->add<Conv2d>("0", c_in, c_out, 1, stride, 0, false).add<BatchNorm2d>("1", c_out);
  }
  return std::make_unique<Residual>(std::move(branch), std::move(shortcut));
}

}  // namespace cohort::nn
