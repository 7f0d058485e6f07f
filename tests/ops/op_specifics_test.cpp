// Targeted op tests beside the harness's table: the entry points chunked
// batches use, batch-norm's inference and running statistics, loss values,
// dropout masks and in-place elementwise calls.
#include <gtest/gtest.h>

#include "ops/harness.h"

namespace cohort::op_harness {
namespace {


// ------------------------------------------------------------------ conv / pool entry points for chunking

TEST(OpConv2d, NullWeightReusesPreviousLayout) {
  // nn::ConvPool runs a batch in chunks and passes the weights only to the first
  // chunk's call; later calls pass null and must compute with the same weights.
  Rng rng(18);
  const ops::ConvShape shapes[] = {{2, 6, 6, 1, 4, 3, 3, 1, 1}, {2, 8, 8, 32, 64, 3, 3, 1, 1},
                                   {3, 7, 7, 16, 16, 3, 3, 2, 1}};
  for (const auto& s : shapes) {
    const std::string what = shape_str({s.n, s.h, s.w, s.c_in, s.c_out});
    for (bool relu : {false, true}) {
      auto op = ops::make_conv2d(Device::kCpu, s, relu);
      const int64_t nx = s.n * s.h * s.w * s.c_in, ny = s.n * s.out_h() * s.out_w() * s.c_out;
      Vec w = randn(s.c_out * s.c_in * s.kh * s.kw, rng, 0.3f), b = randn(s.c_out, rng);
      Vec x1 = randn(nx, rng), x2 = randn(nx, rng), dy1 = randn(ny, rng), dy2 = randn(ny, rng);
      Vec y(static_cast<size_t>(ny)), y_ref(static_cast<size_t>(ny));
      Vec dx(static_cast<size_t>(nx)), dx_ref(static_cast<size_t>(nx));
      op->forward(x1.data(), w.data(), b.data(), y.data());
      op->forward(x2.data(), nullptr, b.data(), y.data());
      ref::conv2d_forward(s, relu, x2.data(), w.data(), b.data(), y_ref.data());
      EXPECT_LE(ref::rel_error(y.data(), y_ref.data(), ny), kRefTol) << what << " forward";
      op->backward_data(dy1.data(), w.data(), dx.data());
      op->backward_data(dy2.data(), nullptr, dx.data());
      ref::conv2d_backward_data(s, dy2.data(), w.data(), dx_ref.data());
      EXPECT_LE(ref::rel_error(dx.data(), dx_ref.data(), nx), kRefTol) << what << " backward_data";
    }
  }
}

TEST(OpMaxPool, CallerOwnedWorkspaces) {
  // One instance, two chunks in flight: each chunk's argmax lives in its own
  // workspace, so backward of chunk A after forward of chunk B still routes A's
  // gradient to A's maxima.
  Rng rng(19);
  for (const ops::PoolShape s : {ops::PoolShape{2, 8, 8, 3, 2, 2}, ops::PoolShape{1, 7, 7, 16, 2, 2},
                                 ops::PoolShape{2, 9, 8, 4, 3, 2}}) {
    auto op = ops::make_max_pool2d(Device::kCpu, s);
    const int64_t nx = s.n * s.h * s.w * s.c, ny = s.n * s.out_h() * s.out_w() * s.c;
    ASSERT_GT(op->workspace_bytes(), 0u);
    std::vector<uint8_t> ws_a(op->workspace_bytes()), ws_b(op->workspace_bytes());
    Vec xa = randn(nx, rng), xb = randn(nx, rng), dya = randn(ny, rng), dyb = randn(ny, rng);
    Vec ya(static_cast<size_t>(ny)), yb(static_cast<size_t>(ny)), y_ref(static_cast<size_t>(ny));
    Vec dxa(static_cast<size_t>(nx)), dxb(static_cast<size_t>(nx)), dx_ref(static_cast<size_t>(nx));
    op->forward(xa.data(), ya.data(), ws_a.data());
    op->forward(xb.data(), yb.data(), ws_b.data());
    op->backward(dya.data(), dxa.data(), ws_a.data());
    op->backward(dyb.data(), dxb.data(), ws_b.data());
    ref::max_pool_forward(s, xa.data(), y_ref.data());
    EXPECT_LE(ref::rel_error(ya.data(), y_ref.data(), ny), kRefTol);
    ref::max_pool_forward(s, xb.data(), y_ref.data());
    EXPECT_LE(ref::rel_error(yb.data(), y_ref.data(), ny), kRefTol);
    ref::max_pool_backward(s, xa.data(), dya.data(), dx_ref.data());
    EXPECT_LE(ref::rel_error(dxa.data(), dx_ref.data(), nx), kRefTol) << "chunk A";
    ref::max_pool_backward(s, xb.data(), dyb.data(), dx_ref.data());
    EXPECT_LE(ref::rel_error(dxb.data(), dx_ref.data(), nx), kRefTol) << "chunk B";
    // The instance's own workspace is independent of the caller-owned ones.
    op->forward(xa.data(), ya.data());
    op->forward(xb.data(), yb.data(), ws_b.data());
    op->backward(dya.data(), dxa.data());
    ref::max_pool_backward(s, xa.data(), dya.data(), dx_ref.data());
    EXPECT_LE(ref::rel_error(dxa.data(), dx_ref.data(), nx), kRefTol) << "internal workspace";
  }
}

// ------------------------------------------------------------------ batch-norm specifics

TEST(OpBatchNorm, InferenceUsesRunningStats) {
  Rng rng(11);
  for (const ops::BatchNormShape s : {ops::BatchNormShape{2, 3, 5, 4}, ops::BatchNormShape{1, 1, 1, 7},
                                      ops::BatchNormShape{3, 4, 4, 16}}) {
    auto op = ops::make_batch_norm(Device::kCpu, s);
    const int64_t n = s.n * s.h * s.w * s.c;
    Vec x = randn(n, rng), gamma = randn(s.c, rng), beta = randn(s.c, rng);
    Vec mean = randn(s.c, rng), var(static_cast<size_t>(s.c));
    for (auto& v : var) v = 0.2f + rng.uniform() * 3.0f;
    Vec y(static_cast<size_t>(n)), y_ref(static_cast<size_t>(n));
    op->forward_infer(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), var.data());
    ref::batch_norm_infer_forward(s, x.data(), gamma.data(), beta.data(), mean.data(), var.data(),
                                  y_ref.data());
    EXPECT_LE(ref::rel_error(y.data(), y_ref.data(), n), kRefTol) << shape_str({s.n, s.h, s.w, s.c});
    // Inference must not depend on the batch: each image alone gives the same output.
    if (s.n > 1) {
      ops::BatchNormShape one = s;
      one.n = 1;
      auto op1 = ops::make_batch_norm(Device::kCpu, one);
      const int64_t per = s.h * s.w * s.c;
      Vec y1(static_cast<size_t>(per));
      op1->forward_infer(x.data() + per, gamma.data(), beta.data(), y1.data(), mean.data(),
                         var.data());
      EXPECT_LE(ref::rel_error(y1.data(), y.data() + per, per), kRefTol);
    }
  }
}

TEST(OpBatchNorm, RunningStatsFollowPyTorch) {
  // Hand-checked against torch.nn.BatchNorm2d(1) (momentum 0.1): input values
  // 1, 2, 3, 4 have mean 2.5, biased variance 1.25 (used to normalize) and
  // unbiased variance 5/3 (used for running_var).
  {
    ops::BatchNormShape s{1, 2, 2, 1};
    auto op = ops::make_batch_norm(Device::kCpu, s);
    Vec x = {1, 2, 3, 4}, gamma = {1}, beta = {0}, y(4), rm = {0}, rv = {1};
    op->forward_train(x.data(), gamma.data(), beta.data(), y.data(), rm.data(), rv.data());
    EXPECT_NEAR(rm[0], 0.25, 1e-6);
    EXPECT_NEAR(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
    EXPECT_NEAR(y[0], -1.5 / std::sqrt(1.25 + 1e-5), 1e-5);
    EXPECT_NEAR(y[3], 1.5 / std::sqrt(1.25 + 1e-5), 1e-5);
  }
  // Several steps on several shapes against the reference update.
  Rng rng(12);
  for (const ops::BatchNormShape s : {ops::BatchNormShape{2, 3, 5, 4}, ops::BatchNormShape{4, 1, 1, 6},
                                      ops::BatchNormShape{3, 7, 7, 16}}) {
    auto op = ops::make_batch_norm(Device::kCpu, s);
    const int64_t n = s.n * s.h * s.w * s.c;
    Vec gamma = randn(s.c, rng), beta = randn(s.c, rng), y(static_cast<size_t>(n));
    Vec rm(static_cast<size_t>(s.c), 0.0f), rv(static_cast<size_t>(s.c), 1.0f), rm_ref = rm, rv_ref = rv;
    for (int step = 0; step < 3; ++step) {
      Vec x = randn(n, rng, 2.0f);
      for (auto& v : x) v += 1.5f;
      op->forward_train(x.data(), gamma.data(), beta.data(), y.data(), rm.data(), rv.data());
      ref::batch_norm_running_update(s, x.data(), rm_ref.data(), rv_ref.data());
      EXPECT_LE(ref::rel_error(rm.data(), rm_ref.data(), s.c), 1e-5) << "running_mean step " << step;
      EXPECT_LE(ref::rel_error(rv.data(), rv_ref.data(), s.c), 1e-5) << "running_var step " << step;
    }
  }
}

TEST(OpBatchNorm, TrainingOutputIsNormalized) {
  // Per channel, the training output has mean beta and (biased) variance
  // gamma^2 * var / (var + eps).
  Rng rng(13);
  ops::BatchNormShape s{3, 5, 4, 6};
  auto op = ops::make_batch_norm(Device::kCpu, s);
  const int64_t m = s.n * s.h * s.w, n = m * s.c;
  Vec x = randn(n, rng, 3.0f), gamma = randn(s.c, rng), beta = randn(s.c, rng), y(static_cast<size_t>(n));
  Vec rm(static_cast<size_t>(s.c), 0.0f), rv(static_cast<size_t>(s.c), 1.0f);
  op->forward_train(x.data(), gamma.data(), beta.data(), y.data(), rm.data(), rv.data());
  const ref::BnStats xs = ref::batch_norm_stats(s, x.data()), ys = ref::batch_norm_stats(s, y.data());
  for (int64_t c = 0; c < s.c; ++c) {
    const double var = xs.var[size_t(c)];
    EXPECT_NEAR(ys.mean[size_t(c)], beta[size_t(c)], 1e-5);
    EXPECT_NEAR(ys.var[size_t(c)], double(gamma[size_t(c)]) * gamma[size_t(c)] * var / (var + 1e-5),
                1e-4);
  }
}

// ------------------------------------------------------------------ loss specifics

TEST(OpLoss, ValuesCountsAndScale) {
  // Uniform logits: loss log(K) per row, gradient (1/K - onehot) * scale.
  const int64_t n = 3, k = 10;
  Vec z(static_cast<size_t>(n * k), 0.0f), dz(static_cast<size_t>(n * k));
  std::vector<int32_t> labels = {0, 4, 9};
  auto r = ops::softmax_cross_entropy(z.data(), labels.data(), n, k, dz.data(), 0.5f);
  EXPECT_NEAR(r.loss_sum, 3 * std::log(10.0), 1e-6);
  EXPECT_NEAR(dz[0], (0.1 - 1.0) * 0.5, 1e-7);
  EXPECT_NEAR(dz[1], 0.1 * 0.5, 1e-7);

  // Large logits must not overflow, and argmax counts the correct rows.
  Rng rng(14);
  Vec big = randn(n * k, rng);
  big[0 * k + 0] = 1000.0f;   // row 0: argmax 0 == label 0
  big[1 * k + 2] = 900.0f;    // row 1: argmax 2 != label 4
  big[2 * k + 9] = -1000.0f;  // row 2: label 9 is hopeless
  r = ops::softmax_cross_entropy(big.data(), labels.data(), n, k, dz.data(), 1.0f);
  auto rr = ref::softmax_cross_entropy(big.data(), labels.data(), n, k, nullptr, 1.0f);
  EXPECT_TRUE(std::isfinite(r.loss_sum));
  EXPECT_NEAR(r.loss_sum, rr.loss_sum, 1e-6 * std::max(1.0, rr.loss_sum));
  EXPECT_EQ(r.correct, rr.correct);
  EXPECT_EQ(r.correct, 1);
  for (float v : dz) EXPECT_TRUE(std::isfinite(v));
  // Null dlogits: loss only.
  auto r2 = ops::softmax_cross_entropy(big.data(), labels.data(), n, k, nullptr, 1.0f);
  EXPECT_EQ(r2.loss_sum, r.loss_sum);
}

TEST(OpLoss, LargeBatchMatchesReference) {
  // Past the OpenMP threshold (n * k > 65536) the loss is a parallel reduction.
  Rng rng(15);
  const int64_t n = 1000, k = 100;
  Vec z = randn(n * k, rng, 3.0f), dz(static_cast<size_t>(n * k)), dz_ref(static_cast<size_t>(n * k));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (auto& l : labels) l = int32_t(rng.below(uint64_t(k)));
  auto r = ops::softmax_cross_entropy(z.data(), labels.data(), n, k, dz.data(), 1.0f / n);
  auto rr = ref::softmax_cross_entropy(z.data(), labels.data(), n, k, dz_ref.data(), 1.0f / n);
  EXPECT_NEAR(r.loss_sum, rr.loss_sum, 1e-9 * rr.loss_sum);
  EXPECT_EQ(r.correct, rr.correct);
  EXPECT_LE(ref::rel_error(dz.data(), dz_ref.data(), n * k), 1e-6);
}

// ------------------------------------------------------------------ elementwise specifics

TEST(OpDropout, MaskStatistics) {
  Rng rng(16);
  const int64_t n = 200000;
  Vec mask(static_cast<size_t>(n));
  for (float p : {0.0f, 0.2f, 0.5f}) {
    ops::dropout_mask(mask.data(), n, p, rng);
    int64_t zeros = 0;
    for (float v : mask) {
      if (v == 0.0f) ++zeros;
      else ASSERT_FLOAT_EQ(v, 1.0f / (1.0f - p));
    }
    EXPECT_NEAR(double(zeros) / double(n), p, 0.01) << "p=" << p;
  }
  // Same seed, same mask (runs are reproducible).
  Vec a(100), b(100);
  Rng r1(5), r2(5);
  ops::dropout_mask(a.data(), 100, 0.5f, r1);
  ops::dropout_mask(b.data(), 100, 0.5f, r2);
  EXPECT_EQ(a, b);
}

TEST(OpElementwise, InPlaceAndLargeCalls) {
  // Sizes past the OpenMP threshold (65536), and the aliasing the layers rely on:
  // relu_forward in place (BatchNorm2d, Residual), relu_backward with dsrc == ddst.
  Rng rng(17);
  const int64_t n = 100003;
  Vec x = randn(n, rng), d = randn(n, rng), y(static_cast<size_t>(n)), y_ref(static_cast<size_t>(n));
  ref::relu_forward(x.data(), y_ref.data(), n);
  y = x;
  ops::relu_forward(y.data(), y.data(), n);
  EXPECT_EQ(y, y_ref);
  Vec dx_ref(static_cast<size_t>(n)), dd = d;
  ref::relu_backward(d.data(), y_ref.data(), dx_ref.data(), n);
  ops::relu_backward(dd.data(), y.data(), dd.data(), n);
  EXPECT_EQ(dd, dx_ref);
  Vec s(static_cast<size_t>(n)), s_ref(static_cast<size_t>(n));
  ops::add(x.data(), d.data(), s.data(), n);
  ref::add(x.data(), d.data(), s_ref.data(), n);
  EXPECT_EQ(s, s_ref);
  ops::add_inplace(x.data(), d.data(), n);
  EXPECT_EQ(x, s_ref);
  // Round trip of the flatten transposes.
  const int64_t N = 3, H = 5, W = 7, C = 11;
  Vec t = randn(N * H * W * C, rng), u(t.size()), v(t.size());
  ops::nhwc_to_nchw(t.data(), u.data(), N, H, W, C);
  ops::nchw_to_nhwc(u.data(), v.data(), N, C, H, W);
  EXPECT_EQ(t, v);
}


}  // namespace
}  // namespace cohort::op_harness
