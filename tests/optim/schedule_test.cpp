// Learning-rate schedules: warm-up, middle and end values.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/schedule.h"

namespace cohort {
namespace {

TEST(Schedule, ConstantWithAndWithoutWarmup) {
  ConstantSchedule plain(0.1f);
  EXPECT_FLOAT_EQ(plain.lr(0), 0.1f);
  EXPECT_FLOAT_EQ(plain.lr(1000000), 0.1f);
  ConstantSchedule warm(0.1f, 4);
  EXPECT_FLOAT_EQ(warm.lr(0), 0.025f);  // lr / warmup
  EXPECT_FLOAT_EQ(warm.lr(1), 0.05f);
  EXPECT_FLOAT_EQ(warm.lr(3), 0.1f);  // last warm-up step reaches lr
  EXPECT_FLOAT_EQ(warm.lr(4), 0.1f);
}

TEST(Schedule, StepDecaysCountedFromEndOfWarmup) {
  StepSchedule s(1.0f, 10, 0.5f, 5);
  EXPECT_FLOAT_EQ(s.lr(0), 0.2f);
  EXPECT_FLOAT_EQ(s.lr(4), 1.0f);
  EXPECT_FLOAT_EQ(s.lr(5), 1.0f);
  EXPECT_FLOAT_EQ(s.lr(14), 1.0f);
  EXPECT_FLOAT_EQ(s.lr(15), 0.5f);
  EXPECT_FLOAT_EQ(s.lr(35), 0.125f);
  StepSchedule no_warmup(0.1f, 3, 0.1f);
  EXPECT_FLOAT_EQ(no_warmup.lr(2), 0.1f);
  EXPECT_FLOAT_EQ(no_warmup.lr(3), 0.01f);
}

TEST(Schedule, CosineWarmupMiddleAndEnd) {
  CosineSchedule s(1.0f, 110, 10, 0.1f);
  EXPECT_FLOAT_EQ(s.lr(0), 0.1f);
  EXPECT_FLOAT_EQ(s.lr(4), 0.5f);
  EXPECT_FLOAT_EQ(s.lr(9), 1.0f);
  EXPECT_FLOAT_EQ(s.lr(10), 1.0f);   // cosine starts at the peak
  EXPECT_FLOAT_EQ(s.lr(60), 0.55f);  // halfway: (lr + min_lr) / 2
  double quarter = 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25));
  EXPECT_FLOAT_EQ(s.lr(35), float(quarter));
  EXPECT_FLOAT_EQ(s.lr(110), 0.1f);
  EXPECT_FLOAT_EQ(s.lr(500), 0.1f);  // stays at min_lr past the end
  EXPECT_GT(s.lr(109), 0.1f);
  // Monotone after warm-up.
  for (int64_t t = 10; t < 110; ++t) EXPECT_LE(s.lr(t + 1), s.lr(t)) << t;
}

// DeepSpeed's WarmupDecayLR after warm-up: lr (total - step) / (total - warmup).
TEST(Schedule, LinearDecaysToTheFloorAtTotalSteps) {
  LinearSchedule s(1.0f, 110, 10);
  EXPECT_FLOAT_EQ(s.lr(0), 0.1f);
  EXPECT_FLOAT_EQ(s.lr(9), 1.0f);
  EXPECT_FLOAT_EQ(s.lr(10), 1.0f);  // decay starts at the peak
  EXPECT_FLOAT_EQ(s.lr(60), 0.5f);
  EXPECT_FLOAT_EQ(s.lr(85), 0.25f);
  EXPECT_FLOAT_EQ(s.lr(110), 0.0f);
  EXPECT_FLOAT_EQ(s.lr(500), 0.0f);
  LinearSchedule floor(1.0f, 100, 0, 0.2f);
  EXPECT_FLOAT_EQ(floor.lr(50), 0.6f);
  EXPECT_FLOAT_EQ(floor.lr(100), 0.2f);
  EXPECT_THROW(LinearSchedule(0.1f, 10, 20), InputError);
  EXPECT_THROW(LinearSchedule(0.1f, 10, 0, 0.2f), InputError);
}

TEST(Schedule, FactoryAndErrors) {
  EXPECT_FLOAT_EQ(make_schedule("constant", {.lr = 0.3f})->lr(7), 0.3f);
  EXPECT_FLOAT_EQ(make_schedule("step", {.lr = 1.0f, .step_size = 2, .gamma = 0.5f})->lr(2), 0.5f);
  EXPECT_FLOAT_EQ(make_schedule("cosine", {.lr = 1.0f, .total_steps = 10})->lr(10), 0.0f);
  EXPECT_FLOAT_EQ(make_schedule("linear", {.lr = 1.0f, .total_steps = 10})->lr(5), 0.5f);
  try {
    make_schedule("onecycle", {});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("--lr-schedule"), std::string::npos) << msg;
    EXPECT_NE(msg.find("constant, step, cosine, linear"), std::string::npos) << msg;
  }
  EXPECT_THROW(make_schedule("step", {.lr = 0.1f}), InputError);    // no step size
  EXPECT_THROW(make_schedule("cosine", {.lr = 0.1f}), InputError);  // no total steps
  EXPECT_THROW(CosineSchedule(0.1f, 10, 20), InputError);
  EXPECT_THROW(ConstantSchedule(-1.0f), InputError);
}

}  // namespace
}  // namespace cohort
