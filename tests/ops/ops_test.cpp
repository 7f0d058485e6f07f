// The op harness: one table of cases (every op, several shapes each), run in
// f32 and again in bf16 (cases named ..._bf16), and for every case the same
// three checks:
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
// bf16: the activations (x, y, dy, dx, the residual add's inputs, logits and
// dlogits) cross the op boundary as bf16 buffers (harness.h: In, InOut); the
// weights, biases, batch-norm scale/shift, their gradients and dropout masks
// stay f32, as do the loss value and its gradient. The activation inputs and
// dy are rounded to bf16 values once, so the f32 reference sees exactly what
// the op sees, and what remains is the op's rounding of its outputs to bf16
// (unit roundoff 2^-8 = 3.9e-3) and of the weights it converts to bf16 for
// its products (conv, linear).
//   Reference  - tolerance 1e-2 on the same measure. Measured maxima over the
//                table: linear y 3.9e-3, dx 3.2e-3; conv2d y 3.7e-3, dx 3.7e-3;
//                batch_norm y 3.0e-3, dx 3.0e-3; max_pool dx 3.8e-3 (overlapping
//                windows add two dy), y exact; add y 3.0e-3; dropout 3.2e-3;
//                global_avg_pool y 1.7e-3; loss dlogits 5.4e-4, value exact;
//                relu and transposes exact; embedding y 3.5e-3; layer_norm y
//                2.6e-3, dx 2.7e-3; gelu y 1.1e-3, dx 2.5e-3; attention y
//                3.9e-3, dqkv 2.9e-3 (its probabilities and their gradient
//                enter the products as bf16). The f32 gradients (dweight, dbias,
//                dgamma, dbeta, dwte, dwpe) are within 2e-7: bf16 x bf16
//                products are exact in f32, so only the summation order differs.
//   FiniteDiff - not run (f32 cases only): the forward's bf16 rounding noise is
//                larger than the differences; bf16 is checked against f32.
//   Accumulate - f32 gradients accumulate as in f32 (1e-5); the residual add's
//                bf16 gradients are g0 + g rounded once (2^-8), dx overwritten.
// The table is in op_cases.cpp; targeted tests (the null-weight and
// caller-owned-workspace entry points that chunked batches use, batch-norm
// inference and running statistics, loss values, dropout masks, in-place
// elementwise calls) are in op_specifics_test.cpp.
#include <gtest/gtest.h>

#include "ops/cpu/dnnl_util.h"
#include "ops/harness.h"

namespace cohort::op_harness {
namespace {


// Gradient buffers shaped like the inputs, filled with `v`.
std::vector<Vec> grads_like(const OpHarness& h, float v) {
  std::vector<Vec> g;
  for (auto& i : h.in) g.emplace_back(i.v.size(), v);
  return g;
}

class OpHarnessTest : public ::testing::TestWithParam<OpCase> {
 protected:
  void SetUp() override {
    rng_ = std::make_unique<Rng>(std::hash<std::string>{}(GetParam().name));
    h_ = GetParam().make(*rng_, GetParam().dtype);
  }
  // A random output gradient, as the op's output dtype holds it.
  Vec random_dy() { return rounded(randn(h_->out_size, *rng_), h_->out_dtype); }
  std::unique_ptr<Rng> rng_;
  std::unique_ptr<OpHarness> h_;
};

// The op's forward and backward against the reference's (f32 math on the
// same inputs).
void check_reference(OpHarness& h, Rng& rng) {
  Vec y(static_cast<size_t>(h.out_size), std::numeric_limits<float>::quiet_NaN()), y_ref(static_cast<size_t>(h.out_size));
  const double tol = h.dtype == DType::kBF16 ? kRefTolBf16 : kRefTol;
  h.forward(y);
  h.ref_forward(y_ref);
  EXPECT_LE(ref::rel_error(y.data(), y_ref.data(), h.out_size), tol) << "forward";

  const Vec dy = rounded(randn(h.out_size, rng), h.out_dtype);
  auto g = grads_like(h, std::numeric_limits<float>::quiet_NaN());
  auto g_ref = grads_like(h, 0.0f);
  h.backward(dy, g, /*accumulate=*/false);
  h.ref_backward(dy, g_ref);
  for (size_t i = 0; i < h.in.size(); ++i)
    EXPECT_LE(ref::rel_error(g[i].data(), g_ref[i].data(), int64_t(g[i].size())), tol)
        << "d" << h.in[i].name;
}

TEST_P(OpHarnessTest, Reference) { check_reference(*h_, *rng_); }

// The bf16 cases again on the f32 kernels over bf16 storage that run where
// oneDNN has no bf16 kernel (AVX2-only CPUs: ops/cpu/bf16_fallback.cpp),
// forced here so that AVX-512 machines check the fallback too.
class OpBf16FallbackTest : public OpHarnessTest {
 protected:
  void SetUp() override {
    ops::cpu::force_bf16_fallback(true);
    OpHarnessTest::SetUp();
  }
  void TearDown() override { ops::cpu::force_bf16_fallback(false); }
};

TEST_P(OpBf16FallbackTest, Reference) { check_reference(*h_, *rng_); }

// Finite differences run on the f32 cases only: a bf16 forward's rounding
// is larger than the differences; bf16 is checked against the f32 reference.
class OpFiniteDiffTest : public OpHarnessTest {};

TEST_P(OpFiniteDiffTest, FiniteDiff) {
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
  const Vec dy = random_dy();
  auto fresh = grads_like(h, 0.0f);
  h.backward(dy, fresh, /*accumulate=*/false);

  std::vector<Vec> g0, g;
  for (auto& i : h.in) {
    // Existing contents for accumulating gradients (as the gradient's dtype
    // holds them); garbage for overwritten ones.
    const DType gdt = i.activation ? h.dtype : DType::kF32;
    g0.push_back(i.accumulates ? rounded(randn(int64_t(i.v.size()), *rng_), gdt)
                               : Vec(i.v.size(), 1e30f));
  }
  g = g0;
  h.backward(dy, g, /*accumulate=*/true);
  for (size_t t = 0; t < h.in.size(); ++t) {
    Vec expect(g[t].size());
    for (size_t j = 0; j < expect.size(); ++j)
      expect[j] = h.in[t].accumulates ? g0[t][j] + fresh[t][j] : fresh[t][j];
    // f32 weight gradients accumulate as in f32; a bf16 one is g0 + g rounded once.
    const bool low = h.in[t].accumulates && h.in[t].activation && h.dtype == DType::kBF16;
    EXPECT_LE(ref::rel_error(g[t].data(), expect.data(), int64_t(expect.size())),
              low ? kBf16Round : kAccTol)
        << "d" << h.in[t].name
        << (h.in[t].accumulates ? " should be g0 + g" : " should be overwritten");
  }
  // And accumulate=false right after still overwrites.
  h.backward(dy, g, /*accumulate=*/false);
  for (size_t t = 0; t < h.in.size(); ++t)
    EXPECT_LE(ref::rel_error(g[t].data(), fresh[t].data(), int64_t(g[t].size())), kAccTol)
        << "d" << h.in[t].name << " after accumulate=false";
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }

std::vector<OpCase> cases_of(DType dtype) {
  std::vector<OpCase> of;
  for (auto& c : all_cases())
    if (c.dtype == dtype) of.push_back(c);
  return of;
}
std::vector<OpCase> f32_cases() { return cases_of(DType::kF32); }
std::vector<OpCase> bf16_cases() { return cases_of(DType::kBF16); }

INSTANTIATE_TEST_SUITE_P(OpCases, OpHarnessTest, ::testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(OpCases, OpBf16FallbackTest, ::testing::ValuesIn(bf16_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(OpCases, OpFiniteDiffTest, ::testing::ValuesIn(f32_cases()), case_name);

}  // namespace
}  // namespace cohort::op_harness
