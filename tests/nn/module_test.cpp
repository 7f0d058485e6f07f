// Module-level checks: gradients through nn layers against finite differences
// (a ResNet bottleneck block with its strided shortcut, and whole small models
// with the softmax cross-entropy loss), the bottleneck block, the fused
// conv+ReLU+pool and the whole lenet against compositions of the reference
// loops of tests/ops, the model zoo's parameter counts and forward shapes, and
// Context::grad_ready's announcements during backward.
//
// Finite differences through ReLU and max-pool are only valid while the step
// crosses no kink: a model with thousands of activations has kinks everywhere
// at float precision, so the checks record the discrete state the gradient
// depends on (the sign of every intermediate activation, the argmax of every
// max-pool window; for state a module keeps private, recomputed with the
// reference loops), retry a coordinate with a smaller step if that state
// changed, and skip it if it still does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "nn/models/zoo.h"
#include "nn/sequential.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/reference.h"

namespace cohort {
namespace {

// Gradient-check tolerance for float forwards:
// |analytic - fd| <= kRelTol * max(|analytic|, |fd|) + kAbsTol.
constexpr double kRelTol = 3e-2;
constexpr double kAbsTol = 1e-3;
// Steps tried in turn until one leaves the kink pattern unchanged. Models (a
// mean cross-entropy of O(1)) have kinks everywhere and little rounding noise,
// so smaller steps are tried; sum(r * block(x)) over a batch-normalized block
// has rounding noise near 1e-5, which only a 1e-2 step keeps under kAbsTol.
const std::vector<double> kModelSteps = {1e-2, 1e-3, 3e-4};
const std::vector<double> kBlockSteps = {1e-2};

Tensor randn(const Shape& s, Rng& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.normal() * scale;
  return t;
}

std::vector<int64_t> pick(int64_t begin, int64_t end, int count, Rng& rng) {
  std::vector<int64_t> c;
  const int64_t n = end - begin;
  if (n <= count) {
    for (int64_t j = begin; j < end; ++j) c.push_back(j);
    return c;
  }
  for (int i = 0; i < count; ++i) c.push_back(begin + int64_t(rng.below(uint64_t(n))));
  return c;
}

// A loss as a function of the current parameters and inputs; `sig`, if
// non-null, receives the kink pattern of that evaluation.
using LossFn = std::function<double(std::vector<uint8_t>* sig)>;

struct FdStats {
  int checked = 0, skipped = 0;
  double max_grad = 0;   // largest |analytic| checked: shows the check is not vacuous
  double worst = 0;      // largest |a - fd| / (kRelTol * max(|a|, |fd|) + kAbsTol)
};

// Central differences of loss w.r.t. p[j] for each j in coords, against grad[j].
void check_fd(float* p, const float* grad, const std::vector<int64_t>& coords, const LossFn& loss,
              const std::vector<double>& steps, const std::string& what, FdStats& st) {
  std::vector<uint8_t> base, sp, sm;
  loss(&base);
  for (int64_t j : coords) {
    const float orig = p[j];
    bool done = false;
    for (double eps : steps) {
      p[j] = orig + float(eps);
      const double lp = loss(&sp);
      p[j] = orig - float(eps);
      const double lm = loss(&sm);
      const double step = double(orig + float(eps)) - double(orig - float(eps));
      p[j] = orig;
      if (sp != base || sm != base) continue;  // straddles a kink: try a smaller step
      const double fd = (lp - lm) / step, a = grad[j];
      const double tol = kRelTol * std::max(std::fabs(a), std::fabs(fd)) + kAbsTol;
      st.worst = std::max(st.worst, std::fabs(a - fd) / tol);
      st.max_grad = std::max(st.max_grad, std::fabs(a));
      EXPECT_LE(std::fabs(a - fd), tol)
          << what << "[" << j << "]: analytic " << a << " vs finite difference " << fd
          << " (step " << eps << ")";
      ++st.checked;
      done = true;
      break;
    }
    if (!done) ++st.skipped;
  }
}

void append_signs(const Tensor& t, std::vector<uint8_t>& sig) {
  for (int64_t i = 0; i < t.numel(); ++i) sig.push_back(t.f32()[i] > 0);
}

// Argmax of every k x k, stride-k window of `x` {N,H,W,C} pooled to {N,OH,OW,C}.
void append_pool_argmax(const float* x, int64_t N, int64_t H, int64_t W, int64_t C, int64_t OH,
                        int64_t OW, int64_t k, std::vector<uint8_t>& sig) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          int64_t best = 0;
          float bv = -INFINITY;
          for (int64_t i = 0; i < k * k; ++i) {
            const float v = x[((n * H + oh * k + i / k) * W + ow * k + i % k) * C + c];
            if (v > bv) bv = v, best = i;
          }
          sig.push_back(uint8_t(best));
        }
}

// Random parameters for a standalone module (not through a Model): weights
// U(+-1/sqrt(fan_in)), biases U(+-0.5), batch-norm scales 1 + N(0, 0.1) and
// shifts N(0, 0.1) (off 1 and 0, so their gradients are generic); running
// statistics 0 and 1.
void init_arena(Arena& params, Arena& buffers, Rng& rng) {
  auto ends_with = [](const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  // 1-D "weight": a batch-norm scale (conv and linear weights are 2-D or 4-D).
  auto bn_scale = [&](size_t i) {
    return params.infos()[i].shape.size() == 1 && ends_with(params.infos()[i].name, "weight");
  };
  for (size_t i = 0; i < params.infos().size(); ++i) {
    const ParamInfo& info = params.infos()[i];
    const Tensor t = params.param(i);
    float* v = t.f32();
    if (bn_scale(i)) {
      for (int64_t j = 0; j < t.numel(); ++j) v[j] = 1.0f + 0.1f * rng.normal();
    } else if (i > 0 && bn_scale(i - 1)) {  // its shift
      for (int64_t j = 0; j < t.numel(); ++j) v[j] = 0.1f * rng.normal();
    } else if (info.shape.size() == 1) {  // a conv or linear bias
      for (int64_t j = 0; j < t.numel(); ++j) v[j] = rng.uniform(-0.5f, 0.5f);
    } else {
      const float bound = 1.0f / std::sqrt(float(info.numel() / info.shape[0]));
      for (int64_t j = 0; j < t.numel(); ++j) v[j] = rng.uniform(-bound, bound);
    }
  }
  for (size_t i = 0; i < buffers.infos().size(); ++i)
    buffers.param(i).fill(ends_with(buffers.infos()[i].name, "var") ? 1.0f : 0.0f);
}

const ParamInfo& info_named(Arena& a, const std::string& name) {
  for (const auto& i : a.infos())
    if (i.name == name) return i;
  throw Error("no parameter " + name);
}

// The model's forward, child by child, recording the kink pattern into `sig`:
// the sign of every intermediate activation and the argmax of every max-pool
// window. A fused conv+ReLU+pool (nn::ConvPool) keeps its conv output to
// itself, so that output is recomputed with the reference conv from the
// module's input and its parameters (the zoo's fused pools are 2x2, stride 2;
// the padding is the one that gives the module's output size).
const Tensor& forward_recording(nn::Model& m, const Tensor& x, nn::Context& ctx,
                                std::vector<uint8_t>* sig) {
  if (sig) sig->clear();
  nn::Sequential& s = m.layers();
  const Tensor* h = &x;
  for (size_t i = 0; i < s.size(); ++i) {
    const Tensor& in = *h;
    h = &s.child(i).forward(in, ctx);
    if (!sig || i + 1 == s.size()) continue;  // the logits' signs are no kink
    const std::string type = s.child(i).type();
    if (type == "max_pool2d") {
      const int64_t k = in.dim(1) / h->dim(1);
      append_pool_argmax(in.f32(), in.dim(0), in.dim(1), in.dim(2), in.dim(3), h->dim(1),
                         h->dim(2), k, *sig);
    } else if (type == "conv_relu_pool") {
      const ParamInfo& w = info_named(m.params(), s.child_name(i) + ".weight");
      const ParamInfo& b = info_named(m.params(), s.child_name(i) + ".bias");
      const int64_t co = w.shape[0], k = w.shape[2], pool = 2;
      int64_t pad = 0;
      while ((in.dim(1) + 2 * pad - k + 1) / pool != h->dim(1)) ++pad;
      const ops::ConvShape cs{in.dim(0), in.dim(1), in.dim(2), in.dim(3), co, k, k, 1, pad};
      std::vector<float> conv(static_cast<size_t>(cs.n * cs.out_h() * cs.out_w() * co));
      const float* P = m.params().params().f32();
      ref::conv2d_forward(cs, true, in.f32(), P + w.offset, P + b.offset, conv.data());
      for (float v : conv) sig->push_back(v > 0);
      append_pool_argmax(conv.data(), cs.n, cs.out_h(), cs.out_w(), co, h->dim(1), h->dim(2),
                         pool, *sig);
    }
    append_signs(*h, *sig);
  }
  return *h;
}

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
  ASSERT_EQ(buffers.infos().size(), 8u);  // running mean and var of each BN

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

// ------------------------------------------------------------------ the zoo

struct ZooCase {
  std::string name;
  int64_t params;   // expected parameter count
  int64_t batch;    // forward batch
  bool inference;   // also run the inference forward
  bool backward;    // also check grad_ready over a backward
};

// Backward announces [0, num_params) exactly once, as non-overlapping ranges in
// decreasing order (the order backward finishes them).
void check_grad_ready(nn::Model& m, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  const std::string& name = m.name();
  ASSERT_FALSE(ranges.empty()) << name;
  int64_t expect_end = m.num_params();
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [b, e] = ranges[i];
    EXPECT_LT(b, e) << name << ": empty range #" << i;
    EXPECT_EQ(e, expect_end) << name << ": announcement #" << i << " [" << b << ", " << e
                             << ") does not continue downward from " << expect_end;
    expect_end = b;
  }
  EXPECT_EQ(expect_end, 0) << name << ": announcements do not reach offset 0";
  int64_t covered = 0;
  for (auto [b, e] : ranges) covered += e - b;
  EXPECT_EQ(covered, m.num_params()) << name << ": " << ranges.size()
                                     << " announcements cover " << covered << " elements";
}

void PrintTo(const ZooCase& c, std::ostream* os) { *os << c.name; }

class ZooTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(ZooTest, CountsForwardAndGradReady) {
  const ZooCase& c = GetParam();
  auto m = nn::make_model(c.name, 3);
  std::printf("  %-12s %12lld parameters, %8.3f GFLOP/image forward\n", c.name.c_str(),
              static_cast<long long>(m->num_params()), m->forward_flops_per_image() / 1e9);
  EXPECT_EQ(m->num_params(), c.params);
  EXPECT_EQ(m->num_classes(), 10);
  // The arena holds every registered parameter, contiguously and in order.
  int64_t off = 0;
  for (const auto& info : m->params().infos()) {
    EXPECT_EQ(info.offset, off) << info.name;
    off += info.numel();
  }
  EXPECT_EQ(off, c.params);
  EXPECT_EQ(m->params().params().numel(), c.params);
  if (c.name == "resnet50") {  // torchvision names, so checkpoints map onto PyTorch's
    std::vector<std::string> names;
    for (const auto& info : m->params().infos()) names.push_back(info.name);
    for (const char* n : {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight",
                          "layer1.0.downsample.0.weight", "layer1.0.downsample.1.bias",
                          "layer4.2.bn3.bias", "fc.weight", "fc.bias"})
      EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }

  Shape xs = m->input_shape();
  xs.insert(xs.begin(), c.batch);
  Rng rng(41);
  Tensor x = randn(xs, rng);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  nn::Context ctx;
  ctx.training = true;
  ctx.rng = &rng;
  ctx.grad_ready = [&](int64_t b, int64_t e) { ranges.emplace_back(b, e); };
  auto finite = [](const Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.f32()[i])) return false;
    return true;
  };
  const Tensor& y = m->forward(x, ctx);
  EXPECT_EQ(y.shape(), (Shape{c.batch, 10}));
  EXPECT_TRUE(finite(y)) << "training forward";
  if (c.backward) {
    Tensor dy = randn(y.shape(), rng);
    m->backward(dy, ctx);
    check_grad_ready(*m, ranges);
    EXPECT_TRUE(finite(m->params().grads())) << "gradients";
  }
  if (c.inference) {  // running statistics, no dropout
    ctx.training = false;
    const Tensor& yi = m->forward(x, ctx);
    EXPECT_EQ(yi.shape(), (Shape{c.batch, 10}));
    EXPECT_TRUE(finite(yi)) << "inference forward";
  }
}

// vgg16: VGG-16-BN for CIFAR, 13 convs + BN and a single 512->10 classifier.
// resnets: CIFAR stem (3x3, no bias, no max-pool), 10 classes: torchvision's
// ImageNet counts minus the 1000-way fc and the 7x7 stem's extra 7,680 weights.
INSTANTIATE_TEST_SUITE_P(
    ModuleZoo, ZooTest,
    ::testing::Values(ZooCase{"mnist-small", 402442, 2, true, true},
                      ZooCase{"lenet", 21840, 2, true, true},
                      ZooCase{"mnist-large", 2007050, 2, true, true},
                      ZooCase{"vgg16", 14728266, 2, true, true},
                      // ResNets nest Sequentials (layer1..4 hold the blocks).
                      ZooCase{"resnet50", 23520842, 2, true, true},
                      ZooCase{"resnet101", 42512970, 2, false, false},
                      ZooCase{"resnet152", 58156618, 1, false, false}),
    [](const ::testing::TestParamInfo<ZooCase>& info) {
      std::string s = info.param.name;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

TEST(ModuleZooNames, ListAndUnknownModel) {
  std::vector<std::string> names;
  for (const auto& s : nn::model_zoo()) names.push_back(s->name);
  EXPECT_EQ(names, (std::vector<std::string>{"mnist-small", "mnist-large", "lenet", "vgg16",
                                             "resnet50", "resnet101", "resnet152"}));
  EXPECT_THROW(nn::make_model("resnet18"), InputError);
  // torchvision parameter names, so checkpoints map onto PyTorch's.
  auto m = nn::make_model("mnist-small");
  std::vector<std::string> params;
  for (const auto& i : m->params().infos()) params.push_back(i.name);
  EXPECT_EQ(params, (std::vector<std::string>{"conv1.weight", "conv1.bias", "fc1.weight",
                                              "fc1.bias", "fc2.weight", "fc2.bias"}));
}

}  // namespace
}  // namespace cohort
