// Optimizer updates. Each update is one fused pass over the buffer so it is
// memory-bound and vectorizes; large buffers are split across OpenMP threads.
// The arithmetic mirrors torch.optim's single-tensor code path (same operation
// order, f32 per element, scalars prepared in double) so results track
// PyTorch to a few ulps.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

#if __has_include(<experimental/simd>)
// With AVX-512, GCC 12 reports _mm512_undefined_ps() inside the intrinsics as
// "may be used uninitialized" once they are inlined here; it is deliberate.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <experimental/simd>
#pragma GCC diagnostic pop
#define COHORT_HAVE_STDX_SIMD 1
#else
#define COHORT_HAVE_STDX_SIMD 0
#endif

#include "core/error.h"

namespace cohort {

// Below this many elements thread start-up costs more than the update itself.
constexpr int64_t kParallelThreshold = 1 << 16;
// Elements per OpenMP work item where the loop body is not a plain omp simd loop.
constexpr int64_t kBlock = 1 << 14;

Optimizer::~Optimizer() = default;

std::vector<Tensor*> Optimizer::state() { return {}; }
std::vector<std::string> Optimizer::state_names() const { return {}; }

void Optimizer::init_state(int64_t n) {
  COHORT_CHECK(n >= 0, "optimizer state size ", n);
  if (n_ == n) return;
  COHORT_CHECK(n_ < 0, name(), " state was allocated for ", n_, " elements, not ", n);
  allocate_state(n);
  n_ = n;
}

void Optimizer::set_steps(int64_t steps) {
  COHORT_CHECK(steps >= 0, "optimizer step count ", steps);
  steps_ = steps;
}

// Allocates state on first use, checks n, counts the step.
void Optimizer::begin_step(int64_t n) {
  init_state(n);
  ++steps_;
}

void Optimizer::step(float* params, const float* grads, int64_t n, float lr) {
  begin_step(n);
  update(params, grads, 0, n, lr);
}

// ---- SGD ----

Sgd::Sgd(float momentum, float weight_decay, bool nesterov)
    : momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov) {
  COHORT_INPUT_CHECK(momentum >= 0.0f, "sgd: momentum must be >= 0 (got ", momentum, ")");
  COHORT_INPUT_CHECK(weight_decay >= 0.0f, "sgd: weight decay must be >= 0 (got ",
                     weight_decay, ")");
  COHORT_INPUT_CHECK(!nesterov || momentum > 0.0f, "sgd: nesterov needs momentum > 0");
}

void Sgd::allocate_state(int64_t n) {
  if (momentum_ != 0.0f) momentum_buffer_ = Tensor::zeros({n});
}

std::vector<Tensor*> Sgd::state() {
  if (momentum_ == 0.0f || n_ < 0) return {};
  return {&momentum_buffer_};
}

std::vector<std::string> Sgd::state_names() const {
  if (momentum_ == 0.0f) return {};
  return {"momentum_buffer"};
}

void Sgd::update(float* params, const float* grads, int64_t offset, int64_t n, float lr) {
  const float wd = weight_decay_, mom = momentum_;
  if (mom == 0.0f) {
#pragma omp parallel for simd if (n >= kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) params[i] -= lr * (grads[i] + wd * params[i]);
    return;
  }
  float* buf = momentum_buffer_.f32() + offset;
  // PyTorch's first step sets buf = g, whatever a restore left in the buffer.
  if (steps_ == 1) std::fill(buf, buf + n, 0.0f);
  if (nesterov_) {
#pragma omp parallel for simd if (n >= kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      float g = grads[i] + wd * params[i];
      float b = mom * buf[i] + g;
      buf[i] = b;
      params[i] -= lr * (g + mom * b);
    }
  } else {
#pragma omp parallel for simd if (n >= kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      float g = grads[i] + wd * params[i];
      float b = mom * buf[i] + g;
      buf[i] = b;
      params[i] -= lr * b;
    }
  }
}

// ---- Adam / AdamW ----

static void check_adam_args(const char* who, float beta1, float beta2, float eps,
                            float weight_decay) {
  COHORT_INPUT_CHECK(beta1 >= 0.0f && beta1 < 1.0f, who, ": beta1 must be in [0, 1) (got ",
                     beta1, ")");
  COHORT_INPUT_CHECK(beta2 >= 0.0f && beta2 < 1.0f, who, ": beta2 must be in [0, 1) (got ",
                     beta2, ")");
  COHORT_INPUT_CHECK(eps >= 0.0f, who, ": eps must be >= 0 (got ", eps, ")");
  COHORT_INPUT_CHECK(weight_decay >= 0.0f, who, ": weight decay must be >= 0 (got ",
                     weight_decay, ")");
}

Adam::Adam(float beta1, float beta2, float eps, float weight_decay)
    : Adam("adam", beta1, beta2, eps, weight_decay) {}

Adam::Adam(const char* who, float beta1, float beta2, float eps, float weight_decay)
    : beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  check_adam_args(who, beta1, beta2, eps, weight_decay);
}

void Adam::allocate_state(int64_t n) {
  exp_avg_ = Tensor::zeros({n});
  exp_avg_sq_ = Tensor::zeros({n});
}

std::vector<Tensor*> Adam::state() {
  if (n_ < 0) return {};
  return {&exp_avg_, &exp_avg_sq_};
}

std::vector<std::string> Adam::state_names() const { return {"exp_avg", "exp_avg_sq"}; }

void Adam::update(float* params, const float* grads, int64_t offset, int64_t n, float lr) {
  adam_update(params, grads, offset, n, lr, weight_decay_, 1.0f);
}

namespace {

#if COHORT_HAVE_STDX_SIMD
namespace stdx = std::experimental;
#endif

// Per-step Adam constants, prepared in double as Python prepares them before
// PyTorch applies them in f32.
struct AdamScalars {
  float b1, b2, one_minus_b1, one_minus_b2, eps, step_size, bias2_sqrt, l2, shrink;
};

// One element of the update; the SIMD body below repeats it operation for operation.
inline void adam_element(const AdamScalars& s, float& param, float grad, float& m, float& v) {
  float p = param * s.shrink;
  float g = grad + s.l2 * p;
  m = s.b1 * m + s.one_minus_b1 * g;
  v = s.b2 * v + s.one_minus_b2 * g * g;
  float denom = std::sqrt(v) / s.bias2_sqrt + s.eps;
  param = p - s.step_size * (m / denom);
}

// Adam over [begin, end). GCC will not vectorize std::sqrt while it may set
// errno (the default -fmath-errno), which made the plain loop ~4x slower, so
// the body uses explicit SIMD where the standard library offers it.
void adam_range(const AdamScalars& s, float* params, const float* grads, float* m, float* v,
                int64_t begin, int64_t end) {
  int64_t i = begin;
#if COHORT_HAVE_STDX_SIMD
  using V = stdx::native_simd<float>;
  constexpr int64_t kWidth = int64_t(V::size());
  constexpr auto kUnaligned = stdx::element_aligned;
  for (; i + kWidth <= end; i += kWidth) {
    V p(params + i, kUnaligned), g(grads + i, kUnaligned);
    V mi(m + i, kUnaligned), vi(v + i, kUnaligned);
    p = p * s.shrink;
    g = g + s.l2 * p;
    mi = s.b1 * mi + s.one_minus_b1 * g;
    vi = s.b2 * vi + s.one_minus_b2 * g * g;
    V denom = stdx::sqrt(vi) / s.bias2_sqrt + s.eps;
    p = p - s.step_size * (mi / denom);
    mi.copy_to(m + i, kUnaligned);
    vi.copy_to(v + i, kUnaligned);
    p.copy_to(params + i, kUnaligned);
  }
#endif
  for (; i < end; ++i) adam_element(s, params[i], grads[i], m[i], v[i]);
}

}  // namespace

void Adam::adam_update(float* params, const float* grads, int64_t offset, int64_t n, float lr,
                       float l2, float shrink) {
  const double bias1 = 1.0 - std::pow(double(beta1_), double(steps_));
  const double bias2 = 1.0 - std::pow(double(beta2_), double(steps_));
  const AdamScalars s{beta1_,
                      beta2_,
                      1.0f - beta1_,
                      1.0f - beta2_,
                      eps_,
                      float(double(lr) / bias1),
                      float(std::sqrt(bias2)),
                      l2,
                      shrink};
  float* m = exp_avg_.f32() + offset;
  float* v = exp_avg_sq_.f32() + offset;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (int64_t b = 0; b < blocks; ++b)
    adam_range(s, params, grads, m, v, b * kBlock, std::min(n, (b + 1) * kBlock));
}

AdamW::AdamW(float beta1, float beta2, float eps, float weight_decay)
    : Adam("adamw", beta1, beta2, eps, weight_decay) {}

void AdamW::update(float* params, const float* grads, int64_t offset, int64_t n, float lr) {
  adam_update(params, grads, offset, n, lr, 0.0f, float(1.0 - double(lr) * double(weight_decay_)));
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, float weight_decay,
                                          float momentum, float beta1, float beta2, float eps) {
  if (name == "sgd") return std::make_unique<Sgd>(momentum, weight_decay);
  if (name == "adam") return std::make_unique<Adam>(beta1, beta2, eps, weight_decay);
  if (name == "adamw") return std::make_unique<AdamW>(beta1, beta2, eps, weight_decay);
  throw InputError("unknown --optimizer '" + name + "' (valid: sgd, adam, adamw)");
}

}  // namespace cohort
