// The GPT-2 family in the zoo: Hugging Face's parameter names and counts (the
// output projection tied to wte), --seq / --vocab variants, and gpt2-tiny's
// forward and backward: finite, causal, every parameter range announced,
// gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "nn/models/zoo.h"

namespace cohort {
namespace {

// Hugging Face's GPT-2 sizes (tied head): 124M, 355M, 774M.
TEST(Gpt2, ParameterCountsAreGpt2s) {
  EXPECT_EQ(nn::count_params(*nn::find_model("gpt2")), 124439808);
  EXPECT_EQ(nn::count_params(*nn::find_model("gpt2-medium")), 354823168);
  EXPECT_EQ(nn::count_params(*nn::find_model("gpt2-large")), 774030080);
  // gpt2 over bytes at context 256: the embeddings shrink, the blocks do not.
  const int64_t blocks = 124439808 - 50257 * 768 - 1024 * 768;
  EXPECT_EQ(nn::count_params(*nn::find_model("gpt2", 256, 256)), blocks + 256 * 768 + 256 * 768);
}

TEST(Gpt2, HuggingFaceNamesAndATiedHead) {
  auto m = nn::make_model("gpt2-tiny", 1);
  std::vector<std::string> names;
  for (const auto& i : m->params().infos()) names.push_back(i.name);
  ASSERT_GE(names.size(), 16u);
  const std::vector<std::string> first = {"wte.weight", "wpe.weight", "h.0.ln_1.weight",
                                          "h.0.ln_1.bias", "h.0.attn.c_attn.weight",
                                          "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight",
                                          "h.0.attn.c_proj.bias", "h.0.ln_2.weight",
                                          "h.0.ln_2.bias", "h.0.mlp.c_fc.weight",
                                          "h.0.mlp.c_fc.bias", "h.0.mlp.c_proj.weight",
                                          "h.0.mlp.c_proj.bias"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 14), first);
  EXPECT_EQ(names[names.size() - 2], "ln_f.weight");
  EXPECT_EQ(names.back(), "ln_f.bias");  // lm_head.weight is wte.weight: no tensor of its own
  ASSERT_EQ(m->params().ties().size(), 1u);
  EXPECT_EQ(m->params().ties()[0].name, "lm_head.weight");
}

TEST(Gpt2, SeqAndVocabAreForTokenModelsOnly) {
  auto s = nn::find_model("gpt2-tiny", 32, 100);
  EXPECT_EQ(s->input.shape, (Shape{32}));
  EXPECT_EQ(s->classes, 100);
  EXPECT_THROW(nn::find_model("mnist-small", 32, 0), InputError);
  EXPECT_THROW(nn::find_model("gpt2-tiny", -1, 0), InputError);
}

struct Tiny {
  std::unique_ptr<nn::Model> model;
  Tensor ids;
  std::vector<int32_t> targets;
};

Tiny tiny(int64_t b, int64_t t, uint64_t seed) {
  Tiny r;
  r.model = nn::build_model(nn::find_model("gpt2-tiny", t, 0), seed);
  Rng rng(seed + 1);
  r.ids = Tensor::empty({b, t}, DType::kI32);
  for (int64_t i = 0; i < r.ids.numel(); ++i) r.ids.i32()[i] = int32_t(rng.below(256));
  r.targets.resize(size_t(b * t));
  for (auto& x : r.targets) x = int32_t(rng.below(256));
  return r;
}

double mean_loss(Tiny& m, Tensor* dlogits = nullptr) {
  nn::Context ctx;
  const Tensor& y = m.model->forward(m.ids, ctx);
  EXPECT_EQ(y.shape(), (Shape{m.ids.dim(0), m.ids.dim(1), 256}));
  if (dlogits) *dlogits = Tensor::empty(y.shape());
  const double n = double(m.ids.dim(0));
  return m.model->loss().compute(y, m.targets.data(), dlogits, float(1.0 / n)).loss_sum / n;
}

// At init the logits are near zero: the loss is near log(256) per token.
TEST(Gpt2, TinyStartsNearUniformAndBackwardCoversEveryRange) {
  Tiny m = tiny(2, 16, 3);
  Tensor dlogits;
  const double loss = mean_loss(m, &dlogits);
  EXPECT_NEAR(loss, std::log(256.0), 0.1);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  nn::Context ctx;
  ctx.grad_ready = [&](int64_t b, int64_t e) { ranges.push_back({b, e}); };
  m.model->backward(dlogits, ctx);
  int64_t covered = 0;
  for (auto& r : ranges) covered += r.second - r.first;
  EXPECT_EQ(covered, m.model->num_params());
  const Tensor& g = m.model->params().grads();
  for (int64_t i = 0; i < g.numel(); ++i) ASSERT_TRUE(std::isfinite(g.f32()[i])) << i;
}

// Position t's logits depend on tokens 0..t only.
TEST(Gpt2, TinyIsCausal) {
  Tiny m = tiny(1, 8, 4);
  nn::Context ctx;
  const Tensor y0 = [&] {
    const Tensor& y = m.model->forward(m.ids, ctx);
    Tensor c = Tensor::empty(y.shape());
    c.copy_from(y);
    return c;
  }();
  m.ids.i32()[5] = (m.ids.i32()[5] + 1) % 256;
  const Tensor& y1 = m.model->forward(m.ids, ctx);
  for (int64_t t = 0; t < 8; ++t) {
    double d = 0;
    for (int64_t v = 0; v < 256; ++v) d = std::max(d, double(std::fabs(y1.f32()[t * 256 + v] - y0.f32()[t * 256 + v])));
    if (t < 5)
      EXPECT_EQ(d, 0.0) << "position " << t << " saw token 5";
    else if (t == 5)
      EXPECT_GT(d, 0.0) << "position 5 ignored its own token";
  }
}

// Gradients of the mean loss against central differences on ~4 coordinates
// of every tensor (the tied wte gathers both of its uses).
TEST(Gpt2, TinyGradientsMatchFiniteDifferences) {
  Tiny m = tiny(2, 6, 5);
  Tensor dlogits;
  mean_loss(m, &dlogits);
  nn::Context ctx;
  m.model->backward(dlogits, ctx);
  Arena& a = m.model->params();
  std::vector<float> g(a.grads().f32(), a.grads().f32() + a.size());
  float* w = a.params().f32();
  Rng pick(9);
  for (const auto& info : a.infos())
    for (int k = 0; k < 4; ++k) {
      const int64_t j = info.offset + int64_t(pick.below(uint64_t(info.numel())));
      const float orig = w[j], eps = 1e-2f;
      w[j] = orig + eps;
      const double lp = mean_loss(m);
      w[j] = orig - eps;
      const double lm = mean_loss(m);
      w[j] = orig;
      const double fd = (lp - lm) / (2.0 * eps);
      EXPECT_NEAR(g[size_t(j)], fd, 2e-2 * std::max(1e-2, std::fabs(fd)) + 1e-4)
          << info.name << "[" << j - info.offset << "]";
    }
}

}  // namespace
}  // namespace cohort
