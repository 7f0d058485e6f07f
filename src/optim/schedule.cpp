// Learning-rate schedules; arithmetic in double so long runs do not drift.
#include "optim/schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace cohort {

// Warm-up factor for `step`, or 1 once warm-up is over.
static double warmup_factor(int64_t step, int64_t warmup) {
  if (step >= warmup) return 1.0;
  return double(step + 1) / double(warmup);
}

static void check_common(const char* who, float lr, int64_t warmup) {
  COHORT_INPUT_CHECK(lr >= 0.0f && std::isfinite(lr), who, " schedule: lr must be >= 0 (got ",
                     lr, ")");
  COHORT_INPUT_CHECK(warmup >= 0, who, " schedule: warm-up steps must be >= 0 (got ", warmup,
                     ")");
}

Schedule::~Schedule() = default;

ConstantSchedule::ConstantSchedule(float lr, int64_t warmup_steps)
    : lr_(lr), warmup_(warmup_steps) {
  check_common("constant", lr, warmup_steps);
}

float ConstantSchedule::lr(int64_t step) const {
  return float(lr_ * warmup_factor(step, warmup_));
}

StepSchedule::StepSchedule(float lr, int64_t step_size, float gamma, int64_t warmup_steps)
    : lr_(lr), gamma_(gamma), step_size_(step_size), warmup_(warmup_steps) {
  check_common("step", lr, warmup_steps);
  COHORT_INPUT_CHECK(step_size > 0, "step schedule: step size must be > 0 (got ", step_size,
                     ")");
  COHORT_INPUT_CHECK(gamma > 0.0f && gamma <= 1.0f,
                     "step schedule: gamma must be in (0, 1] (got ", gamma, ")");
}

float StepSchedule::lr(int64_t step) const {
  if (step < warmup_) return float(lr_ * warmup_factor(step, warmup_));
  int64_t decays = (step - warmup_) / step_size_;
  return float(lr_ * std::pow(double(gamma_), double(decays)));
}

DecaySchedule::DecaySchedule(const char* who, float lr, int64_t total_steps,
                             int64_t warmup_steps, float min_lr)
    : lr_(lr), min_lr_(min_lr), total_(total_steps), warmup_(warmup_steps) {
  check_common(who, lr, warmup_steps);
  COHORT_INPUT_CHECK(total_steps > 0, who, " schedule: total steps must be > 0 (got ",
                     total_steps, ")");
  COHORT_INPUT_CHECK(warmup_steps <= total_steps, who, " schedule: warm-up steps (",
                     warmup_steps, ") exceed total steps (", total_steps, ")");
  COHORT_INPUT_CHECK(min_lr >= 0.0f && min_lr <= lr, who, " schedule: min lr must be in [0, ",
                     lr, "] (got ", min_lr, ")");
}

float DecaySchedule::lr(int64_t step) const {
  if (step < warmup_) return float(lr_ * warmup_factor(step, warmup_));
  if (step >= total_) return min_lr_;
  double progress = double(step - warmup_) / double(total_ - warmup_);
  return float(min_lr_ + (double(lr_) - min_lr_) * left(progress));
}

double CosineSchedule::left(double progress) const {
  return 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

std::unique_ptr<Schedule> make_schedule(const std::string& name, const ScheduleOptions& o) {
  if (name == "constant") return std::make_unique<ConstantSchedule>(o.lr, o.warmup_steps);
  if (name == "step")
    return std::make_unique<StepSchedule>(o.lr, o.step_size, o.gamma, o.warmup_steps);
  if (name == "cosine")
    return std::make_unique<CosineSchedule>(o.lr, o.total_steps, o.warmup_steps, o.min_lr);
  if (name == "linear")
    return std::make_unique<LinearSchedule>(o.lr, o.total_steps, o.warmup_steps, o.min_lr);
  throw InputError("unknown --lr-schedule '" + name +
                   "' (valid: constant, step, cosine, linear)");
}

}  // namespace cohort
