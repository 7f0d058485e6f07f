// Fully connected layer. src {N, I}, weight {O, I} (PyTorch layout), bias {O}, dst {N, O}.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct LinearShape {
  int64_t n, in, out;
  double forward_flops() const { return 2.0 * n * in * out; }
};

class Linear {
 public:
  virtual ~Linear() = default;
  // dst = relu?(src weight^T + bias); bias may be null.
  virtual void forward(const float* src, const float* weight, const float* bias, float* dst) = 0;
  virtual void backward_data(const float* ddst, const float* weight, float* dsrc) = 0;
  virtual void backward_weights(const float* src, const float* ddst, float* dweight, float* dbias,
                                bool accumulate) = 0;
};

std::unique_ptr<Linear> make_linear(Device device, const LinearShape& shape, bool relu);

}  // namespace cohort::ops
