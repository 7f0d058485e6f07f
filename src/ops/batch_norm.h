// Batch normalization over NHWC activations, per channel C.
// Training uses batch statistics and updates running ones (PyTorch semantics:
// running_var uses the unbiased batch variance); inference uses running ones.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct BatchNormShape {
  int64_t n, h, w, c;
  float eps = 1e-5f;
  float momentum = 0.1f;
};

class BatchNorm {
 public:
  virtual ~BatchNorm() = default;
  virtual void forward_train(const float* src, const float* gamma, const float* beta, float* dst,
                             float* running_mean, float* running_var) = 0;
  virtual void forward_infer(const float* src, const float* gamma, const float* beta, float* dst,
                             const float* running_mean, const float* running_var) = 0;
  // After forward_train on the same src.
  virtual void backward(const float* src, const float* ddst, const float* gamma, float* dsrc,
                        float* dgamma, float* dbeta, bool accumulate) = 0;
};

std::unique_ptr<BatchNorm> make_batch_norm(Device device, const BatchNormShape& shape);

}  // namespace cohort::ops
