// fp16 loss scaling (DeepSpeed's DynamicLossScaler, PyTorch's GradScaler):
// the loss is multiplied by scale() before backward so small gradients
// survive fp16's range; the optimizer step divides it back out. An
// overflowing step (an inf or NaN gradient) is skipped, and the scale follows
// DeepSpeed's update_scale with its default consecutive_hysteresis=False.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>

#include "optim/optimizer.h"

#include "optim/precision.h"

namespace cohort {

class LossScaler {
 public:
  // Disabled (bf16, fp32): scale 1, never changes; a non-finite step is
  // still reported as one to skip.
  LossScaler(const LossScaleConfig& cfg, bool enabled);

  float scale() const { return scale_; }
  bool enabled() const { return enabled_; }
  bool dynamic() const { return enabled_ && cfg_.loss_scale == 0; }

  // After each step's backward, with whether any gradient was inf or NaN.
  // Returns whether the step may be applied (false: skip it). Every call is
  // one iteration of DeepSpeed's update_scale:
  //   overflow: if hysteresis is 1 or the counter reached 1, the scale
  //     halves (not below min_loss_scale); else the counter decrements.
  //   clean: when (iter - last overflow iter) % window == 0 the scale doubles
  //     and the counter is reset to hysteresis.
  // A fixed scale (loss_scale > 0) never changes; an overflow still skips.
  bool update(bool overflow);

  int64_t steps() const { return iter_; }
  int64_t skipped() const { return skipped_; }
  // {"loss_scale": {"dynamic", "scale", "steps", "skipped"}} for run reports.
  nlohmann::ordered_json summary() const;
  // Everything update() depends on, as one line ("scale hysteresis iter
  // last_overflow_iter skipped"), for checkpoints, so a resumed fp16 run
  // scales and skips as the uninterrupted one; restore() takes it back
  // (InputError naming `where` if it does not parse).
  std::string state() const;
  void restore(const std::string& state, const std::string& where);

 private:
  LossScaleConfig cfg_;
  bool enabled_;
  float scale_ = 1;
  int hysteresis_ = 1;  // DeepSpeed's cur_hysteresis
  int64_t iter_ = 0, last_overflow_iter_ = -1, skipped_ = 0;
};

// Whether any of g[0, n) is inf or NaN: one pass, every element read (the
// exponent bits' maximum), so it vectorizes and never branches per element.
bool has_nonfinite(const float* g, int64_t n);

// (scale_inplace(g, n, factor), which unscales gradients, is optim/clip.h's.)

// Decides whether a vote's verdict holds everywhere: given this rank's
// "overflow", returns whether any rank that shares the decision overflowed
// (pipeline stages each see their own range). Null: this rank alone decides.
using OverflowVote = std::function<bool(bool)>;

// One optimizer step over flat f32 params and grads that hold scale() times
// the gradient: unless the scaler is disabled, checks the gradients for inf
// or NaN (combined by `vote`) and lets the scaler decide; then, unless the
// step is skipped, divides the scale out, clips to clip_norm (0: off) and
// steps. Returns whether the optimizer stepped.
bool scaled_step(Optimizer& opt, LossScaler& scaler, float* params, float* grads, int64_t n,
                 float lr, float clip_norm = 0, const OverflowVote& vote = nullptr);

}  // namespace cohort
