// Learning-rate schedules. lr(step) is the rate for the update about to be
// made, where `step` counts the updates already done (0 for the first). All
// schedules share a linear warm-up: lr * (step + 1) / warmup_steps for the
// first warmup_steps updates, so it rises from lr / warmup to lr.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace cohort {

class Schedule {
 public:
  virtual ~Schedule();
  virtual float lr(int64_t step) const = 0;
};

class ConstantSchedule : public Schedule {
 public:
  explicit ConstantSchedule(float lr, int64_t warmup_steps = 0);
  float lr(int64_t step) const override;

 private:
  float lr_;
  int64_t warmup_;
};

// lr * gamma^floor((step - warmup_steps) / step_size) after warm-up: decay is
// counted from the end of warm-up so the rate does not jump when it ends.
class StepSchedule : public Schedule {
 public:
  StepSchedule(float lr, int64_t step_size, float gamma, int64_t warmup_steps = 0);
  float lr(int64_t step) const override;

 private:
  float lr_, gamma_;
  int64_t step_size_, warmup_;
};

// Warm-up, then a decay from lr down to min_lr between the end of warm-up and
// total_steps, and min_lr from then on; `left(progress)` says the shape.
class DecaySchedule : public Schedule {
 public:
  float lr(int64_t step) const final;

 protected:
  DecaySchedule(const char* who, float lr, int64_t total_steps, int64_t warmup_steps,
                float min_lr);
  // The share of (lr - min_lr) left after `progress` (0..1) of the decay.
  virtual double left(double progress) const = 0;

 private:
  float lr_, min_lr_;
  int64_t total_, warmup_;
};

// Half-cosine.
class CosineSchedule : public DecaySchedule {
 public:
  CosineSchedule(float lr, int64_t total_steps, int64_t warmup_steps = 0, float min_lr = 0.0f)
      : DecaySchedule("cosine", lr, total_steps, warmup_steps, min_lr) {}

 private:
  double left(double progress) const override;
};

// Straight line (DeepSpeed's WarmupDecayLR, Hugging Face's
// get_linear_schedule_with_warmup).
class LinearSchedule : public DecaySchedule {
 public:
  LinearSchedule(float lr, int64_t total_steps, int64_t warmup_steps = 0, float min_lr = 0.0f)
      : DecaySchedule("linear", lr, total_steps, warmup_steps, min_lr) {}

 private:
  double left(double progress) const override { return 1.0 - progress; }
};

struct ScheduleOptions {
  float lr = 0.01f;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // cosine, linear
  int64_t step_size = 0;    // step
  float gamma = 0.1f;       // step
  float min_lr = 0.0f;      // cosine, linear
};

// "constant" | "step" | "cosine" | "linear" (the --lr-schedule flag); unknown names and
// out-of-range options throw InputError.
std::unique_ptr<Schedule> make_schedule(const std::string& name, const ScheduleOptions& options);

}  // namespace cohort
