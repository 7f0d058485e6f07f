// Module-level checks: gradients through a ResNet bottleneck block (with its
// strided shortcut) against finite differences, and the bottleneck block and
// the fused conv+ReLU+pool against compositions of the reference loops of
// tests/ops. Whole models are in model_grad_test.cpp, the zoo in zoo_test.cpp.
#include "nn/grad_check.h"

namespace cohort {
namespace {

using namespace grad_check;

// ------------------------------------------------------------------ bottleneck block

// nn::bottleneck_block(8, 4, 2) composed from the reference loops: branch
// conv1x1 8->4, BN, ReLU, conv3x3 s2 p1 4->4, BN, ReLU, conv1x1 4->16, BN;
// shortcut conv1x1 s2 8->16, BN; out = ReLU(branch + shortcut). Batch-norm in
// training mode. Parameters are read from the block's arena by name.
struct RefBottleneck {
  static constexpr int64_t N = 3, H = 7, Ci = 8, Wd = 4, Co = 16, OH = 4;
  using Vec = std::vector<float>;
  const ops::ConvShape c1{N, H, H, Ci, Wd, 1, 1, 1, 0}, c2{N, H, H, Wd, Wd, 3, 3, 2, 1},
      c3{N, OH, OH, Wd, Co, 1, 1, 1, 0}, cs{N, H, H, Ci, Co, 1, 1, 2, 0};
  const ops::BatchNormShape b1{N, H, H, Wd}, b2{N, OH, OH, Wd}, b3{N, OH, OH, Co};
  Arena& a;
  Vec a1, r1, a2, r2, a3, n3, s1, n4, y;

  explicit RefBottleneck(Arena& arena) : a(arena) {}
  const float* P(const std::string& n) { return a.params().f32() + info_named(a, n).offset; }
  static Vec sized(const ops::BatchNormShape& s) { return Vec(static_cast<size_t>(s.n * s.h * s.w * s.c)); }

  void forward(const float* x) {
    a1 = sized(b1), r1 = sized(b1), a2 = sized(b2), r2 = sized(b2);
    a3 = sized(b3), n3 = sized(b3), s1 = sized(b3), n4 = sized(b3), y = sized(b3);
    ref::conv2d_forward(c1, false, x, P("conv1.weight"), nullptr, a1.data());
    ref::batch_norm_train_forward(b1, a1.data(), P("bn1.weight"), P("bn1.bias"), r1.data());
    ref::relu_forward(r1.data(), r1.data(), int64_t(r1.size()));
    ref::conv2d_forward(c2, false, r1.data(), P("conv2.weight"), nullptr, a2.data());
    ref::batch_norm_train_forward(b2, a2.data(), P("bn2.weight"), P("bn2.bias"), r2.data());
    ref::relu_forward(r2.data(), r2.data(), int64_t(r2.size()));
    ref::conv2d_forward(c3, false, r2.data(), P("conv3.weight"), nullptr, a3.data());
    ref::batch_norm_train_forward(b3, a3.data(), P("bn3.weight"), P("bn3.bias"), n3.data());
    ref::conv2d_forward(cs, false, x, P("downsample.0.weight"), nullptr, s1.data());
    ref::batch_norm_train_forward(b3, s1.data(), P("downsample.1.weight"), P("downsample.1.bias"),
                                  n4.data());
    ref::add(n3.data(), n4.data(), y.data(), int64_t(y.size()));
    ref::relu_forward(y.data(), y.data(), int64_t(y.size()));
  }
  // The kink pattern: the signs of the three ReLUs' outputs.
  void signature(std::vector<uint8_t>& sig) const {
    sig.clear();
    for (const Vec* v : {&r1, &r2, &y})
      for (float f : *v) sig.push_back(f > 0);
  }
  // Gradients for output gradient dy (after forward(x)); g by parameter name, and dx.
  void backward(const float* x, const float* dy, std::map<std::string, Vec>& g, Vec& dx) {
    for (const auto& i : a.infos()) g[i.name].assign(static_cast<size_t>(i.numel()), 0.0f);
    Vec dsum = sized(b3), da3 = sized(b3), ds1 = sized(b3), dr2 = sized(b2), da2 = sized(b2),
        dr1 = sized(b1), da1 = sized(b1), dx2(static_cast<size_t>(N * H * H * Ci));
    dx.assign(dx2.size(), 0.0f);
    ref::relu_backward(dy, y.data(), dsum.data(), int64_t(y.size()));
    ref::batch_norm_backward(b3, a3.data(), dsum.data(), P("bn3.weight"), da3.data(),
                             g["bn3.weight"].data(), g["bn3.bias"].data());
    ref::conv2d_backward_weights(c3, r2.data(), da3.data(), g["conv3.weight"].data(), nullptr);
    ref::conv2d_backward_data(c3, da3.data(), P("conv3.weight"), dr2.data());
    ref::relu_backward(dr2.data(), r2.data(), dr2.data(), int64_t(dr2.size()));
    ref::batch_norm_backward(b2, a2.data(), dr2.data(), P("bn2.weight"), da2.data(),
                             g["bn2.weight"].data(), g["bn2.bias"].data());
    ref::conv2d_backward_weights(c2, r1.data(), da2.data(), g["conv2.weight"].data(), nullptr);
    ref::conv2d_backward_data(c2, da2.data(), P("conv2.weight"), dr1.data());
    ref::relu_backward(dr1.data(), r1.data(), dr1.data(), int64_t(dr1.size()));
    ref::batch_norm_backward(b1, a1.data(), dr1.data(), P("bn1.weight"), da1.data(),
                             g["bn1.weight"].data(), g["bn1.bias"].data());
    ref::conv2d_backward_weights(c1, x, da1.data(), g["conv1.weight"].data(), nullptr);
    ref::conv2d_backward_data(c1, da1.data(), P("conv1.weight"), dx.data());
    ref::batch_norm_backward(b3, s1.data(), dsum.data(), P("downsample.1.weight"), ds1.data(),
                             g["downsample.1.weight"].data(), g["downsample.1.bias"].data());
    ref::conv2d_backward_weights(cs, x, ds1.data(), g["downsample.0.weight"].data(), nullptr);
    ref::conv2d_backward_data(cs, ds1.data(), P("downsample.0.weight"), dx2.data());
    ref::add(dx.data(), dx2.data(), dx.data(), int64_t(dx.size()));
  }
};

TEST(ModuleGrad, BottleneckBlockStride2) {
  // c_in 8 -> width 4 -> c_out 16 with stride 2: the shortcut is conv1x1 s2 + BN.
  // Batch-norm runs in training mode (batch statistics), so every finite
  // difference recomputes the whole forward, statistics included. The block's
  // inner activations are private; the kink pattern comes from the reference
  // composition, which must also match the block's forward and backward to 1e-4.
  using RB = RefBottleneck;
  auto block = nn::bottleneck_block(RB::Ci, RB::Wd, 2);
  Arena params, buffers;
  nn::ParamRegistry reg{&params, &buffers};
  block->register_params(reg, "");
  params.allocate();
  buffers.allocate();
  Rng rng(21);
  init_arena(params, buffers, rng);
  ASSERT_EQ(block->num_params(), params.size());
  ASSERT_EQ(params.infos().size(), 12u);  // 4 bias-free convs, 4 BNs (weight + bias each)
  ASSERT_EQ(buffers.infos().size(), 12u);  // running mean, var and batch count of each BN

  Tensor x = randn({RB::N, RB::H, RB::H, RB::Ci}, rng);  // odd size: 7 -> 4 on both paths
  nn::Context ctx;
  ctx.training = true;
  ctx.rng = &rng;
  const Tensor& y0 = block->forward(x, ctx);
  ASSERT_EQ(y0.shape(), (Shape{RB::N, RB::OH, RB::OH, RB::Co}));
  const Tensor r = randn(y0.shape(), rng);
  RefBottleneck rb(params);
  LossFn loss = [&](std::vector<uint8_t>* sig) {
    const Tensor& y = block->forward(x, ctx);
    if (sig) rb.forward(x.f32()), rb.signature(*sig);
    double l = 0;
    for (int64_t i = 0; i < y.numel(); ++i) l += double(r.f32()[i]) * double(y.f32()[i]);
    return l;
  };
  loss(nullptr);
  Tensor dx = Tensor::empty(x.shape());
  dx.copy_from(block->backward(r, ctx));
  Tensor g = Tensor::empty({params.size()});
  g.copy_from(params.grads());

  // Against the reference composition.
  {
    const Tensor& y = block->forward(x, ctx);
    rb.forward(x.f32());
    EXPECT_LE(ref::rel_error(y.f32(), rb.y.data(), y.numel()), 1e-4) << "forward";
    std::map<std::string, std::vector<float>> gr;
    std::vector<float> dxr;
    rb.backward(x.f32(), r.f32(), gr, dxr);
    for (const auto& info : params.infos())
      EXPECT_LE(ref::rel_error(g.f32() + info.offset, gr[info.name].data(), info.numel()), 1e-4)
          << "d" << info.name;
    EXPECT_LE(ref::rel_error(dx.f32(), dxr.data(), dx.numel()), 1e-4) << "dx";
  }

  Rng pick_rng(22);
  FdStats st;
  // Every parameter tensor (convs, BN scale and shift, shortcut), a few coordinates each.
  for (const auto& info : params.infos())
    check_fd(params.params().f32(), g.f32(), pick(info.offset, info.offset + info.numel(), 3, pick_rng),
             loss, kBlockSteps, info.name, st);
  check_fd(x.f32(), dx.f32(), pick(0, x.numel(), 20, pick_rng), loss, kBlockSteps, "dx", st);
  std::printf("  bottleneck: %d coordinates checked, %d skipped (kinks), max |grad| %.3g, "
              "worst error %.2f of tolerance\n", st.checked, st.skipped, st.max_grad, st.worst);
  EXPECT_GE(st.checked, (st.checked + st.skipped) * 3 / 4);
  EXPECT_GT(st.max_grad, 0.1);

  // accumulate=true adds the same gradient again.
  loss(nullptr);
  ctx.accumulate = true;
  block->backward(r, ctx);
  ctx.accumulate = false;
  double err = 0, scale = 0;
  for (int64_t i = 0; i < params.size(); ++i) {
    err = std::max(err, double(std::fabs(params.grads().f32()[i] - 2 * g.f32()[i])));
    scale = std::max(scale, double(std::fabs(g.f32()[i])));
  }
  EXPECT_LE(err, 1e-5 * std::max(1.0, scale)) << "accumulate=true";
}

// ------------------------------------------------------------------ fused conv + ReLU + pool

// nn::ConvPool against the reference conv (fused ReLU) followed by a 2x2 max-pool:
// forward, dx, dweight, dbias, and accumulate. The batch is processed in chunks
// that keep a chunk's conv output under 256 KiB, so the first case (100 KiB per
// image) runs chunks of 2, 2 and 1 images: the gradients must sum over chunks.
struct ConvPoolCase {
  int64_t n, h, c_in, c_out, k, pad;
};

void conv_pool_vs_reference(const ConvPoolCase& c) {
  using Vec = std::vector<float>;
  nn::ConvPool mod(c.c_in, c.c_out, c.k, c.pad, 2);
  Arena params, buffers;
  nn::ParamRegistry reg{&params, &buffers};
  mod.register_params(reg, "");
  params.allocate();
  buffers.allocate();
  Rng rng(61);
  init_arena(params, buffers, rng);
  ASSERT_EQ(params.infos().size(), 2u);
  const float* W = params.params().f32();
  const float* B = W + params.infos()[1].offset;
  const ops::ConvShape cs{c.n, c.h, c.h, c.c_in, c.c_out, c.k, c.k, 1, c.pad};
  const ops::PoolShape ps{c.n, cs.out_h(), cs.out_w(), c.c_out, 2, 2};
  const std::string what = "conv_pool n" + std::to_string(c.n) + " h" + std::to_string(c.h) +
                           " co" + std::to_string(c.c_out);

  nn::Context ctx;
  Tensor x = randn({c.n, c.h, c.h, c.c_in}, rng);
  const Tensor& y = mod.forward(x, ctx);
  ASSERT_EQ(y.shape(), (Shape{c.n, ps.out_h(), ps.out_w(), c.c_out})) << what;
  Vec conv(static_cast<size_t>(c.n * cs.out_h() * cs.out_w() * c.c_out));
  Vec yr(static_cast<size_t>(y.numel()));
  ref::conv2d_forward(cs, true, x.f32(), W, B, conv.data());
  ref::max_pool_forward(ps, conv.data(), yr.data());
  EXPECT_LE(ref::rel_error(y.f32(), yr.data(), y.numel()), 1e-4) << what << " forward";

  Tensor dy = randn(y.shape(), rng);
  Tensor dx = Tensor::empty(x.shape());
  dx.copy_from(mod.backward(dy, ctx));
  Tensor g = Tensor::empty({params.size()});
  g.copy_from(params.grads());
  Vec dconv(conv.size()), dxr(static_cast<size_t>(x.numel())),
      dwr(static_cast<size_t>(params.infos()[0].numel())), dbr(static_cast<size_t>(c.c_out));
  ref::max_pool_backward(ps, conv.data(), dy.f32(), dconv.data());
  ref::relu_backward(dconv.data(), conv.data(), dconv.data(), int64_t(conv.size()));
  ref::conv2d_backward_data(cs, dconv.data(), W, dxr.data());
  ref::conv2d_backward_weights(cs, x.f32(), dconv.data(), dwr.data(), dbr.data());
  EXPECT_LE(ref::rel_error(dx.f32(), dxr.data(), x.numel()), 1e-4) << what << " dx";
  EXPECT_LE(ref::rel_error(g.f32(), dwr.data(), int64_t(dwr.size())), 1e-4) << what << " dweight";
  EXPECT_LE(ref::rel_error(g.f32() + params.infos()[1].offset, dbr.data(), c.c_out), 1e-4)
      << what << " dbias";

  // A different batch size in between (its own op instances), then accumulate.
  Tensor x1 = randn({1, c.h, c.h, c.c_in}, rng);
  mod.forward(x1, ctx);
  mod.forward(x, ctx);
  ctx.accumulate = true;
  mod.backward(dy, ctx);
  double err = 0, scale = 0;
  for (int64_t i = 0; i < params.size(); ++i) {
    err = std::max(err, double(std::fabs(params.grads().f32()[i] - 2 * g.f32()[i])));
    scale = std::max(scale, double(std::fabs(g.f32()[i])));
  }
  EXPECT_LE(err, 1e-5 * std::max(1.0, scale)) << what << " accumulate=true";
}

TEST(ModuleGrad, ConvPoolMatchesReference) {
  conv_pool_vs_reference({5, 28, 1, 32, 3, 1});  // mnist-small's conv1, chunks of 2, 2, 1
  conv_pool_vs_reference({3, 13, 3, 8, 3, 0});   // odd conv output (11): last row unpooled
  conv_pool_vs_reference({2, 12, 10, 20, 5, 0}); // lenet-like 5x5, several input channels
}


}  // namespace
}  // namespace cohort
