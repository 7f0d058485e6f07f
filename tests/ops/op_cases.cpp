// The op harness's table: one OpHarness per op (forward, backward, their
// plain-loop references), several shapes each, every case in f32 and bf16.
#include "nn/loss.h"
#include "ops/harness.h"

namespace cohort::op_harness {
namespace {

// ------------------------------------------------------------------ conv2d and linear
// y = relu?(op(x, weight) + bias): Conv2d and Linear take the same calls; the
// references and sizes differ (make_conv, make_linear below).

template <class Shape>
struct WeightedRef {
  void (*forward)(const Shape&, bool relu, const float* x, const float* w, const float* b,
                  float* y);
  void (*backward_data)(const Shape&, const float* dy, const float* w, float* dx);
  void (*backward_weights)(const Shape&, const float* x, const float* dy, float* dw, float* db);
};

template <class Op, class Shape>
class WeightedHarness : public OpHarness {
 public:
  // weight {c_out, fan_in} in effect, scaled 1/sqrt(fan_in).
  WeightedHarness(const Shape& s, bool bias, bool relu, std::unique_ptr<Op> op,
                  WeightedRef<Shape> ref, int64_t x_size, int64_t c_out, int64_t fan_in,
                  int64_t y_size, Rng& rng)
      : OpHarness(s.dtype), s_(s), bias_(bias), relu_(relu), op_(std::move(op)), ref_(ref) {
    add_activation("x", randn(x_size, rng));
    add_weight("weight", randn(c_out * fan_in, rng, 1.0f / std::sqrt(float(fan_in))));
    if (bias) add_weight("bias", randn(c_out, rng, 0.5f));
    out_size = y_size;
  }
  const float* b() const { return bias_ ? in[2].v.data() : nullptr; }
  void forward(Vec& y) override { op_->forward(act(in[0].v), in[1].v.data(), b(), act_out(y)); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    const Vec dyr = through_relu(dy);
    op_->backward_weights(act(in[0].v), act(dyr), g[1].data(), bias_ ? g[2].data() : nullptr,
                          accumulate);
    op_->backward_data(act(dyr), in[1].v.data(), act_out(g[0]));
  }
  void ref_forward(Vec& y) override {
    ref_.forward(s_, relu_, in[0].v.data(), in[1].v.data(), b(), y.data());
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    const Vec dyr = through_relu(dy);
    ref_.backward_data(s_, dyr.data(), in[1].v.data(), g[0].data());
    ref_.backward_weights(s_, in[0].v.data(), dyr.data(), g[1].data(),
                          bias_ ? g[2].data() : nullptr);
  }
  bool has_kinks() const override { return relu_; }
  double fd_eps() const override { return relu_ ? kFdEpsKinked : kFdEps; }

 private:
  // Runs the op's forward (the backward needs its state) and returns dy
  // through the fused ReLU's backward, masked where that forward's output is
  // <= 0. The reference takes the same mask: in bf16 an output within rounding
  // of zero may land on either side, which is the forward's rounding (the
  // forward comparison checks it), not an error of the backward.
  Vec through_relu(const Vec& dy) {
    Vec y(static_cast<size_t>(out_size)), dyr = dy;
    forward(y);
    if (relu_) ref::relu_backward(dy.data(), y.data(), dyr.data(), out_size);
    return dyr;
  }

  Shape s_;
  bool bias_, relu_;
  std::unique_ptr<Op> op_;
  WeightedRef<Shape> ref_;
};

std::unique_ptr<OpHarness> make_conv(const ops::ConvShape& s, bool bias, bool relu, Rng& rng) {
  return std::make_unique<WeightedHarness<ops::Conv2d, ops::ConvShape>>(
      s, bias, relu, ops::make_conv2d(Device::kCpu, s, relu),
      WeightedRef<ops::ConvShape>{ref::conv2d_forward, ref::conv2d_backward_data,
                                  ref::conv2d_backward_weights},
      s.n * s.h * s.w * s.c_in, s.c_out, s.c_in * s.kh * s.kw,
      s.n * s.out_h() * s.out_w() * s.c_out, rng);
}

std::unique_ptr<OpHarness> make_linear(const ops::LinearShape& s, bool bias, bool relu, Rng& rng) {
  return std::make_unique<WeightedHarness<ops::Linear, ops::LinearShape>>(
      s, bias, relu, ops::make_linear(Device::kCpu, s, relu),
      WeightedRef<ops::LinearShape>{ref::linear_forward, ref::linear_backward_data,
                                    ref::linear_backward_weights},
      s.n * s.in, s.out, s.in, s.n * s.out, rng);
}

// ------------------------------------------------------------------ max-pool

class MaxPoolHarness : public OpHarness {
 public:
  MaxPoolHarness(const ops::PoolShape& s, Rng& rng)
      : OpHarness(s.dtype), s_(s), op_(ops::make_max_pool2d(Device::kCpu, s)) {
    // Distinct values 0.05 apart, shuffled: no ties, and a +-kFdEps step never
    // changes which element of a window is the maximum. bf16 would round such
    // values into ties, so there they are distinct bf16 values instead
    // (consecutive bit patterns from 0.25 up, either sign).
    const int64_t n = s.n * s.h * s.w * s.c;
    std::vector<int64_t> perm(static_cast<size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    rng.shuffle(perm);
    Vec x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = perm[size_t(i)] - n / 2;
      x[size_t(i)] = dtype == DType::kBF16
                         ? std::copysign(from_bf16(BF16{uint16_t(0x3e80 + std::abs(j))}), float(j))
                         : 0.05f * float(j);
    }
    add_activation("x", x);
    out_size = s.n * s.out_h() * s.out_w() * s.c;
  }
  void forward(Vec& y) override { op_->forward(act(in[0].v), act_out(y)); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    Vec y(static_cast<size_t>(out_size));
    forward(y);
    op_->backward(act(dy), act_out(g[0]));
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
  AvgPoolHarness(int64_t n, int64_t h, int64_t w, int64_t c, DType dtype, Rng& rng)
      : OpHarness(dtype), n_(n), hw_(h * w), c_(c) {
    add_activation("x", randn(n * h * w * c, rng));
    out_size = n * c;
  }
  void forward(Vec& y) override {
    ops::global_avg_pool_forward(act(in[0].v), act_out(y), n_, hw_, c_);
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    ops::global_avg_pool_backward(act(dy), act_out(g[0]), n_, hw_, c_);
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

// ------------------------------------------------------------------ adaptive average pool

class AdaptivePoolHarness : public OpHarness {
 public:
  AdaptivePoolHarness(const ops::AdaptivePoolShape& s, DType dtype, Rng& rng)
      : OpHarness(dtype), s_(s) {
    add_activation("x", randn(s.n * s.h * s.w * s.c, rng));
    out_size = s.n * s.out_h * s.out_w * s.c;
  }
  void forward(Vec& y) override { ops::adaptive_avg_pool_forward(act(in[0].v), act_out(y), s_); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    ops::adaptive_avg_pool_backward(act(dy), act_out(g[0]), s_);
  }
  void ref_forward(Vec& y) override {
    ref::adaptive_avg_pool_forward(s_, in[0].v.data(), y.data());
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    ref::adaptive_avg_pool_backward(s_, dy.data(), g[0].data());
  }

 private:
  ops::AdaptivePoolShape s_;
};

// ------------------------------------------------------------------ batch-norm (training)

class BatchNormHarness : public NormHarness<ops::BatchNorm> {
 public:
  BatchNormHarness(const ops::BatchNormShape& s, Rng& rng)
      : NormHarness(s.dtype, ops::make_batch_norm(Device::kCpu, s), s.n * s.h * s.w * s.c, s.c,
                    [&](int64_t i) { return i % s.c; }, rng),
        s_(s) {
    running_mean_.assign(static_cast<size_t>(s.c), 0.0f);
    running_var_.assign(static_cast<size_t>(s.c), 1.0f);
  }
  void forward(Vec& y) override {
    op_->forward_train(act(in[0].v), in[1].v.data(), in[2].v.data(), act_out(y),
                       running_mean_.data(), running_var_.data());
  }
  // A fused ReLU: relu(batch_norm(x)); backward masks dy where the op's own
  // output is 0 (in bf16 an output within rounding of zero could fall on
  // either side of it in the op and the reference).
  void ref_forward(Vec& y) override {
    ref::batch_norm_train_forward(s_, in[0].v.data(), in[1].v.data(), in[2].v.data(), y.data());
    if (s_.relu)
      for (auto& v : y) v = std::max(v, 0.0f);
  }
  void ref_backward(const Vec& dy, std::vector<Vec>& g) override {
    Vec dyr = dy;
    if (s_.relu) {
      Vec y(static_cast<size_t>(out_size));
      forward(y);
      ref::relu_backward(dy.data(), y.data(), dyr.data(), out_size);
    }
    ref::batch_norm_backward(s_, in[0].v.data(), dyr.data(), in[1].v.data(), g[0].data(),
                             g[1].data(), g[2].data());
  }
  bool has_kinks() const override { return s_.relu; }
  double fd_eps() const override { return s_.relu ? kFdEpsKinked : kFdEps; }

 private:
  ops::BatchNormShape s_;
  Vec running_mean_, running_var_;
};

// ------------------------------------------------------------------ relu

class ReluHarness : public OpHarness {
 public:
  ReluHarness(int64_t n, DType dtype, Rng& rng) : OpHarness(dtype), n_(n) {
    add_activation("x", randn(n, rng));
    out_size = n;
  }
  void forward(Vec& y) override { ops::relu_forward(act(in[0].v), act_out(y), n_); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    Vec y(static_cast<size_t>(n_));
    forward(y);
    ops::relu_backward(act(dy), act(y), act_out(g[0]), n_);
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
  AddHarness(int64_t n, DType dtype, Rng& rng) : OpHarness(dtype), n_(n) {
    add_activation("a", randn(n, rng), /*accumulates=*/true);
    add_activation("b", randn(n, rng), /*accumulates=*/true);
    out_size = n;
  }
  void forward(Vec& y) override { ops::add(act(in[0].v), act(in[1].v), act_out(y), n_); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    for (auto* d : {&g[0], &g[1]}) {
      if (accumulate)
        ops::add_inplace(act_out(*d), act(dy), n_);
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
  DropoutHarness(int64_t n, int64_t hw, int64_t c, float p, bool channels, DType dtype, Rng& rng)
      : OpHarness(dtype), n_(n), hw_(hw), c_(c), channels_(channels) {
    add_activation("x", randn(n * hw * c, rng));
    mask_.resize(static_cast<size_t>(channels ? n * c : n * hw * c));
    ops::dropout_mask(mask_.data(), int64_t(mask_.size()), p, rng);
    out_size = n * hw * c;
  }
  void apply(const Vec& x, Vec& y) {
    if (channels_)
      ops::dropout2d_apply(act(x), mask_.data(), act_out(y), n_, hw_, c_);
    else
      ops::dropout_apply(act(x), mask_.data(), act_out(y), out_size);
  }
  void ref_apply(const float* x, float* y) {
    if (channels_) ref::dropout2d_apply(x, mask_.data(), y, n_, hw_, c_);
    else ref::dropout_apply(x, mask_.data(), y, out_size);
  }
  void forward(Vec& y) override { apply(in[0].v, y); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override { apply(dy, g[0]); }
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
  TransposeHarness(int64_t n, int64_t h, int64_t w, int64_t c, bool to_nchw, DType dtype, Rng& rng)
      : OpHarness(dtype), n_(n), h_(h), w_(w), c_(c), to_nchw_(to_nchw) {
    add_activation("x", randn(n * h * w * c, rng));
    out_size = n * h * w * c;
  }
  void forward(Vec& y) override {
    if (to_nchw_)
      ops::nhwc_to_nchw(act(in[0].v), act_out(y), n_, h_, w_, c_);
    else
      ops::nchw_to_nhwc(act(in[0].v), act_out(y), n_, c_, h_, w_);
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    if (to_nchw_)
      ops::nchw_to_nhwc(act(dy), act_out(g[0]), n_, c_, h_, w_);
    else
      ops::nhwc_to_nchw(act(dy), act_out(g[0]), n_, h_, w_, c_);
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
// Output: the scalar grad_scale * loss_sum, in f32 at any dtype; backward:
// dy[0] * dlogits. Through nn::SoftmaxCrossEntropy, the loss models call: it
// takes f32 or bf16 logits and dlogits (converted around ops::softmax_cross_entropy).

class LossHarness : public OpHarness {
 public:
  LossHarness(int64_t n, int64_t k, DType dtype, Rng& rng)
      : OpHarness(dtype), n_(n), k_(k), scale_(1.0f / float(n)) {
    add_activation("logits", randn(n * k, rng, 2.0f));
    out_dtype = DType::kF32;
    labels_.resize(static_cast<size_t>(n));
    for (auto& l : labels_) l = int32_t(rng.below(uint64_t(k)));
    out_size = 1;
  }
  void forward(Vec& y) override { y[0] = float(compute(nullptr) * scale_); }
  void backward(const Vec& dy, std::vector<Vec>& g, bool) override {
    compute(&g[0]);
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
  // The loss sum; dlogits into *d if non-null.
  double compute(Vec* d) {
    const In logits_in = act(in[0].v);
    const ConstView logits = logits_in;
    const Tensor t = Tensor::view(const_cast<void*>(logits.data), {n_, k_}, logits.dtype);
    if (!d) return nn::SoftmaxCrossEntropy().compute(t, labels_.data(), nullptr, scale_).loss_sum;
    InOut dlogits_out = act_out(*d);  // converts back into *d on return
    const View dlogits = dlogits_out;
    Tensor dt = Tensor::view(dlogits.data, {n_, k_}, dlogits.dtype);
    return nn::SoftmaxCrossEntropy().compute(t, labels_.data(), &dt, scale_).loss_sum;
  }

  int64_t n_, k_;
  float scale_;
  std::vector<int32_t> labels_;
};

void conv_cases(std::vector<OpCase>& cases) {
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
    cases.push_back({name, [c](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       ops::ConvShape s{c.n, c.h, c.w, c.ci, c.co, c.k, c.k, c.stride, c.pad, dt};
                       return make_conv(s, c.bias, c.relu, rng);
                     }});
  }
}

void linear_cases(std::vector<OpCase>& cases) {
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
    cases.push_back({name, [l](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       return make_linear({l.n, l.in, l.out, dt}, l.bias, l.relu, rng);
                     }});
  }
}

void pool_cases(std::vector<OpCase>& cases) {
  const ops::PoolShape pools[] = {
      {1, 4, 4, 1, 2, 2},  // batch 1, one channel
      {3, 7, 7, 3, 2, 2},  // odd: last row/column dropped
      {2, 9, 8, 4, 3, 2},  // overlapping windows (an element can win twice)
      {2, 5, 5, 2, 3, 1},  // stride 1
      {3, 6, 6, 16, 2, 2},
      {2, 8, 8, 3, 3, 2, DType::kF32, 1},  // torchvision's stem pool: 3x3/2, padding 1
      {1, 7, 6, 2, 3, 2, DType::kF32, 1},  // odd, padded
  };
  for (const auto& p : pools) {
    std::string name = "max_pool" + name_of({{"n", p.n}, {"h", p.h}, {"w", p.w}, {"c", p.c},
                                             {"k", p.k}, {"s", p.stride}}) +
                       (p.pad ? name_of({{"p", p.pad}}) : "");
    cases.push_back({name, [p](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       ops::PoolShape s = p;
                       s.dtype = dt;
                       return std::make_unique<MaxPoolHarness>(s, rng);
                     }});
  }

  const int64_t gaps[][4] = {{1, 3, 3, 1}, {3, 5, 7, 4}, {2, 1, 1, 8}, {4, 4, 4, 16}};
  for (const auto& g : gaps) {
    std::string name =
        "global_avg_pool" + name_of({{"n", g[0]}, {"h", g[1]}, {"w", g[2]}, {"c", g[3]}});
    cases.push_back({name, [g](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<AvgPoolHarness>(g[0], g[1], g[2], g[3], dt, rng);
                     }});
  }

  // torchvision's VGG pools to 7x7: equal bins (14 -> 7), overlapping ones
  // (5 -> 3), and an output larger than the input (1 -> 7, 2 -> 7: repeats).
  const ops::AdaptivePoolShape adaptive[] = {
      {2, 14, 14, 3, 7, 7}, {1, 5, 6, 4, 3, 2}, {2, 1, 1, 8, 7, 7}, {1, 2, 3, 2, 7, 7}};
  for (const auto& a : adaptive) {
    std::string name = "adaptive_avg_pool" + name_of({{"n", a.n}, {"h", a.h}, {"w", a.w},
                                                      {"c", a.c}, {"oh", a.out_h},
                                                      {"ow", a.out_w}});
    cases.push_back({name, [a](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<AdaptivePoolHarness>(a, dt, rng);
                     }});
  }
}

void batch_norm_and_relu_cases(std::vector<OpCase>& cases) {
  const int64_t bns[][4] = {{3, 4, 5, 2}, {1, 6, 6, 3}, {4, 3, 3, 8}, {2, 5, 7, 16}, {8, 1, 1, 5}};
  for (const auto& b : bns)
    for (bool relu : {false, true}) {
      std::string name = "batch_norm" + std::string(relu ? "_relu" : "") +
                         name_of({{"n", b[0]}, {"h", b[1]}, {"w", b[2]}, {"c", b[3]}});
      cases.push_back({name, [b, relu](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                         ops::BatchNormShape s{b[0], b[1], b[2], b[3]};
                         s.dtype = dt;
                         s.relu = relu;
                         return std::make_unique<BatchNormHarness>(s, rng);
                       }});
    }

  for (int64_t n : {1, 17, 1000}) {
    cases.push_back(
        {"relu_n" + std::to_string(n), [n](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
           return std::make_unique<ReluHarness>(n, dt, rng);
         }});
    cases.push_back(
        {"add_n" + std::to_string(n), [n](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
           return std::make_unique<AddHarness>(n, dt, rng);
         }});
  }
}

void dropout_and_transpose_cases(std::vector<OpCase>& cases) {
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
    cases.push_back({name, [d](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<DropoutHarness>(d.n, d.hw, d.c, d.p, d.channels, dt,
                                                               rng);
                     }});
  }

  const int64_t trs[][4] = {{1, 1, 1, 5}, {2, 3, 4, 5}, {3, 7, 5, 1}, {2, 4, 4, 16}};
  for (const auto& t : trs)
    for (bool to_nchw : {true, false}) {
      std::string name = std::string(to_nchw ? "nhwc_to_nchw" : "nchw_to_nhwc") +
                         name_of({{"n", t[0]}, {"h", t[1]}, {"w", t[2]}, {"c", t[3]}});
      cases.push_back({name, [t, to_nchw](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                         return std::make_unique<TransposeHarness>(t[0], t[1], t[2], t[3], to_nchw,
                                                                   dt, rng);
                       }});
    }
}

void loss_cases(std::vector<OpCase>& cases) {
  const int64_t losses[][2] = {{1, 10}, {3, 5}, {7, 10}, {2, 1}, {16, 100}};
  for (const auto& l : losses) {
    std::string name = "softmax_xent" + name_of({{"n", l[0]}, {"k", l[1]}});
    cases.push_back({name, [l](Rng& rng, DType dt) -> std::unique_ptr<OpHarness> {
                       return std::make_unique<LossHarness>(l[0], l[1], dt, rng);
                     }});
  }
}

}  // namespace

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  for (auto add : {conv_cases, linear_cases, pool_cases, batch_norm_and_relu_cases,
                   dropout_and_transpose_cases, loss_cases, transformer_cases})
    add(cases);
  // The same table in bf16.
  const size_t n_f32 = cases.size();
  for (size_t i = 0; i < n_f32; ++i)
    cases.push_back({cases[i].name + "_bf16", cases[i].make, DType::kBF16});
  return cases;
}

}  // namespace cohort::op_harness
