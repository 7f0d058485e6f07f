// Finite-difference gradient checks through whole modules and models, and
// the kink bookkeeping they need (shared by module_test and model_grad_test).
//
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
#pragma once
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


namespace cohort::grad_check {


// Gradient-check tolerance for float forwards:
// |analytic - fd| <= kRelTol * max(|analytic|, |fd|) + kAbsTol.
constexpr double kRelTol = 3e-2;
constexpr double kAbsTol = 1e-3;
// Steps tried in turn until one leaves the kink pattern unchanged. Models (a
// mean cross-entropy of O(1)) have kinks everywhere and little rounding noise,
// so smaller steps are tried; sum(r * block(x)) over a batch-normalized block
// has rounding noise near 1e-5, which only a 1e-2 step keeps under kAbsTol.
inline const std::vector<double> kModelSteps = {1e-2, 1e-3, 3e-4};
inline const std::vector<double> kBlockSteps = {1e-2};

inline Tensor randn(const Shape& s, Rng& rng, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.normal() * scale;
  return t;
}

inline std::vector<int64_t> pick(int64_t begin, int64_t end, int count, Rng& rng) {
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
inline void check_fd(float* p, const float* grad, const std::vector<int64_t>& coords, const LossFn& loss,
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

inline void append_signs(const Tensor& t, std::vector<uint8_t>& sig) {
  for (int64_t i = 0; i < t.numel(); ++i) sig.push_back(t.f32()[i] > 0);
}

// Argmax of every k x k, stride-k window of `x` {N,H,W,C} pooled to {N,OH,OW,C}.
inline void append_pool_argmax(const float* x, int64_t N, int64_t H, int64_t W, int64_t C, int64_t OH,
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
inline void init_arena(Arena& params, Arena& buffers, Rng& rng) {
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

inline const ParamInfo& info_named(Arena& a, const std::string& name) {
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
inline const Tensor& forward_recording(nn::Model& m, const Tensor& x, nn::Context& ctx,
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


}  // namespace cohort::grad_check
