// Loss scaling: forced overflow sequences against DeepSpeed's update_scale,
// written out by hand (closed form), and the overflow check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "optim/loss_scale.h"

namespace cohort {
namespace {

LossScaleConfig dynamic(int power, int window, int hysteresis, float min_scale = 1) {
  LossScaleConfig c;
  c.initial_scale_power = power;
  c.loss_scale_window = window;
  c.hysteresis = hysteresis;
  c.min_loss_scale = min_scale;
  return c;
}

// Feeds `steps` ('O' overflow, 'C' clean) and returns the scale after each.
std::vector<float> run(LossScaler& s, const std::string& steps) {
  std::vector<float> out;
  for (char c : steps) {
    EXPECT_EQ(s.update(c == 'O'), c == 'C') << "step " << out.size();
    out.push_back(s.scale());
  }
  return out;
}

TEST(LossScale, DynamicFollowsDeepSpeedUpdateScale) {
  // 2^4, window 3, hysteresis 2. The first overflow uses up the hysteresis,
  // the second halves; the window counts from the last overflow, so the third
  // clean step after it doubles and resets the hysteresis. One clean step
  // does not reset it (consecutive_hysteresis=False): O C O halves again.
  LossScaler s(dynamic(4, 3, 2), true);
  EXPECT_EQ(s.scale(), 16.0f);
  const std::vector<float> want = {16, 8, 8, 8, 16, 16, 16, 32, 32, 32, 16, 16, 16, 32};
  EXPECT_EQ(run(s, "OOCCCCCCOCOCCC"), want);
  EXPECT_EQ(s.skipped(), 4);
  EXPECT_EQ(s.steps(), 14);
}

TEST(LossScale, CleanStepsFromTheStartDoubleEveryWindow) {
  // last_overflow_iter starts at -1: iterations 2, 5, 8 end a window of 3.
  LossScaler s(dynamic(0, 3, 2), true);
  EXPECT_EQ(run(s, "CCCCCCCCC"), (std::vector<float>{1, 1, 2, 2, 2, 4, 4, 4, 8}));
  LossScaler w1(dynamic(0, 1, 2), true);
  EXPECT_EQ(run(w1, "CCC"), (std::vector<float>{2, 4, 8}));
  EXPECT_EQ(w1.skipped(), 0);
}

TEST(LossScale, HysteresisOneHalvesOnEveryOverflow) {
  LossScaler s(dynamic(16, 1000, 1), true);
  EXPECT_EQ(run(s, "OOO"), (std::vector<float>{32768, 16384, 8192}));
  EXPECT_EQ(s.skipped(), 3);
}

TEST(LossScale, NeverBelowTheMinimum) {
  LossScaler s(dynamic(3, 1000, 1, 2), true);
  EXPECT_EQ(run(s, "OOOOO"), (std::vector<float>{4, 2, 2, 2, 2}));
  EXPECT_EQ(s.skipped(), 5);
  // A minimum that is not a power of two is reached exactly.
  LossScaler odd(dynamic(3, 1000, 1, 3), true);
  EXPECT_EQ(run(odd, "OO"), (std::vector<float>{4, 3}));
}

TEST(LossScale, FixedScaleNeverChangesButOverflowStillSkips) {
  LossScaleConfig c;
  c.loss_scale = 128;
  c.loss_scale_window = 1;
  LossScaler s(c, true);
  EXPECT_FALSE(s.dynamic());
  EXPECT_EQ(run(s, "OOCCCOC"), (std::vector<float>(7, 128.0f)));
  EXPECT_EQ(s.skipped(), 3);
}

TEST(LossScale, DisabledIsOne) {
  LossScaler s(dynamic(16, 1, 1), false);
  EXPECT_EQ(s.scale(), 1.0f);
  EXPECT_EQ(run(s, "CCOC"), (std::vector<float>(4, 1.0f)));
  EXPECT_EQ(s.skipped(), 1);
}

TEST(LossScale, SummaryReportsTheScaleAndSkippedSteps) {
  LossScaler s(dynamic(4, 3, 1), true);
  s.update(true);
  s.update(false);
  const auto j = s.summary()["loss_scale"];
  EXPECT_EQ(j["dynamic"], true);
  EXPECT_EQ(j["scale"], 8.0);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["skipped"], 1);
}

TEST(LossScale, HasNonfiniteFindsInfAndNanAnywhere) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {int64_t(1), int64_t(37), int64_t(200003)}) {  // the last runs threaded
    std::vector<float> g(size_t(n), 1.0f);
    g[0] = std::numeric_limits<float>::max();
    g[size_t(n - 1)] = -std::numeric_limits<float>::max();
    EXPECT_FALSE(has_nonfinite(g.data(), n)) << n;
    for (int64_t at : {int64_t(0), n / 2, n - 1})
      for (float bad : {inf, -inf, nan, -nan}) {
        const float keep = g[size_t(at)];
        g[size_t(at)] = bad;
        EXPECT_TRUE(has_nonfinite(g.data(), n)) << "n " << n << " at " << at << " " << bad;
        g[size_t(at)] = keep;
      }
  }
  EXPECT_FALSE(has_nonfinite(nullptr, 0));
}

}  // namespace
}  // namespace cohort
