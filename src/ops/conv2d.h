// 2-D convolution, declared once for every backend (DESIGN: ops/).
// Shapes: src {N, H, W, Ci} (NHWC), weight {Co, Ci, KH, KW} (PyTorch's OIHW, so
// checkpoints read the same in PyTorch), bias {Co}, dst {N, OH, OW, Co}.
// An instance is built for one shape and dtype and caches its primitives;
// build once, run many. Operands are typed views (core/tensor.h): a Tensor or
// a typed pointer; one whose dtype is not the shape's is an Error naming the op.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct ConvShape {
  int64_t n, h, w, c_in, c_out, kh, kw, stride = 1, pad = 0;
  DType dtype = DType::kF32;  // of src, weight, bias, dst and their gradients
  int64_t out_h() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - kw) / stride + 1; }
  // Multiply-adds x2 of one forward pass over the whole batch.
  double forward_flops() const { return 2.0 * n * out_h() * out_w() * c_out * c_in * kh * kw; }
};

class Conv2d {
 public:
  virtual ~Conv2d() = default;
  // dst = relu?(conv(src, weight) + bias); bias may be null. A null `weight`
  // reuses the weights the previous call laid out (chunked batches: once per step).
  virtual void forward(ConstView src, ConstView weight, ConstView bias, View dst) = 0;
  // dsrc = conv_transpose(ddst, weight); a null `weight` reuses the previous layout.
  virtual void backward_data(ConstView ddst, ConstView weight, View dsrc) = 0;
  // dweight (and dbias if non-null) = or += (accumulate) the gradients.
  virtual void backward_weights(ConstView src, ConstView ddst, View dweight, View dbias,
                                bool accumulate) = 0;
};

// relu: fuse a ReLU into forward (the caller applies relu_backward to ddst).
// The CPU backend runs f32 only: another dtype is an Error naming it.
std::unique_ptr<Conv2d> make_conv2d(Device device, const ConvShape& shape, bool relu);

}  // namespace cohort::ops
