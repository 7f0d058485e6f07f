// Layer features for transformers: Linear over N-D input, Residual without a
// post-activation, normal(0, std) init, tied parameters, and op caches that
// tell dtypes apart. Checked against the reference loops of tests/ops.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "nn/sequential.h"
#include "ops/reference.h"

namespace cohort {
namespace {

using Vec = std::vector<float>;

Tensor randn(const Shape& s, Rng& rng) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.normal();
  return t;
}

// Registers m's parameters in `params` and draws them (PyTorch's defaults).
void build(nn::Module& m, Arena& params, Arena& buffers, uint64_t seed = 3) {
  nn::ParamRegistry reg{&params, &buffers};
  m.register_params(reg, "");
  params.allocate();
  buffers.allocate();
  Rng rng(seed);
  m.init_params(rng, nn::InitStyle::kTorch);
}

void expect_near(const float* got, const float* want, int64_t n, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::abs(want[i]))) << what << "[" << i << "]";
}

TEST(LinearND, ThreeDimensionalInputIsTheReshapedMatrixProduct) {
  const int64_t B = 2, T = 3, I = 5, O = 4;
  for (bool relu : {false, true}) {
    nn::Linear lin(I, O, relu);
    Arena params, buffers;
    build(lin, params, buffers);
    const float* w = params.param(0).f32();
    const float* b = params.param(1).f32();
    Rng rng(7);
    Tensor x = randn({B, T, I}, rng), dy = randn({B, T, O}, rng);
    nn::Context ctx;
    const Tensor& y = lin.forward(x, ctx);
    ASSERT_EQ(y.shape(), (Shape{B, T, O}));
    EXPECT_EQ(lin.output_shape({B, T, I}), (Shape{B, T, O}));
    const ops::LinearShape s{B * T, I, O};
    Vec y_ref(size_t(B * T * O)), dx_ref(size_t(B * T * I));
    Vec dw_ref(size_t(O * I)), db_ref(static_cast<size_t>(O));
    ref::linear_forward(s, relu, x.f32(), w, b, y_ref.data());
    expect_near(y.f32(), y_ref.data(), B * T * O, "y");
    // The reference's backward takes the gradient after the ReLU.
    Vec g(dy.f32(), dy.f32() + dy.numel());
    for (size_t i = 0; relu && i < g.size(); ++i) g[i] = y_ref[i] > 0 ? g[i] : 0.0f;
    ref::linear_backward_data(s, g.data(), w, dx_ref.data());
    ref::linear_backward_weights(s, x.f32(), g.data(), dw_ref.data(), db_ref.data());
    const Tensor& dx = lin.backward(dy, ctx);
    ASSERT_EQ(dx.shape(), (Shape{B, T, I}));
    expect_near(dx.f32(), dx_ref.data(), dx.numel(), "dx");
    expect_near(params.grad(0).f32(), dw_ref.data(), O * I, "dweight");
    expect_near(params.grad(1).f32(), db_ref.data(), O, "dbias");
    // And bitwise the same as feeding the {B*T, I} matrix.
    Vec y3(y.f32(), y.f32() + y.numel());
    const Tensor& y2 = lin.forward(x.reshape({B * T, I}), ctx);
    ASSERT_EQ(y2.shape(), (Shape{B * T, O}));
    for (int64_t i = 0; i < y2.numel(); ++i) EXPECT_EQ(y2.f32()[i], y3[size_t(i)]);
  }
  nn::Linear lin(I, O);
  EXPECT_THROW(lin.output_shape({B, T, I + 1}), Error);
}

// out = branch(x) + x with no ReLU after the sum (pre-norm transformer block).
TEST(Residual, WithoutPostActivationKeepsNegativeSums) {
  const int64_t N = 6, C = 4;
  auto branch = std::make_unique<nn::Sequential>();
  branch->add<nn::Linear>("fc", C, C);
  nn::Residual res(std::move(branch), nullptr, nn::PostActivation::kNone);
  Arena params, buffers;
  build(res, params, buffers);
  const float* w = params.param(0).f32();
  const float* b = params.param(1).f32();
  Rng rng(11);
  Tensor x = randn({N, C}, rng), dy = randn({N, C}, rng);
  nn::Context ctx;
  const Tensor& y = res.forward(x, ctx);
  const ops::LinearShape s{N, C, C};
  Vec y_ref(size_t(N * C)), dx_ref(size_t(N * C));
  ref::linear_forward(s, false, x.f32(), w, b, y_ref.data());
  bool negative = false;
  for (int64_t i = 0; i < N * C; ++i) {
    y_ref[size_t(i)] += x.f32()[i];
    negative |= y_ref[size_t(i)] < 0;
  }
  ASSERT_TRUE(negative);  // else this test could not tell a ReLU from none
  expect_near(y.f32(), y_ref.data(), N * C, "y");
  ref::linear_backward_data(s, dy.f32(), w, dx_ref.data());
  for (int64_t i = 0; i < N * C; ++i) dx_ref[size_t(i)] += dy.f32()[i];
  const Tensor& dx = res.backward(dy, ctx);
  expect_near(dx.f32(), dx_ref.data(), N * C, "dx");
}

TEST(Residual, DefaultPostActivationIsReLU) {
  auto branch = std::make_unique<nn::Sequential>();
  branch->add<nn::Linear>("fc", 4, 4);
  nn::Residual res(std::move(branch), nullptr);
  Arena params, buffers;
  build(res, params, buffers);
  Rng rng(12);
  Tensor x = randn({8, 4}, rng);
  nn::Context ctx;
  const Tensor& y = res.forward(x, ctx);
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_GE(y.f32()[i], 0.0f);
}

// A layer with one parameter drawn from normal(0, std), optionally tied to
// an earlier parameter ("tied_to").
class Probe final : public nn::Module {
 public:
  Probe(int64_t n, float std, std::string tied_to = "") : n_(n), std_(std), tied_(tied_to) {}
  std::string type() const override { return "probe"; }
  Shape output_shape(const Shape& in) const override { return in; }
  const Tensor& forward(const Tensor& x, nn::Context&) override { return x; }
  const Tensor& backward(const Tensor& dy, nn::Context&) override { return dy; }
  Tensor w_, dw_;

 protected:
  std::vector<Param> params() override {
    return {{"weight", {n_}, nn::Init::kNormal, 1, &w_, &dw_, std_, tied_}};
  }

 private:
  int64_t n_;
  float std_;
  std::string tied_;
};

TEST(Init, NormalHasTheAskedMeanAndStd) {
  const int64_t n = 200000;
  Probe p(n, 0.02f);
  Arena params, buffers;
  build(p, params, buffers);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += p.w_.f32()[i];
    sq += double(p.w_.f32()[i]) * p.w_.f32()[i];
  }
  const double mean = sum / n, std = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 4 * 0.02 / std::sqrt(double(n)));  // 4 standard errors
  EXPECT_NEAR(std, 0.02, 0.02 * 0.01);
  // The style (Torch or Keras) does not change a normal init.
  Probe q(n, 0.02f);
  Arena qp, qb;
  nn::ParamRegistry reg{&qp, &qb};
  q.register_params(reg, "");
  qp.allocate();
  Rng rng(3);
  q.init_params(rng, nn::InitStyle::kKeras);
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(q.w_.f32()[i], p.w_.f32()[i]);
}

TEST(Init, TiedParameterSharesTheOwnersSlotAndValues) {
  nn::Sequential seq;
  seq.add<Probe>("wte", 6, 0.02f).add<Probe>("lm_head", 6, 1.0f, "wte.weight");
  Arena params, buffers;
  build(seq, params, buffers);
  auto& wte = static_cast<Probe&>(seq.child(0));
  auto& head = static_cast<Probe&>(seq.child(1));
  EXPECT_EQ(params.infos().size(), 1u);  // one slot, as in a GPT-2 checkpoint's weights
  EXPECT_EQ(params.size(), 6);
  EXPECT_EQ(head.w_.data(), wte.w_.data());
  EXPECT_EQ(head.dw_.data(), wte.dw_.data());
  // Drawn once, by the owner: std 0.02, not the tie's 1.0.
  for (int64_t i = 0; i < 6; ++i) EXPECT_LT(std::abs(head.w_.f32()[i]), 0.02f * 6);
  EXPECT_EQ(seq.child(1).num_params(), 0);  // the tie adds no range of its own
}

// Op caches are keyed by shape *and* dtype: a bf16 input of a shape already
// run in f32 gets a bf16 op of its own (not the f32 primitive), and an f16
// one asks for an op the CPU backend refuses.
TEST(OpCache, AnotherDtypeOfTheSameShapeBuildsAnotherOp) {
  nn::Conv2d conv(3, 4, 3, 1, 1);
  Arena params, buffers;
  build(conv, params, buffers);
  Rng rng(5);
  nn::Context ctx;
  Tensor x = randn({2, 5, 5, 3}, rng);
  EXPECT_EQ(conv.forward(x, ctx).dtype(), DType::kF32);
  Tensor xb = Tensor::zeros({2, 5, 5, 3}, DType::kBF16);
  EXPECT_EQ(conv.forward(xb, ctx).dtype(), DType::kBF16);
  Tensor xh = Tensor::zeros({2, 5, 5, 3}, DType::kF16);
  try {
    conv.forward(xh, ctx);
    FAIL() << "an f16 input ran";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "conv2d: dtype f16 is not supported by the CPU ops (f32 and bf16 only)");
  }
}

}  // namespace
}  // namespace cohort
