// The op harness's shared pieces: tolerances, the OpHarness interface one
// op instance implements, and the table of cases (op_cases.cpp). The checks
// themselves are in ops_test.cpp; see its header.
#pragma once
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


namespace cohort::op_harness {


constexpr double kRefTol = 1e-4;   // cohort vs reference, relative to max(1, max|ref|)
constexpr double kFdEps = 1e-2;    // central-difference step (inputs are O(1) floats)
constexpr double kFdEpsKinked = 1e-3;  // step for conv/linear with a fused ReLU
constexpr double kFdTol = 2e-2;    // |analytic - fd| <= kFdTol * max(1, |fd|)
constexpr double kAccTol = 1e-5;   // accumulate=true vs g0 + fresh gradient
constexpr int kFdCoords = 20;      // coordinates probed per tensor

using Vec = std::vector<float>;

inline Vec randn(int64_t n, Rng& rng, float scale = 1.0f) {
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


// Every op, several shapes each (op_cases.cpp).
std::vector<OpCase> all_cases();

}  // namespace cohort::op_harness
