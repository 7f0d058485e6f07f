// fp16 loss scaling through a real training step (LocalStep on mnist-small,
// synthetic batches): a scale so large that the scaled gradients overflow
// fp16 skips the step and leaves the weights and the optimizer's state
// bit-identical, halves the scale per skipped step (hysteresis 1) until a
// step applies; a fixed scale that overflows skips every step; a moderate
// scale trains as fp32 does, to fp16's rounding.
#include <gtest/gtest.h>

#include "support/support.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "nn/models/zoo.h"
#include "parallel/local.h"

namespace cohort {
namespace {

constexpr int64_t kBatch = 16;

// A model, its optimizer and the step, at one precision; mnist-small from
// seed 5, so every Trainee starts from the same weights.
struct Trainee {
  std::unique_ptr<nn::Model> model = nn::make_model("mnist-small", 5);
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LocalStep> step;

  Trainee(std::unique_ptr<Optimizer> o, const Precision& p) : opt(std::move(o)) {
    step = std::make_unique<LocalStep>(*model, *opt, 0, 0.0f, p);
  }
  const float* weights() const { return model->params().params().f32(); }
  const float* grads() const { return model->params().grads().f32(); }
  int64_t size() const { return model->params().size(); }
  // One step on `batch` at lr; returns whether the optimizer stepped.
  bool train(const Batch& batch, float lr = 0.01f) {
    nn::Context ctx;
    step->forward_backward(batch, 1.0f / float(batch.size()), ctx);
    return step->apply(lr);
  }
};

Precision fp16(const LossScaleConfig& scaling) {
  Precision p;
  p.compute = DType::kF16;
  p.scaling = scaling;
  return p;
}

Batch batch(uint64_t seed) { return make_synthetic(kBatch, 28, 28, 1, 10, seed); }

std::vector<float> copy(const float* p, int64_t n) { return {p, p + n}; }

bool same_bits(const std::vector<float>& a, const float* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

// The optimizer's state tensors, flattened: what a skipped step must not touch.
std::vector<float> state_of(Optimizer& opt) {
  std::vector<float> s;
  for (const Tensor* t : opt.state()) s.insert(s.end(), t->f32(), t->f32() + t->numel());
  return s;
}

using testing_support::rel_l2;

// Scale 2^40 on batch 16: the loss's gradient alone is about 2^36, far past
// fp16's 65504, so the activations' gradients round to inf between layers.
// Each skipped step halves the scale; once it fits, the step applies.
TEST(PrecisionStep, OverflowSkipsUntouchedAndHalvesUntilAStepApplies) {
  LossScaleConfig cfg;
  cfg.initial_scale_power = 40;
  cfg.hysteresis = 1;
  Trainee s(std::make_unique<Adam>(), fp16(cfg));
  // Adam state with a history (as if 3 steps had run): a skipped step must
  // neither move the moments nor count a step (its bias correction would).
  s.opt->init_state(s.size());
  for (Tensor* t : s.opt->state())
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = 1e-3f * float(i % 97);
  s.opt->set_steps(3);
  const std::vector<float> state0 = state_of(*s.opt);

  const Batch b = batch(1);
  int skipped = 0;
  for (; skipped < 40; ++skipped) {
    const std::vector<float> w = copy(s.weights(), s.size());
    const float scale = s.step->scaler().scale();
    EXPECT_EQ(scale, std::ldexp(1.0f, 40 - skipped));
    if (s.train(b)) {
      EXPECT_FALSE(same_bits(w, s.weights())) << "the step that applied changed nothing";
      EXPECT_EQ(s.step->scaler().scale(), scale) << "a clean step kept the scale (window 1000)";
      break;
    }
    ASSERT_TRUE(same_bits(w, s.weights())) << "skipped step " << skipped << " moved a weight";
    ASSERT_EQ(state_of(*s.opt), state0) << "skipped step " << skipped << " moved Adam's state";
    ASSERT_EQ(s.opt->steps(), 3);
  }
  std::printf("2^40: %d steps skipped\n", skipped);
  // Measured: 19 skipped steps, the first applied at 2^21.
  EXPECT_GE(skipped, 10) << "2^40 should overflow fp16 for many halvings";
  EXPECT_LT(skipped, 40) << "never stepped";
  EXPECT_EQ(s.step->scaler().skipped(), skipped);
  EXPECT_EQ(s.step->scaler().steps(), skipped + 1);
  EXPECT_EQ(s.opt->steps(), 4);
  EXPECT_NE(state_of(*s.opt), state0);
  const auto summary = s.step->summary()["loss_scale"];
  EXPECT_EQ(summary["skipped"].get<int>(), skipped);
  EXPECT_TRUE(summary["dynamic"].get<bool>());
  EXPECT_EQ(summary["scale"].get<float>(), std::ldexp(1.0f, 40 - skipped));
}

// A fixed scale never moves, so one that overflows skips every step.
TEST(PrecisionStep, FixedScaleThatOverflowsSkipsEveryStep) {
  LossScaleConfig cfg;
  cfg.loss_scale = std::ldexp(1.0f, 40);
  Trainee s(std::make_unique<Sgd>(0.9f), fp16(cfg));
  const std::vector<float> w = copy(s.weights(), s.size());
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(s.train(batch(uint64_t(i) + 1))) << "step " << i;
    EXPECT_EQ(s.step->scaler().scale(), std::ldexp(1.0f, 40));
  }
  EXPECT_TRUE(same_bits(w, s.weights()));
  EXPECT_EQ(s.opt->steps(), 0);
  EXPECT_EQ(s.step->scaler().skipped(), 4);
  EXPECT_FALSE(s.step->summary()["loss_scale"]["dynamic"].get<bool>());
}

// At scale 2^8 nothing overflows: after apply() the arena holds the
// unscaled gradient, which is fp32's to fp16's rounding, and SGD's weights
// follow fp32's. Measured over 4 steps (relative L2 over the arena):
// gradients 2.0e-3 on the first step (same weights) and 4.4e-3 at worst,
// weights 5.8e-5 (the same at scale 1: these gradients are far from fp16's
// underflow); bounds about 5x above.
TEST(PrecisionStep, ModerateScaleTracksFp32) {
  LossScaleConfig cfg;
  cfg.initial_scale_power = 8;
  Trainee low(std::make_unique<Sgd>(0.9f), fp16(cfg));
  Trainee ref(std::make_unique<Sgd>(0.9f), Precision{});
  double worst_grad = 0, worst_weight = 0;
  for (int i = 0; i < 4; ++i) {
    const Batch b = batch(uint64_t(i) + 1);
    ASSERT_TRUE(low.train(b)) << "step " << i << " overflowed at 2^8";
    ASSERT_TRUE(ref.train(b));
    worst_grad = std::max(worst_grad, rel_l2(low.grads(), ref.grads(), ref.size()));
    worst_weight = std::max(worst_weight, rel_l2(low.weights(), ref.weights(), ref.size()));
  }
  // (Had apply() left the scale in, the gradients would differ by 255x.)
  std::printf("fp16 at 2^8 against fp32: gradients %.3g, weights %.3g\n", worst_grad,
              worst_weight);
  EXPECT_LE(worst_grad, 2e-2) << "weights " << worst_weight;
  EXPECT_LE(worst_weight, 3e-4) << "gradients " << worst_grad;
  EXPECT_EQ(low.step->scaler().skipped(), 0);
  EXPECT_EQ(low.step->scaler().scale(), 256.0f);
}

}  // namespace
}  // namespace cohort
