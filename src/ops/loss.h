// Softmax cross-entropy over logits {N, K} and integer labels {N}.
#pragma once
#include <cstdint>

namespace cohort::ops {

struct LossResult {
  double loss_sum = 0;  // sum over the batch of -log softmax(logits)[label]
  int64_t correct = 0;  // argmax == label
};

// dlogits = (softmax(logits) - onehot(label)) * grad_scale, if dlogits is non-null.
// grad_scale is 1/N for a mean loss (or 1/global batch under data parallelism).
LossResult softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t n, int64_t k,
                                 float* dlogits, float grad_scale);

}  // namespace cohort::ops
