// Softmax cross-entropy, fused with its gradient: one pass per row, in double
// for the log-sum-exp so the loss matches PyTorch's to 1e-6.
#include "ops/loss.h"

#include <cmath>

namespace cohort::ops {

LossResult softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t n, int64_t k,
                                 float* dlogits, float grad_scale) {
  double loss_sum = 0;
  int64_t correct = 0;
#pragma omp parallel for reduction(+ : loss_sum, correct) if (n * k > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits + i * k;
    int64_t arg = 0;
    for (int64_t j = 1; j < k; ++j)
      if (z[j] > z[arg]) arg = j;
    const double zmax = z[arg];
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(double(z[j]) - zmax);
    const double log_sum = std::log(sum) + zmax;
    loss_sum += log_sum - double(z[labels[i]]);
    correct += (arg == labels[i]);
    if (!dlogits) continue;
    float* dz = dlogits + i * k;
    for (int64_t j = 0; j < k; ++j) {
      double p = std::exp(double(z[j]) - log_sum);
      dz[j] = float((p - (j == labels[i] ? 1.0 : 0.0)) * grad_scale);
    }
  }
  return {loss_sum, correct};
}

}  // namespace cohort::ops
