// The op harness: one table of cases (every op, several shapes each), and for
// every case the same three checks:
//   Reference  - the cohort op's forward and every backward output match the
//                plain-loop reference (tests/ops/reference.h) to 1e-4, measured
//                as max|a-b| / max(1, max|b|); backward without accumulate must
//                overwrite whatever the gradient buffers held (they start NaN).
//   FiniteDiff - with a random projection r and L(inputs) = sum(r * op(inputs)),
//                the backward's gradients match central differences
//                (L(x+e) - L(x-e)) / 2e computed with the cohort forward, on ~20
//                random coordinates per differentiable tensor: e = 1e-2, or 1e-3
//                for conv/linear with a fused ReLU; a coordinate whose step flips
//                the sign pattern of a ReLU output is skipped, and max-pool inputs
//                are distinct values 0.05 apart so no step changes an argmax.
//                Tolerance |a - fd| <= 2e-2 * max(1, |fd|).
//   Accumulate - accumulate=true adds into existing gradient contents (weights,
//                biases, batch-norm scale/shift, the residual add's two inputs)
//                and still overwrites dx; accumulate=false then overwrites again.
// Targeted tests follow the table: the null-weight and caller-owned-workspace
// entry points that chunked batches use, batch-norm inference and running
// statistics, loss values, dropout masks and in-place elementwise calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "ops/batch_norm.h"
#include "ops/conv2d.h"
#include "ops/elementwise.h"
#include "ops/linear.h"
#include "ops/loss.h"
#include "ops/pool.h"
#include "ops/reference.h"

namespace cohort {
namespace {

constexpr double kRefTol = 1e-4;   // cohort vs reference, relative to max(1, max|ref|)
constexpr double kFdEps = 1e-2;    // central-difference step (inputs are O(1) floats)
constexpr double kFdEpsKinked = 1e-3;  // step for conv/linear with a fused ReLU
constexpr double kFdTol = 2e-2;    // |analytic - fd| <= kFdTol * max(1, |fd|)
constexpr double kAccTol = 1e-5;   // accumulate=true vs g0 + fresh gradient
constexpr int kFdCoords = 20;      // coordinates probed per tensor

using Vec = std::vector<float>;

Vec randn(int64_t n, Rng& rng, float scale = 1.0f) {
  Vec v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.normal() * scale;
  return v;
}

// One op instance on concrete inputs. `in` are the differentiable inputs (x,
// weight, bias, ...); non-differentiable ones (labels, masks) live in the subclass.
class OpHarness {
 public:
  struct Input {
    std::string name;
    Vec v;
    bool accumulates;  // backward(accumulate=true) adds into this gradient
  };
  virtual ~OpHarness() = default;

  // The cohort op's forward on `in` (output size out_size).
  virtual void forward(Vec& y) = 0;
  // The cohort op's backward for output gradient dy; runs forward itself first
  // (ops keep state from forward: argmax, batch statistics, reordered weights).
  virtual void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) = 0;
  virtual void ref_forward(Vec& y) = 0;
  virtual void ref_backward(const Vec& dy, std::vector<Vec>& g) = 0;
  // Piecewise-linear outputs (ReLU): a finite difference whose step changes the
  // sign pattern of the output straddles a kink, and is skipped.
  virtual bool has_kinks() const { return false; }
  // Step for the finite differences. Ops with a fused ReLU use a smaller one:
  // a weight or bias touches every output of its channel, and at 1e-2 some of
  // them would cross zero for most coordinates.
  virtual double fd_eps() const { return kFdEps; }

  std::vector<Input> in;
  int64_t out_size = 0;
};

using Factory = std::function<std::unique_ptr<OpHarness>(Rng&)>;

struct OpCase {
  std::string name;
  Factory make;
};

// ------------------------------------------------------------------ conv2d

class ConvHarness : public OpHarness {
 public:
  ConvHarness(const ops::ConvShape& s, bool bias, bool relu, Rng& rng)
      : s_(s), bias_(bias), relu_(relu), op_(ops::make_conv2d(Device::kCpu, s, relu)) {
    in.push_back({"x", randn(s.n * s.h * s.w * s.c_in, rng), false});
    const float wscale = 1.0f / std::sqrt(float(s.c_in * s.kh * s.kw));
    in.push_back({"weight", randn(s.c_out * s.c_in * s.kh * s.kw, rng, wscale), true});
    if (bias) in.push_back({"bias", randn(s.c_out, rng, 0.5f), true});
    out_size = s.n * s.out_h() * s.out_w() * s.c_out;
  }
  const float* b() const { return bias_ ? in[2].v.data() : nullptr; }
  void forward(Vec& y) override { op_->forward(in[0].v.data(), in[1].v.data(), b(), y.data()); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    Vec y(static_cast<size_t>(out_size)), dyr = dy;
    forward(y);
    if (relu_) ops::relu_backward(dy.data(), y.data(), dyr.data(), out_size);
    op_->backward_weights(in[0].v.data(), dyr.data(), g[1].data(), bias_ ? g[2].data() : nullptr,
                          accumulate);
    op_->backward_data(dyr.data(), in[1].v.data(), g[0].data());
  }
  void ref_forward(Vec& y) override {
    ref::conv2d_forward(s_, relu_, in[0].v.data(), in[1].v.data(), b(), y.data());
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    Vec y(static_cast<size_t>(out_size)), dyr = dy;
    ref_forward(y);
    if (relu_) ref::relu_backward(dy.data(), y.data(), dyr.data(), out_size);
    ref::conv2d_backward_data(s_, dyr.data(), in[1].v.data(), g[0].data());
    ref::conv2d_backward_weights(s_, in[0].v.data(), dyr.data(), g[1].data(),
                                 bias_ ? g[2].data() : nullptr);
  }
  bool has_kinks() const override { return relu_; }
  double fd_eps() const override { return relu_ ? kFdEpsKinked : kFdEps; }

 private:
  ops::ConvShape s_;
  bool bias_, relu_;
  std::unique_ptr<ops::Conv2d> op_;
};

// ------------------------------------------------------------------ linear

class LinearHarness : public OpHarness {
 public:
  LinearHarness(const ops::LinearShape& s, bool bias, bool relu, Rng& rng)
      : s_(s), bias_(bias), relu_(relu), op_(ops::make_linear(Device::kCpu, s, relu)) {
    in.push_back({"x", randn(s.n * s.in, rng), false});
    in.push_back({"weight", randn(s.out * s.in, rng, 1.0f / std::sqrt(float(s.in))), true});
    if (bias) in.push_back({"bias", randn(s.out, rng, 0.5f), true});
    out_size = s.n * s.out;
  }
  const float* b() const { return bias_ ? in[2].v.data() : nullptr; }
  void forward(Vec& y) override { op_->forward(in[0].v.data(), in[1].v.data(), b(), y.data()); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    Vec y(static_cast<size_t>(out_size)), dyr = dy;
    forward(y);
    if (relu_) ops::relu_backward(dy.data(), y.data(), dyr.data(), out_size);
    op_->backward_weights(in[0].v.data(), dyr.data(), g[1].data(), bias_ ? g[2].data() : nullptr,
                          accumulate);
    op_->backward_data(dyr.data(), in[1].v.data(), g[0].data());
  }
  void ref_forward(Vec& y) override {
    ref::linear_forward(s_, relu_, in[0].v.data(), in[1].v.data(), b(), y.data());
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    Vec y(static_cast<size_t>(out_size)), dyr = dy;
    ref_forward(y);
    if (relu_) ref::relu_backward(dy.data(), y.data(), dyr.data(), out_size);
    ref::linear_backward_data(s_, dyr.data(), in[1].v.data(), g[0].data());
    ref::linear_backward_weights(s_, in[0].v.data(), dyr.data(), g[1].data(),
                                 bias_ ? g[2].data() : nullptr);
  }
  bool has_kinks() const override { return relu_; }
  double fd_eps() const override { return relu_ ? kFdEpsKinked : kFdEps; }

 private:
  ops::LinearShape s_;
  bool bias_, relu_;
  std::unique_ptr<ops::Linear> op_;
};

// ------------------------------------------------------------------ max-pool

class MaxPoolHarness : public OpHarness {
 public:
  MaxPoolHarness(const ops::PoolShape& s, Rng& rng)
      : s_(s), op_(ops::make_max_pool2d(Device::kCpu, s)) {
    // Distinct values 0.05 apart, shuffled: no ties, and a +-kFdEps step never
    // changes which element of a window is the maximum.
    const int64_t n = s.n * s.h * s.w * s.c;
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    rng.shuffle(perm);
    Vec x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = 0.05f * float(perm[size_t(i)] - n / 2);
    in.push_back({"x", x, false});
    out_size = s.n * s.out_h() * s.out_w() * s.c;
  }
  void forward(Vec& y) override { op_->forward(in[0].v.data(), y.data()); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    Vec y(static_cast<size_t>(out_size));
    forward(y);
    op_->backward(dy.data(), g[0].data());
  }
  void ref_forward(Vec& y) override { ref::max_pool_forward(s_, in[0].v.data(), y.data()); }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::max_pool_backward(s_, in[0].v.data(), dy.data(), g[0].data());
  }

 private:
  ops::PoolShape s_;
  std::unique_ptr<ops::MaxPool2d> op_;
};

// ------------------------------------------------------------------ global average pool

class AvgPoolHarness : public OpHarness {
 public:
  AvgPoolHarness(int64_t n, int64_t h, int64_t w, int64_t c, Rng& rng) : n_(n), hw_(h * w), c_(c) {
    in.push_back({"x", randn(n * h * w * c, rng), false});
    out_size = n * c;
  }
  void forward(Vec& y) override {
    ops::global_avg_pool_forward(in[0].v.data(), y.data(), n_, hw_, c_);
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    ops::global_avg_pool_backward(dy.data(), g[0].data(), n_, hw_, c_);
  }
  void ref_forward(Vec& y) override {
    ref::global_avg_pool_forward(in[0].v.data(), y.data(), n_, hw_, c_);
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::global_avg_pool_backward(dy.data(), g[0].data(), n_, hw_, c_);
  }

 private:
  int64_t n_, hw_, c_;
};

// ------------------------------------------------------------------ batch-norm (training)

class BatchNormHarness : public OpHarness {
 public:
  BatchNormHarness(const ops::BatchNormShape& s, Rng& rng)
      : s_(s), op_(ops::make_batch_norm(Device::kCpu, s)) {
    // Per-channel offsets and scales, so the statistics differ by channel.
    Vec x = randn(s.n * s.h * s.w * s.c, rng);
    for (int64_t p = 0; p < s.n * s.h * s.w; ++p)
      for (int64_t c = 0; c < s.c; ++c)
        x[size_t(p * s.c + c)] = x[size_t(p * s.c + c)] * (0.5f + 0.25f * float(c % 4)) +
                                 0.3f * float(c % 3) - 0.3f;
    in.push_back({"x", x, false});
    Vec gamma = randn(s.c, rng, 0.3f);
    for (auto& v : gamma) v += 1.0f;
    in.push_back({"gamma", gamma, true});
    in.push_back({"beta", randn(s.c, rng, 0.5f), true});
    out_size = s.n * s.h * s.w * s.c;
    running_mean_.assign(static_cast<size_t>(s.c), 0.0f);
    running_var_.assign(static_cast<size_t>(s.c), 1.0f);
  }
  void forward(Vec& y) override {
    op_->forward_train(in[0].v.data(), in[1].v.data(), in[2].v.data(), y.data(),
                       running_mean_.data(), running_var_.data());
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    Vec y(static_cast<size_t>(out_size));
    forward(y);
    op_->backward(in[0].v.data(), dy.data(), in[1].v.data(), g[0].data(), g[1].data(),
                  g[2].data(), accumulate);
  }
  void ref_forward(Vec& y) override {
    ref::batch_norm_train_forward(s_, in[0].v.data(), in[1].v.data(), in[2].v.data(), y.data());
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::batch_norm_backward(s_, in[0].v.data(), dy.data(), in[1].v.data(), g[0].data(),
                             g[1].data(), g[2].data());
  }

 private:
  ops::BatchNormShape s_;
  std::unique_ptr<ops::BatchNorm> op_;
  Vec running_mean_, running_var_;
};

// ------------------------------------------------------------------ relu

class ReluHarness : public OpHarness {
 public:
  ReluHarness(int64_t n, Rng& rng) : n_(n) {
    in.push_back({"x", randn(n, rng), false});
    out_size = n;
  }
  void forward(Vec& y) override { ops::relu_forward(in[0].v.data(), y.data(), n_); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    Vec y(static_cast<size_t>(n_));
    forward(y);
    ops::relu_backward(dy.data(), y.data(), g[0].data(), n_);
  }
  void ref_forward(Vec& y) override { ref::relu_forward(in[0].v.data(), y.data(), n_); }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    Vec y(static_cast<size_t>(n_));
    ref_forward(y);
    ref::relu_backward(dy.data(), y.data(), g[0].data(), n_);
  }
  bool has_kinks() const override { return true; }

 private:
  int64_t n_;
};

// ------------------------------------------------------------------ residual add
// y = a + b; da = db = dy. Accumulating gradients is add_inplace (how a
// residual's two paths meet), so the accumulate check exercises it.

class AddHarness : public OpHarness {
 public:
  AddHarness(int64_t n, Rng& rng) : n_(n) {
    in.push_back({"a", randn(n, rng), true});
    in.push_back({"b", randn(n, rng), true});
    out_size = n;
  }
  void forward(Vec& y) override { ops::add(in[0].v.data(), in[1].v.data(), y.data(), n_); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    for (auto* d : {&g[0], &g[1]}) {
      if (accumulate) ops::add_inplace(d->data(), dy.data(), n_);
      else std::copy(dy.begin(), dy.end(), d->begin());
    }
  }
  void ref_forward(Vec& y) override { ref::add(in[0].v.data(), in[1].v.data(), y.data(), n_); }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override { g[0] = dy, g[1] = dy; }

 private:
  int64_t n_;
};

// ------------------------------------------------------------------ dropout apply
// The mask is fixed (drawn once by ops::dropout_mask); backward applies it to dy.

class DropoutHarness : public OpHarness {
 public:
  // channels: Dropout2d over {n, hw, c} with a {n, c} mask.
  DropoutHarness(int64_t n, int64_t hw, int64_t c, float p, bool channels, Rng& rng)
      : n_(n), hw_(hw), c_(c), channels_(channels) {
    in.push_back({"x", randn(n * hw * c, rng), false});
    mask_.resize(static_cast<size_t>(channels ? n * c : n * hw * c));
    ops::dropout_mask(mask_.data(), int64_t(mask_.size()), p, rng);
    out_size = n * hw * c;
  }
  void apply(const float* x, float* y) {
    if (channels_) ops::dropout2d_apply(x, mask_.data(), y, n_, hw_, c_);
    else ops::dropout_apply(x, mask_.data(), y, out_size);
  }
  void ref_apply(const float* x, float* y) {
    if (channels_) ref::dropout2d_apply(x, mask_.data(), y, n_, hw_, c_);
    else ref::dropout_apply(x, mask_.data(), y, out_size);
  }
  void forward(Vec& y) override { apply(in[0].v.data(), y.data()); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override { apply(dy.data(), g[0].data()); }
  void ref_forward(Vec& y) override { ref_apply(in[0].v.data(), y.data()); }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref_apply(dy.data(), g[0].data());
  }

 private:
  int64_t n_, hw_, c_;
  bool channels_;
  Vec mask_;
};

// ------------------------------------------------------------------ layout transposes
// Flatten's forward is nhwc_to_nchw and its backward nchw_to_nhwc: the inverse
// permutation is the adjoint, which the finite differences confirm.

class TransposeHarness : public OpHarness {
 public:
  TransposeHarness(int64_t n, int64_t h, int64_t w, int64_t c, bool to_nchw, Rng& rng)
      : n_(n), h_(h), w_(w), c_(c), to_nchw_(to_nchw) {
    in.push_back({"x", randn(n * h * w * c, rng), false});
    out_size = n * h * w * c;
  }
  void forward(Vec& y) override {
    if (to_nchw_) ops::nhwc_to_nchw(in[0].v.data(), y.data(), n_, h_, w_, c_);
    else ops::nchw_to_nhwc(in[0].v.data(), y.data(), n_, c_, h_, w_);
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    if (to_nchw_) ops::nchw_to_nhwc(dy.data(), g[0].data(), n_, c_, h_, w_);
    else ops::nhwc_to_nchw(dy.data(), g[0].data(), n_, h_, w_, c_);
  }
  void ref_forward(Vec& y) override {
    if (to_nchw_) ref::nhwc_to_nchw(in[0].v.data(), y.data(), n_, h_, w_, c_);
    else ref::nchw_to_nhwc(in[0].v.data(), y.data(), n_, c_, h_, w_);
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    if (to_nchw_) ref::nchw_to_nhwc(dy.data(), g[0].data(), n_, c_, h_, w_);
    else ref::nhwc_to_nchw(dy.data(), g[0].data(), n_, h_, w_, c_);
  }

 private:
  int64_t n_, h_, w_, c_;
  bool to_nchw_;
};

// ------------------------------------------------------------------ softmax cross-entropy
// Output: the scalar grad_scale * loss_sum; backward: dy[0] * dlogits.

class LossHarness : public OpHarness {
 public:
  LossHarness(int64_t n, int64_t k, Rng& rng) : n_(n), k_(k), scale_(1.0f / float(n)) {
    in.push_back({"logits", randn(n * k, rng, 2.0f), false});
    labels_.resize(static_cast<size_t>(n));
    for (auto& l : labels_) l = int32_t(rng.below(uint64_t(k)));
    out_size = 1;
  }
  void forward(Vec& y) override {
    y[0] = float(ops::softmax_cross_entropy(in[0].v.data(), labels_.data(), n_, k_, nullptr, scale_)
                     .loss_sum * scale_);
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    ops::softmax_cross_entropy(in[0].v.data(), labels_.data(), n_, k_, g[0].data(), scale_);
    for (auto& v : g[0]) v *= dy[0];
  }
  void ref_forward(Vec& y) override {
    y[0] = float(ref::softmax_cross_entropy(in[0].v.data(), labels_.data(), n_, k_, nullptr, scale_)
                     .loss_sum * scale_);
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::softmax_cross_entropy(in[0].v.data(), labels_.data(), n_, k_, g[0].data(), scale_);
    for (auto& v : g[0]) v *= dy[0];
  }

 private:
  int64_t n_, k_;
  float scale_;
  std::vector<int32_t> labels_;
};

// ------------------------------------------------------------------ the table

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  auto name_of = [](std::initializer_list<std::pair<const char*, int64_t>> kv) {
    std::ostringstream os;
    for (auto& [k, v] : kv) os << "_" << k << v;
    return os.str();
  };

  struct Conv {
    int64_t n, h, w, ci, co, k, stride, pad;
    bool bias, relu;
  };
  const Conv convs[] = {
      {1, 5, 5, 1, 4, 3, 1, 0, true, false},     // batch 1, one input channel, valid
      {3, 7, 6, 3, 5, 3, 2, 1, true, true},      // odd sizes, stride 2, pad 1, fused ReLU
      {2, 6, 6, 8, 16, 1, 1, 0, false, false},   // 1x1, no bias (ResNet style)
      {2, 9, 9, 6, 10, 1, 2, 0, false, false},   // 1x1 stride 2 (downsample shortcut)
      {4, 9, 9, 4, 6, 3, 1, 1, true, true},      // 'same' 3x3, batch 4
      {1, 11, 7, 2, 3, 5, 2, 2, true, false},    // 5x5, pad 2, stride 2, non-square
      {3, 5, 5, 3, 7, 5, 1, 0, true, true},      // kernel covers the whole image
      {2, 8, 8, 32, 64, 3, 1, 1, true, false},   // wide: blocked weight layouts in oneDNN
      {2, 7, 7, 64, 32, 3, 2, 1, false, true},   // wide, stride 2, odd
  };
  for (const auto& c : convs) {
    std::string name = "conv2d" + name_of({{"n", c.n}, {"h", c.h}, {"w", c.w}, {"ci", c.ci},
                                           {"co", c.co}, {"k", c.k}, {"s", c.stride},
                                           {"p", c.pad}}) +
                       (c.bias ? "_bias" : "_nobias") + (c.relu ? "_relu" : "");
    cases.push_back({name, [c](Rng& rng) -> std::unique_ptr<OpHarness> {
                       ops::ConvShape s{c.n, c.h, c.w, c.ci, c.co, c.k, c.k, c.stride, c.pad};
                       return std::make_unique<ConvHarness>(s, c.bias, c.relu, rng);
                     }});
  }

  struct Lin {
    int64_t n, in, out;
    bool bias, relu;
  };
  const Lin lins[] = {
      {1, 7, 3, true, false}, {3, 20, 10, true, true},  {4, 64, 33, true, true},
      {5, 1, 4, false, false}, {2, 50, 10, true, false}, {3, 128, 64, false, true},
  };
  for (const auto& l : lins) {
    std::string name = "linear" + name_of({{"n", l.n}, {"in", l.in}, {"out", l.out}}) +
                       (l.bias ? "_bias" : "_nobias") + (l.relu ? "_relu" : "");
    cases.push_back({name, [l](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<LinearHarness>(ops::LinearShape{l.n, l.in, l.out},
                                                              l.bias, l.relu, rng);
                     }});
  }

  const ops::PoolShape pools[] = {
      {1, 4, 4, 1, 2, 2},  // batch 1, one channel
      {3, 7, 7, 3, 2, 2},  // odd: last row/column dropped
      {2, 9, 8, 4, 3, 2},  // overlapping windows (an element can win twice)
      {2, 5, 5, 2, 3, 1},  // stride 1
      {3, 6, 6, 16, 2, 2},
  };
  for (const auto& p : pools) {
    std::string name = "max_pool" + name_of({{"n", p.n}, {"h", p.h}, {"w", p.w}, {"c", p.c},
                                             {"k", p.k}, {"s", p.stride}});
    cases.push_back({name, [p](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<MaxPoolHarness>(p, rng);
                     }});
  }

  const int64_t gaps[][4] = {{1, 3, 3, 1}, {3, 5, 7, 4}, {2, 1, 1, 8}, {4, 4, 4, 16}};
  for (const auto& g : gaps) {
    std::string name =
        "global_avg_pool" + name_of({{"n", g[0]}, {"h", g[1]}, {"w", g[2]}, {"c", g[3]}});
    cases.push_back({name, [g](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<AvgPoolHarness>(g[0], g[1], g[2], g[3], rng);
                     }});
  }

  const int64_t bns[][4] = {{3, 4, 5, 2}, {1, 6, 6, 3}, {4, 3, 3, 8}, {2, 5, 7, 16}, {8, 1, 1, 5}};
  for (const auto& b : bns) {
    std::string name = "batch_norm" + name_of({{"n", b[0]}, {"h", b[1]}, {"w", b[2]}, {"c", b[3]}});
    cases.push_back({name, [b](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<BatchNormHarness>(
                           ops::BatchNormShape{b[0], b[1], b[2], b[3]}, rng);
                     }});
  }

  for (int64_t n : {1, 17, 1000}) {
    cases.push_back({"relu_n" + std::to_string(n), [n](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<ReluHarness>(n, rng);
                     }});
    cases.push_back({"add_n" + std::to_string(n), [n](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<AddHarness>(n, rng);
                     }});
  }

  struct Drop {
    int64_t n, hw, c;
    float p;
    bool channels;
  };
  const Drop drops[] = {{1, 1, 13, 0.5f, false}, {3, 10, 7, 0.3f, false},
                        {2, 25, 6, 0.5f, true},  {4, 9, 20, 0.2f, true}};
  for (const auto& d : drops) {
    std::string name = std::string(d.channels ? "dropout2d" : "dropout") +
                       name_of({{"n", d.n}, {"hw", d.hw}, {"c", d.c},
                                {"p", int64_t(std::lround(d.p * 100))}});
    cases.push_back({name, [d](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<DropoutHarness>(d.n, d.hw, d.c, d.p, d.channels,
                                                               rng);
                     }});
  }

  const int64_t trs[][4] = {{1, 1, 1, 5}, {2, 3, 4, 5}, {3, 7, 5, 1}, {2, 4, 4, 16}};
  for (const auto& t : trs)
    for (bool to_nchw : {true, false}) {
      std::string name = std::string(to_nchw ? "nhwc_to_nchw" : "nchw_to_nhwc") +
                         name_of({{"n", t[0]}, {"h", t[1]}, {"w", t[2]}, {"c", t[3]}});
      cases.push_back({name, [t, to_nchw](Rng& rng) -> std::unique_ptr<OpHarness> {
                         return std::make_unique<TransposeHarness>(t[0], t[1], t[2], t[3],
                                                                   to_nchw, rng);
                       }});
    }

  const int64_t losses[][2] = {{1, 10}, {3, 5}, {7, 10}, {2, 1}, {16, 100}};
  for (const auto& l : losses) {
    std::string name = "softmax_xent" + name_of({{"n", l[0]}, {"k", l[1]}});
    cases.push_back({name, [l](Rng& rng) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<LossHarness>(l[0], l[1], rng);
                     }});
  }
  return cases;
}

// Gradient buffers shaped like the inputs, filled with `v`.
std::vector<Vec> grads_like(const OpHarness& h, float v) {
  std::vector<Vec> g;
  for (auto& i : h.in) g.emplace_back(i.v.size(), v);
  return g;
}

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class OpHarnessTest : public ::testing::TestWithParam<OpCase> {
 protected:
  void SetUp() override {
    rng_ = std::make_unique<Rng>(std::hash<std::string>{}(GetParam().name));
    h_ = GetParam().make(*rng_);
  }
  std::unique_ptr<Rng> rng_;
  std::unique_ptr<OpHarness> h_;
};

TEST_P(OpHarnessTest, Reference) {
  OpHarness& h = *h_;
  Vec y(static_cast<size_t>(h.out_size), std::numeric_limits<float>::quiet_NaN()), y_ref(static_cast<size_t>(h.out_size));
  h.forward(y);
  h.ref_forward(y_ref);
  EXPECT_LE(ref::rel_error(y.data(), y_ref.data(), h.out_size), kRefTol) << "forward";

  const Vec dy = randn(h.out_size, *rng_);
  auto g = grads_like(h, std::numeric_limits<float>::quiet_NaN());
  auto g_ref = grads_like(h, 0.0f);
  h.backward(dy, g, /*accumulate=*/false);
  h.ref_backward(dy, g_ref);
  for (size_t i = 0; i < h.in.size(); ++i)
    EXPECT_LE(ref::rel_error(g[i].data(), g_ref[i].data(), int64_t(g[i].size())), kRefTol)
        << "d" << h.in[i].name;
}

TEST_P(OpHarnessTest, FiniteDiff) {
  OpHarness& h = *h_;
  const Vec r = randn(h.out_size, *rng_);
  auto g = grads_like(h, 0.0f);
  h.backward(r, g, /*accumulate=*/false);

  Vec y(static_cast<size_t>(h.out_size));
  auto loss = [&]() {
    h.forward(y);
    double l = 0;
    for (int64_t i = 0; i < h.out_size; ++i) l += double(r[size_t(i)]) * double(y[size_t(i)]);
    return l;
  };
  auto pattern = [&]() {
    std::vector<bool> p(y.size());
    for (size_t i = 0; i < y.size(); ++i) p[i] = y[i] > 0;
    return p;
  };
  h.forward(y);
  const std::vector<bool> base = pattern();

  for (size_t t = 0; t < h.in.size(); ++t) {
    Vec& x = h.in[t].v;
    const int64_t n = int64_t(x.size());
    std::vector<int64_t> coords;
    if (n <= kFdCoords) {
      coords.resize(static_cast<size_t>(n));
      std::iota(coords.begin(), coords.end(), 0);
    } else {
      for (int i = 0; i < kFdCoords; ++i) coords.push_back(int64_t(rng_->below(uint64_t(n))));
    }
    int checked = 0;
    const double eps = h.fd_eps();
    for (int64_t j : coords) {
      const float orig = x[size_t(j)];
      x[size_t(j)] = orig + float(eps);
      const double lp = loss();
      const bool kink_p = h.has_kinks() && pattern() != base;
      x[size_t(j)] = orig - float(eps);
      const double lm = loss();
      const bool kink_m = h.has_kinks() && pattern() != base;
      // The step actually taken, after float rounding of orig +- eps.
      const double step = double(orig + float(eps)) - double(orig - float(eps));
      x[size_t(j)] = orig;
      if (kink_p || kink_m) continue;
      const double fd = (lp - lm) / step;
      const double a = g[t][size_t(j)];
      EXPECT_LE(std::fabs(a - fd), kFdTol * std::max(1.0, std::fabs(fd)))
          << "d" << h.in[t].name << "[" << j << "]: analytic " << a << " vs finite difference "
          << fd;
      ++checked;
    }
    EXPECT_GE(checked, int(coords.size()) / 2) << "too many coordinates of " << h.in[t].name
                                               << " straddled a ReLU kink";
  }
}

TEST_P(OpHarnessTest, Accumulate) {
  OpHarness& h = *h_;
  // Ops without accumulating gradients (pools, elementwise, loss) must still
  // overwrite their dx when asked to accumulate.
  const Vec dy = randn(h.out_size, *rng_);
  auto fresh = grads_like(h, 0.0f);
  h.backward(dy, fresh, /*accumulate=*/false);

  std::vector<Vec> g0, g;
  for (auto& i : h.in) {
    // Existing contents for accumulating gradients; garbage for overwritten ones.
    g0.push_back(i.accumulates ? randn(int64_t(i.v.size()), *rng_) : Vec(i.v.size(), 1e30f));
  }
  g = g0;
  h.backward(dy, g, /*accumulate=*/true);
  for (size_t t = 0; t < h.in.size(); ++t) {
    Vec expect(g[t].size());
    for (size_t j = 0; j < expect.size(); ++j)
      expect[j] = h.in[t].accumulates ? g0[t][j] + fresh[t][j] : fresh[t][j];
    EXPECT_LE(ref::rel_error(g[t].data(), expect.data(), int64_t(expect.size())), kAccTol)
        << "d" << h.in[t].name << (h.in[t].accumulates ? " should be g0 + g" : " should be overwritten");
  }
  // And accumulate=false right after still overwrites.
  h.backward(dy, g, /*accumulate=*/false);
  for (size_t t = 0; t < h.in.size(); ++t)
    EXPECT_LE(ref::rel_error(g[t].data(), fresh[t].data(), int64_t(g[t].size())), kAccTol)
        << "d" << h.in[t].name << " after accumulate=false";
}

INSTANTIATE_TEST_SUITE_P(OpCases, OpHarnessTest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

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
}  // namespace cohort
