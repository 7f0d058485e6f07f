// Whole models against finite differences (with the softmax cross-entropy
// loss), and lenet against a composition of the reference loops of tests/ops.
#include "nn/grad_check.h"

namespace cohort {
namespace {

using namespace grad_check;

// ------------------------------------------------------------------ whole models

struct ModelFd {
  std::string model;
  bool training;        // false: dropout off
  bool reseed_dropout;  // training with dropout on: the same masks every forward
};

void model_grad_check(const ModelFd& c) {
  auto model = nn::make_model(c.model, 7);
  const int64_t n = 4, k = model->num_classes();
  Shape xs = model->input_shape();
  xs.insert(xs.begin(), n);
  Rng rng(31);
  Tensor x = randn(xs, rng);
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (auto& l : labels) l = int32_t(rng.below(uint64_t(k)));

  Rng dropout_rng(99);
  nn::Context ctx;
  ctx.training = c.training;
  ctx.rng = &dropout_rng;
  auto forward = [&](std::vector<uint8_t>* sig) -> const Tensor& {
    if (c.reseed_dropout) dropout_rng = Rng(99);
    return forward_recording(*model, x, ctx, sig);
  };
  // The mean loss, as training uses it.
  LossFn loss = [&](std::vector<uint8_t>* sig) {
    const Tensor& z = forward(sig);
    return ops::softmax_cross_entropy(z.f32(), labels.data(), n, k, nullptr, 1.0f).loss_sum /
           double(n);
  };

  const Tensor& z = forward(nullptr);
  ASSERT_EQ(z.shape(), (Shape{n, k}));
  Tensor dz = Tensor::empty(z.shape());
  ops::softmax_cross_entropy(z.f32(), labels.data(), n, k, dz.f32(), 1.0f / float(n));
  model->backward(dz, ctx);
  Arena& arena = model->params();
  ASSERT_EQ(arena.grads().numel(), model->num_params());
  Tensor g = Tensor::empty({arena.size()});
  g.copy_from(arena.grads());

  // ~30 coordinates spread over every parameter tensor (a uniform draw would land
  // almost only in the largest fc weight).
  Rng pick_rng(32);
  const int per = int(30 / arena.infos().size()) + 2;
  FdStats st;
  for (const auto& info : arena.infos())
    check_fd(arena.params().f32(), g.f32(), pick(info.offset, info.offset + info.numel(), per, pick_rng),
             loss, kModelSteps, c.model + "." + info.name, st);
  std::printf("  %s: %d coordinates checked, %d skipped (kinks), max |grad| %.3g, "
              "worst error %.2f of tolerance\n", c.model.c_str(), st.checked, st.skipped,
              st.max_grad, st.worst);
  EXPECT_GE(st.checked, 25);
  EXPECT_GE(st.checked, (st.checked + st.skipped) * 3 / 5);
  EXPECT_GT(st.max_grad, 1e-2) << "gradients too small for the check to mean anything";

  // accumulate=true adds into the gradient arena.
  forward(nullptr);
  ctx.accumulate = true;
  model->backward(dz, ctx);
  double err = 0, scale = 0;
  for (int64_t i = 0; i < arena.size(); ++i) {
    err = std::max(err, double(std::fabs(arena.grads().f32()[i] - 2 * g.f32()[i])));
    scale = std::max(scale, double(std::fabs(g.f32()[i])));
  }
  EXPECT_LE(err, 1e-5 * std::max(1.0, scale)) << "accumulate=true";
}

TEST(ModuleGrad, MnistSmallModel) { model_grad_check({"mnist-small", true, false}); }
TEST(ModuleGrad, LenetModelInference) { model_grad_check({"lenet", false, false}); }
TEST(ModuleGrad, LenetModelFixedDropoutMask) { model_grad_check({"lenet", true, true}); }

// The whole lenet gradient against the reference loops composed by hand, to
// 1e-4: exact where finite differences can only be approximate, and it pins
// Flatten's (C, H, W) order, the fused ReLUs and both dropouts. With dropout on,
// the reference redraws the masks from the same seed in the same order
// (drop1's {N, C} channel mask, then drop2's {N, 50} mask).
void lenet_vs_reference(bool dropout) {
  using Vec = std::vector<float>;
  auto m = nn::make_model("lenet", 7);
  const int64_t N = 3;
  Rng rng(33);
  Tensor x = randn({N, 28, 28, 1}, rng);
  std::vector<int32_t> labels = {1, 5, 9};
  Rng dropout_rng(77);
  nn::Context ctx;
  ctx.training = dropout;
  ctx.rng = &dropout_rng;
  const Tensor& z = m->forward(x, ctx);
  Tensor dz = Tensor::empty(z.shape());
  ops::softmax_cross_entropy(z.f32(), labels.data(), N, 10, dz.f32(), 1.0f / N);
  m->backward(dz, ctx);

  const auto& infos = m->params().infos();
  ASSERT_EQ(infos.size(), 8u);
  auto P = [&](size_t i) { return m->params().params().f32() + infos[i].offset; };
  const ops::ConvShape c1{N, 28, 28, 1, 10, 5, 5, 1, 0}, c2{N, 12, 12, 10, 20, 5, 5, 1, 0};
  const ops::PoolShape p1{N, 24, 24, 10, 2, 2}, p2{N, 8, 8, 20, 2, 2};
  const ops::LinearShape l1{N, 320, 50}, l2{N, 50, 10};
  Vec mask1(N * 20, 1.0f), mask2(N * 50, 1.0f);
  if (dropout) {
    Rng r(77);
    ops::dropout_mask(mask1.data(), N * 20, 0.5f, r);
    ops::dropout_mask(mask2.data(), N * 50, 0.5f, r);
  }
  Vec a1(N * 24 * 24 * 10), h1(N * 12 * 12 * 10), a2(N * 8 * 8 * 20), d2(a2.size()),
      h2(N * 4 * 4 * 20), f(N * 320), a3(N * 50), d3(N * 50), zr(N * 10);
  ref::conv2d_forward(c1, true, x.f32(), P(0), P(1), a1.data());
  ref::max_pool_forward(p1, a1.data(), h1.data());
  ref::conv2d_forward(c2, true, h1.data(), P(2), P(3), a2.data());
  ref::dropout2d_apply(a2.data(), mask1.data(), d2.data(), N, 64, 20);
  ref::max_pool_forward(p2, d2.data(), h2.data());
  ref::nhwc_to_nchw(h2.data(), f.data(), N, 4, 4, 20);
  ref::linear_forward(l1, true, f.data(), P(4), P(5), a3.data());
  ref::dropout_apply(a3.data(), mask2.data(), d3.data(), N * 50);
  ref::linear_forward(l2, false, d3.data(), P(6), P(7), zr.data());
  EXPECT_LE(ref::rel_error(z.f32(), zr.data(), N * 10), 1e-4) << "logits";

  Vec dzr(N * 10), dd3(N * 50), da3(N * 50), df(N * 320), dh2(h2.size()), dd2(d2.size()),
      da2(a2.size()), dh1(h1.size()), da1(a1.size());
  std::vector<Vec> g(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) g[i].resize(static_cast<size_t>(infos[i].numel()));
  ref::softmax_cross_entropy(zr.data(), labels.data(), N, 10, dzr.data(), 1.0f / N);
  ref::linear_backward_weights(l2, d3.data(), dzr.data(), g[6].data(), g[7].data());
  ref::linear_backward_data(l2, dzr.data(), P(6), dd3.data());
  ref::dropout_apply(dd3.data(), mask2.data(), da3.data(), N * 50);
  ref::relu_backward(da3.data(), a3.data(), da3.data(), N * 50);
  ref::linear_backward_weights(l1, f.data(), da3.data(), g[4].data(), g[5].data());
  ref::linear_backward_data(l1, da3.data(), P(4), df.data());
  ref::nchw_to_nhwc(df.data(), dh2.data(), N, 20, 4, 4);
  ref::max_pool_backward(p2, d2.data(), dh2.data(), dd2.data());
  ref::dropout2d_apply(dd2.data(), mask1.data(), da2.data(), N, 64, 20);
  ref::relu_backward(da2.data(), a2.data(), da2.data(), int64_t(da2.size()));
  ref::conv2d_backward_weights(c2, h1.data(), da2.data(), g[2].data(), g[3].data());
  ref::conv2d_backward_data(c2, da2.data(), P(2), dh1.data());
  ref::max_pool_backward(p1, a1.data(), dh1.data(), da1.data());
  ref::relu_backward(da1.data(), a1.data(), da1.data(), int64_t(da1.size()));
  ref::conv2d_backward_weights(c1, x.f32(), da1.data(), g[0].data(), g[1].data());
  for (size_t i = 0; i < infos.size(); ++i) {
    const float* got = m->params().grads().f32() + infos[i].offset;
    // Relative to the tensor's own scale: these gradients are far below 1.
    const double scale = std::max(1e-6, ref::max_abs(g[i].data(), infos[i].numel()));
    double err = 0;
    for (int64_t j = 0; j < infos[i].numel(); ++j)
      err = std::max(err, double(std::fabs(got[j] - g[i][size_t(j)])));
    EXPECT_LE(err / scale, 1e-4) << infos[i].name;
  }
}

TEST(ModuleGrad, LenetMatchesReferenceComposition) { lenet_vs_reference(false); }
TEST(ModuleGrad, LenetWithDropoutMatchesReferenceComposition) { lenet_vs_reference(true); }


}  // namespace
}  // namespace cohort
