// Layer normalization over the last dimension of row-major activations (a
// transformer's {B, T, C} as B*T rows of C). Operands are typed views (see
// ops/conv2d.h): src, dst and their gradients of the shape's dtype (f32 or
// bf16); gamma, beta, their gradients and the statistics f32.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

// Layer-norm over the last dimension C of `rows` rows, with f32 gamma/beta {C}
// (PyTorch's nn.LayerNorm, eps 1e-5). Built once per shape; keeps what
// backward needs (mean, rstd) from the last forward.
struct LayerNormShape {
  int64_t rows, c;
  float eps = 1e-5f;
  DType dtype = DType::kF32;
};
class LayerNorm {
 public:
  virtual ~LayerNorm() = default;
  virtual void forward(ConstView src, ConstView gamma, ConstView beta, View dst) = 0;
  // After forward on the same src. dgamma, dbeta: = or += (accumulate).
  virtual void backward(ConstView src, ConstView ddst, ConstView gamma, View dsrc, View dgamma,
                        View dbeta, bool accumulate) = 0;
};
std::unique_ptr<LayerNorm> make_layer_norm(Device device, const LayerNormShape& shape);

}  // namespace cohort::ops
