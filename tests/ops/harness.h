// The op harness's shared pieces: tolerances, the OpHarness interface one
// op instance implements, the op boundary in the op's dtype (In, InOut), and
// the table of cases (op_cases.cpp). The checks themselves are in
// ops_test.cpp; see its header.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <numeric>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
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
// bf16 cases against the f32 reference on the same bf16-rounded inputs: one
// output rounding (2^-8) plus the ops' bf16 copies of the weights in products.
// Measured maxima (ops_test.cpp's header) are 3.9e-3 at most.
constexpr double kRefTolBf16 = 1e-2;
// One rounding to bf16 (unit roundoff 2^-8): a bf16 gradient that accumulates
// (the residual add's) is g0 + g rounded once.
constexpr double kBf16Round = 1.0 / 256;

using Vec = std::vector<float>;

inline Vec randn(int64_t n, Rng& rng, float scale = 1.0f) {
  Vec v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.normal() * scale;
  return v;
}

// v's values as a tensor of `dtype` holds them (bf16: rounded to nearest even).
inline Vec rounded(Vec v, DType dtype) {
  if (dtype == DType::kBF16)
    for (auto& x : v) x = from_bf16(to_bf16(x));
  return v;
}

// An activation operand at the op boundary, in the op's dtype: in f32 the Vec
// itself; in bf16 a copy rounded into a bf16 buffer.
class In {
 public:
  In(const Vec& v, DType dtype) : f32_(v.data()), low_(dtype == DType::kBF16) {
    if (!low_) return;
    bf16_.resize(v.size());
    f32_to_bf16(v.data(), bf16_.data(), v.size());
  }
  operator ConstView() const {  // NOLINT: passed straight to the op
    return low_ ? ConstView(bf16_.data()) : ConstView(f32_);
  }

 protected:
  const float* f32_;
  bool low_;
  std::vector<BF16> bf16_;
};

// An output (or accumulated) activation: as In, and in bf16 the op's result is
// converted back into the Vec when the InOut is destroyed, at the end of the
// full expression that holds the op call.
class InOut : public In {
 public:
  InOut(Vec& v, DType dtype) : In(v, dtype), v_(v) {}
  InOut(const InOut&) = delete;
  InOut& operator=(const InOut&) = delete;
  ~InOut() {
    if (low_) bf16_to_f32(bf16_.data(), v_.data(), v_.size());
  }
  operator View() { return low_ ? View(bf16_.data()) : View(v_.data()); }  // NOLINT

 private:
  Vec& v_;
};

// One op instance on concrete inputs. `in` are the differentiable inputs (x,
// weight, bias, ...); non-differentiable ones (labels, masks) live in the subclass.
// `dtype` is the op's compute dtype: its activations (x, y, dy, dx) are of it,
// its weights and their gradients f32. In bf16 the activation inputs are
// rounded to bf16 values once, when added, so the reference sees what the op sees.
class OpHarness {
 public:
  struct Input {
    std::string name;
    Vec v;
    bool accumulates;  // backward(accumulate=true) adds into this gradient
    bool activation;   // of the op's dtype (else an f32 weight)
  };
  explicit OpHarness(DType dtype) : dtype(dtype), out_dtype(dtype) {}
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
  const DType dtype;
  DType out_dtype;  // of y and dy: dtype, but f32 for the loss value

 protected:
  void add_activation(std::string name, Vec v, bool accumulates = false) {
    in.push_back({std::move(name), rounded(std::move(v), dtype), accumulates, true});
  }
  void add_weight(std::string name, Vec v) {
    in.push_back({std::move(name), std::move(v), true, false});
  }
  In act(const Vec& v) const { return In(v, dtype); }
  InOut act_out(Vec& v) const { return InOut(v, dtype); }
};

// Normalizations with f32 scale and shift (batch-norm, layer-norm): inputs
// x, gamma (about 1) and beta {c}. x gets an offset and a scale that vary with
// group(i) (its channel, its row), so the statistics differ between groups.
// Backward runs the op's forward first (it keeps the statistics), then
// Op::backward(src, ddst, gamma, dsrc, dgamma, dbeta, accumulate).
template <class Op>
class NormHarness : public OpHarness {
 public:
  template <class Group>
  NormHarness(DType dtype, std::unique_ptr<Op> op, int64_t n, int64_t c, Group group, Rng& rng)
      : OpHarness(dtype), op_(std::move(op)) {
    Vec x = randn(n, rng);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = group(i);
      x[size_t(i)] = x[size_t(i)] * (0.5f + 0.25f * float(k % 4)) + 0.3f * float(k % 3) - 0.3f;
    }
    add_activation("x", x);
    Vec gamma = randn(c, rng, 0.3f);
    for (auto& v : gamma) v += 1.0f;
    add_weight("gamma", gamma);
    add_weight("beta", randn(c, rng, 0.5f));
    out_size = n;
  }
  void backward(const Vec& dy, std::vector<Vec>& g, bool accumulate) override {
    Vec y(static_cast<size_t>(out_size));
    forward(y);
    op_->backward(act(in[0].v), act(dy), in[1].v.data(), act_out(g[0]), g[1].data(), g[2].data(),
                  accumulate);
  }

 protected:
  std::unique_ptr<Op> op_;
};

using Factory = std::function<std::unique_ptr<OpHarness>(Rng&, DType)>;

struct OpCase {
  std::string name;  // "_bf16" at the end for bf16 cases
  Factory make;
  DType dtype = DType::kF32;
};

// GoogleTest prints a case by its name (found by ADL: outside any unnamed
// namespace, or test names carry the struct's bytes).
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// "_n3_h7..." from the case's dimensions.
inline std::string name_of(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::ostringstream os;
  for (auto& [k, v] : kv) os << "_" << k << v;
  return os.str();
}

// Every op, several shapes each, in f32 and in bf16 (op_cases.cpp).
std::vector<OpCase> all_cases();
// The transformer ops' cases, added to the table by all_cases (transformer_cases.cpp).
void transformer_cases(std::vector<OpCase>& cases);

}  // namespace cohort::op_harness
