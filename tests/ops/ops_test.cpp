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
// The table is in op_cases.cpp; targeted tests (the null-weight and
// caller-owned-workspace entry points that chunked batches use, batch-norm
// inference and running statistics, loss values, dropout masks, in-place
// elementwise calls) are in op_specifics_test.cpp.
#include <gtest/gtest.h>

#include "ops/harness.h"

namespace cohort::op_harness {
namespace {


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

}  // namespace
}  // namespace cohort::op_harness
