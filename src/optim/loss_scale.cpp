#include "optim/loss_scale.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/timeline.h"
#include "optim/clip.h"

namespace cohort {

LossScaler::LossScaler(const LossScaleConfig& cfg, bool enabled) : cfg_(cfg), enabled_(enabled) {
  if (!enabled_) return;
  COHORT_CHECK(cfg_.loss_scale >= 0 && cfg_.loss_scale_window >= 1 && cfg_.hysteresis >= 1 &&
                   cfg_.min_loss_scale > 0,
               "loss scale config");
  scale_ = cfg_.loss_scale > 0 ? cfg_.loss_scale : std::ldexp(1.0f, cfg_.initial_scale_power);
  hysteresis_ = cfg_.hysteresis;
}

bool LossScaler::update(bool overflow) {
  if (overflow) {
    ++skipped_;
    if (dynamic()) {
      if (cfg_.hysteresis == 1 || hysteresis_ == 1)
        scale_ = std::max(scale_ / 2, cfg_.min_loss_scale);
      else
        --hysteresis_;
    }
    last_overflow_iter_ = iter_;
  } else if (dynamic() && (iter_ - last_overflow_iter_) % cfg_.loss_scale_window == 0) {
    hysteresis_ = cfg_.hysteresis;
    scale_ *= 2;
  }
  ++iter_;
  return !overflow;
}

nlohmann::ordered_json LossScaler::summary() const {
  return {{"loss_scale",
           {{"dynamic", dynamic()}, {"scale", scale_}, {"steps", iter_}, {"skipped", skipped_}}}};
}

std::string LossScaler::state() const {
  std::ostringstream os;
  os.precision(9);
  os << scale_ << " " << hysteresis_ << " " << iter_ << " " << last_overflow_iter_ << " "
     << skipped_;
  return os.str();
}

void LossScaler::restore(const std::string& state, const std::string& where) {
  std::istringstream is(state);
  float scale = 0;
  int hysteresis = 0;
  int64_t iter = 0, last = 0, skipped = 0;
  is >> scale >> hysteresis >> iter >> last >> skipped;
  COHORT_INPUT_CHECK(is && std::isfinite(scale) && scale > 0 && hysteresis >= 1 && iter >= 0 &&
                         last >= -1 && last < iter + 1 && skipped >= 0 && skipped <= iter,
                     where, ": loss scale state '", state, "' is not one cohort wrote");
  scale_ = scale;
  hysteresis_ = hysteresis;
  iter_ = iter;
  last_overflow_iter_ = last;
  skipped_ = skipped;
}

bool has_nonfinite(const float* g, int64_t n) {
  // inf and NaN are exactly the values whose exponent bits are all ones:
  // |bits| >= 0x7f800000. The maximum over the buffer answers in one pass.
  uint32_t top = 0;
#pragma omp parallel for simd reduction(max : top) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, g + i, 4);
    top = std::max(top, u & 0x7fffffffu);
  }
  return top >= 0x7f800000u;
}

bool scaled_step(Optimizer& opt, LossScaler& scaler, float* params, float* grads, int64_t n,
                 float lr, float clip_norm, const OverflowVote& vote) {
  timeline::Span span("optimizer", "optimizer");
  if (scaler.enabled()) {
    bool overflow = has_nonfinite(grads, n);
    if (vote) overflow = vote(overflow);
    const float scale = scaler.scale();  // the scale these gradients carry
    if (!scaler.update(overflow)) return false;
    if (scale != 1.0f) scale_inplace(grads, n, 1.0f / scale);
  }
  if (clip_norm > 0) clip_grad_norm(grads, n, clip_norm);
  opt.step(params, grads, n, lr);
  return true;
}

}  // namespace cohort
