// The loss module: softmax cross-entropy over classes ({N, K}) and over tokens
// ({N, T, V}, a target per position), its gradient by finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "nn/loss.h"

namespace cohort::nn {
namespace {

// -log softmax(z)[target] of one row, in double.
double row_loss(const float* z, int64_t k, int32_t target) {
  double m = z[0], s = 0;
  for (int64_t j = 1; j < k; ++j) m = std::max(m, double(z[j]));
  for (int64_t j = 0; j < k; ++j) s += std::exp(double(z[j]) - m);
  return std::log(s) + m - double(z[target]);
}

Tensor random_logits(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.normal();
  return t;
}

TEST(Loss, TokensAreTheMeanOverPositionsOfEachSample) {
  const int64_t n = 3, t = 5, v = 7;
  Tensor out = random_logits({n, t, v}, 1);
  std::vector<int32_t> targets;
  for (int64_t i = 0; i < n * t; ++i) targets.push_back(int32_t((i * 3) % v));
  SoftmaxCrossEntropy ce;
  LossResult r = ce.compute(out, targets.data(), nullptr, 1);
  double want = 0;
  for (int64_t i = 0; i < n * t; ++i) want += row_loss(out.f32() + i * v, v, targets[size_t(i)]);
  EXPECT_NEAR(r.loss_sum, want / double(t), 1e-6);
  EXPECT_GE(r.correct, 0.0);
  EXPECT_LE(r.correct, double(n));
}

TEST(Loss, ClassesMatchEveryRowsLossAndCountTheArgmax) {
  const int64_t n = 4, k = 10;
  Tensor out = random_logits({n, k}, 2);
  std::vector<int32_t> targets = {0, 3, 9, 5};
  // Make sample 1 right by construction: its target gets the largest logit.
  out.f32()[1 * k + 3] = 100;
  SoftmaxCrossEntropy ce;
  LossResult r = ce.compute(out, targets.data(), nullptr, 1);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) want += row_loss(out.f32() + i * k, k, targets[size_t(i)]);
  EXPECT_NEAR(r.loss_sum, want, 1e-5);
  EXPECT_GE(r.correct, 1.0);
}

TEST(Loss, TokenGradientMatchesFiniteDifferences) {
  const int64_t n = 2, t = 3, v = 4;
  Tensor out = random_logits({n, t, v}, 3);
  std::vector<int32_t> targets = {1, 0, 3, 2, 2, 1};
  const float scale = 1.0f / float(n);
  SoftmaxCrossEntropy ce;
  Tensor dout = Tensor::empty(out.shape());
  ce.compute(out, targets.data(), &dout, scale);
  const float h = 1e-2f;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float keep = out.f32()[i];
    out.f32()[i] = keep + h;
    const double up = ce.compute(out, targets.data(), nullptr, 1).loss_sum;
    out.f32()[i] = keep - h;
    const double down = ce.compute(out, targets.data(), nullptr, 1).loss_sum;
    out.f32()[i] = keep;
    EXPECT_NEAR(dout.f32()[i], (up - down) / (2 * h) * scale, 1e-4) << "element " << i;
  }
}

}  // namespace
}  // namespace cohort::nn
