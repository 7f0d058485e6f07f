// Fully connected layer. src {N, I}, weight {O, I} (PyTorch layout), bias {O}, dst {N, O}.
// Built for one shape and dtype; operands are typed views (see ops/conv2d.h).
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct LinearShape {
  int64_t n, in, out;
  DType dtype = DType::kF32;
  double forward_flops() const { return 2.0 * n * in * out; }
};

class Linear {
 public:
  virtual ~Linear() = default;
  // dst = relu?(src weight^T + bias); bias may be null.
  virtual void forward(ConstView src, ConstView weight, ConstView bias, View dst) = 0;
  virtual void backward_data(ConstView ddst, ConstView weight, View dsrc) = 0;
  virtual void backward_weights(ConstView src, ConstView ddst, View dweight, View dbias,
                                bool accumulate) = 0;
};

std::unique_ptr<Linear> make_linear(Device device, const LinearShape& shape, bool relu);

}  // namespace cohort::ops
