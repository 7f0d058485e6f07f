// Batch normalization over NHWC activations, per channel C.
// Training uses batch statistics and updates running ones (PyTorch semantics:
// running_var uses the unbiased batch variance); inference uses running ones.
// Operands are typed views (see ops/conv2d.h). `dtype` is the data's (src,
// dst and their gradients); gamma, beta and the statistics stay f32.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct BatchNormShape {
  int64_t n, h, w, c;
  float eps = 1e-5f;
  float momentum = 0.1f;
  DType dtype = DType::kF32;
  // dst = relu(batch_norm(src)), fused (oneDNN's fuse_norm_relu: no extra pass
  // over dst, and backward masks ddst itself, from a bit mask kept by forward).
  bool relu = false;
};

class BatchNorm {
 public:
  virtual ~BatchNorm() = default;
  virtual void forward_train(ConstView src, ConstView gamma, ConstView beta, View dst,
                             View running_mean, View running_var) = 0;
  virtual void forward_infer(ConstView src, ConstView gamma, ConstView beta, View dst,
                             ConstView running_mean, ConstView running_var) = 0;
  // After forward_train on the same src. With a fused ReLU, ddst is the
  // gradient of the ReLU's output.
  virtual void backward(ConstView src, ConstView ddst, ConstView gamma, View dsrc, View dgamma,
                        View dbeta, bool accumulate) = 0;
};

std::unique_ptr<BatchNorm> make_batch_norm(Device device, const BatchNormShape& shape);

}  // namespace cohort::ops
