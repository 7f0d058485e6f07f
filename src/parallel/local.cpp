#include "parallel/local.h"

#include "core/clock.h"
#include "ops/loss.h"
#include "optim/clip.h"

namespace cohort {

LocalStep::LocalStep(nn::Model& model, Optimizer& opt, uint64_t seed, float clip_norm)
    : model_(model), opt_(opt), rng_(seed ^ 0x5eedull), clip_norm_(clip_norm) {}

StepResult LocalStep::forward_backward(const Batch& batch, float grad_scale, nn::Context& ctx) {
  ctx.training = true;
  ctx.rng = &rng_;
  const Tensor& logits = model_.forward(batch.images, ctx);
  const int64_t n = logits.dim(0), k = logits.dim(1);
  nn::ensure(dlogits_, logits.shape());
  auto loss = ops::softmax_cross_entropy(logits.f32(), batch.labels.data(), n, k, dlogits_.f32(),
                                         grad_scale);
  model_.backward(dlogits_, ctx);
  return {loss.loss_sum, loss.correct, n};
}

void LocalStep::apply(float lr) {
  const Arena& a = model_.params();
  if (clip_norm_ > 0) clip_grad_norm(a.grads().f32(), a.size(), clip_norm_);
  opt_.step(a.params().f32(), a.grads().f32(), a.size(), lr);
}

StepResult LocalStep::run(const Batch& batch, float lr) {
  nn::Context ctx;
  StepResult r = forward_backward(batch, 1.0f / float(batch.labels.size()), ctx);
  apply(lr);
  return r;
}

}  // namespace cohort

namespace cohort {

StepResult LocalStep::step(const Batch& batch, float lr, StepTimes& times) {
  Timer t;
  StepResult r = run(batch, lr);
  times.compute += t.seconds();
  return r;
}

}  // namespace cohort
