// Optimizers over flat f32 buffers. They see only (params, grads, n), never a
// model, so the same object can update a whole arena or one ZeRO shard
// [offset, offset + n) of it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace cohort {

class Optimizer {
 public:
  virtual ~Optimizer();

  // One update of params[0, n) from grads[0, n) at learning rate lr. State is
  // allocated for n elements on the first call (or by init_state); n must stay
  // the same afterwards.
  void step(float* params, const float* grads, int64_t n, float lr);
  // The same step in pieces (ZeRO widens bf16 gradients a piece at a time):
  // begin_step(n) once, then update() over pieces that cover [0, n) once
  // each; `params` and `grads` point at element `offset`, of `count`.
  void begin_step(int64_t n);
  virtual void update(float* params, const float* grads, int64_t offset, int64_t count,
                      float lr) = 0;
  virtual std::string name() const = 0;

  // Per-element state tensors (each of shape {n}) for checkpoints, in a fixed
  // order matching state_names(). Empty until the state is allocated.
  virtual std::vector<Tensor*> state();
  virtual std::vector<std::string> state_names() const;

  // Allocates zeroed state for n elements so a checkpoint can be restored
  // into state() before the first step. No-op if already allocated for n.
  void init_state(int64_t n);
  // Number of completed steps; Adam's bias correction depends on it, so a
  // restore must set it together with the state tensors.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps);

 protected:
  virtual void allocate_state(int64_t n) = 0;

  int64_t steps_ = 0;
  int64_t n_ = -1;  // elements the state was allocated for; -1 before
};

// torch.optim.SGD with dampening 0: g += wd * p; buf = momentum * buf + g
// (buf = g on the first step); g = nesterov ? g + momentum * buf : buf.
class Sgd : public Optimizer {
 public:
  explicit Sgd(float momentum = 0.0f, float weight_decay = 0.0f, bool nesterov = false);
  void update(float* params, const float* grads, int64_t offset, int64_t n, float lr) override;
  std::string name() const override { return "sgd"; }
  std::vector<Tensor*> state() override;
  std::vector<std::string> state_names() const override;

 protected:
  void allocate_state(int64_t n) override;

 private:
  float momentum_, weight_decay_;
  bool nesterov_;
  Tensor momentum_buffer_;  // only when momentum_ != 0
};

// torch.optim.Adam: L2 weight decay added to the gradient, bias-corrected
// moments, p -= lr * m_hat / (sqrt(v_hat) + eps).
class Adam : public Optimizer {
 public:
  explicit Adam(float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-7f,
                float weight_decay = 0.0f);
  void update(float* params, const float* grads, int64_t offset, int64_t n, float lr) override;
  std::string name() const override { return "adam"; }
  std::vector<Tensor*> state() override;
  std::vector<std::string> state_names() const override;

 protected:
  void allocate_state(int64_t n) override;
  // Shared by Adam and AdamW: `l2` is added to the gradient as l2 * p, and the
  // parameter is first multiplied by `shrink` (decoupled decay).
  void adam_update(float* params, const float* grads, int64_t offset, int64_t n, float lr,
                   float l2, float shrink);
  // `who` names the optimizer in argument errors.
  Adam(const char* who, float beta1, float beta2, float eps, float weight_decay);

  float beta1_, beta2_, eps_, weight_decay_;
  Tensor exp_avg_, exp_avg_sq_;
};

// torch.optim.AdamW: p *= 1 - lr * wd, then the Adam update without L2.
class AdamW : public Adam {
 public:
  explicit AdamW(float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-7f,
                 float weight_decay = 0.01f);
  void update(float* params, const float* grads, int64_t offset, int64_t n, float lr) override;
  std::string name() const override { return "adamw"; }
};

// "sgd" | "adam" | "adamw" (the --optimizer flag). `momentum` is used by sgd
// only, the betas and eps by adam and adamw. Unknown names throw InputError.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, float weight_decay,
                                          float momentum, float beta1 = 0.9f,
                                          float beta2 = 0.999f, float eps = 1e-7f);

}  // namespace cohort
