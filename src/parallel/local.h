// One training step on one process: forward, loss, backward, optimizer.
// The other strategies in src/parallel/ wrap the same pieces with
// communication; this is the single-process reference they are tested against.
#pragma once
#include <memory>

#include "data/batch.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "optim/loss_scale.h"
#include "optim/precision.h"
#include "parallel/strategy.h"

namespace cohort {

class LocalStep final : public Strategy {
 public:
  // clip_norm <= 0: no clipping. precision: the model's arithmetic (bf16, fp16
  // with loss scaling); the arena keeps f32 master weights either way.
  LocalStep(nn::Model& model, Optimizer& opt, uint64_t seed, float clip_norm = 0,
            const Precision& precision = {});
  // Forward and backward only; gradients of the mean loss land in the arena.
  // grad_scale: 1/batch for a mean (1/global batch under data parallelism).
  StepResult forward_backward(const Batch& batch, float grad_scale, nn::Context& ctx);
  // Applies the optimizer to the whole arena (fp16: unless the loss scaler
  // skips the step; `vote` combines the overflow verdict over ranks).
  // Returns whether it stepped.
  bool apply(float lr, const OverflowVote& vote = nullptr);
  StepResult run(const Batch& batch, float lr);
  std::string name() const override { return "single"; }
  // The loss scale and skipped steps (fp16); nothing otherwise.
  nlohmann::ordered_json summary() override;
  const LossScaler& scaler() const { return scaler_; }
  LossScaler* loss_scaler() override { return scaler_.enabled() ? &scaler_ : nullptr; }
  // Replicas: a step whose gradients another step's apply() unscales takes
  // that step's loss scale (its own scaler never sees an update).
  void follow_scaler(const LossScaler& master) { scaler_ = master; }
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  // The trainable range: a frozen prefix has no optimizer state.
  std::pair<int64_t, int64_t> optimizer_range() const override { return model_.trainable(); }

  nn::Model& model() { return model_; }
  Rng& rng() { return rng_; }
  Rng* dropout_rng() override { return &rng_; }

 private:
  nn::Model& model_;
  Optimizer& opt_;
  Rng rng_;
  float clip_norm_;
  Precision precision_;
  LossScaler scaler_;
  Tensor dout_;  // the loss's gradient w.r.t. the model's output
};

}  // namespace cohort
