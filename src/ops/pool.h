// Pooling over NHWC activations: max-pool (k x k, stride s, no padding) and
// global average pool ({N, H, W, C} -> {N, C}). Operands are typed views (see
// ops/conv2d.h); the CPU backend runs f32 only.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct PoolShape {
  int64_t n, h, w, c, k, stride;
  DType dtype = DType::kF32;
  int64_t out_h() const { return (h - k) / stride + 1; }
  int64_t out_w() const { return (w - k) / stride + 1; }
};

class MaxPool2d {
 public:
  virtual ~MaxPool2d() = default;
  virtual void forward(ConstView src, View dst) = 0;  // remembers the argmax
  virtual void backward(ConstView ddst, View dsrc) = 0;
  // The same with a caller-owned argmax workspace of workspace_bytes(), so one
  // instance can serve many chunks of a batch (nn::ConvPool).
  virtual size_t workspace_bytes() const = 0;
  virtual void forward(ConstView src, View dst, void* workspace) = 0;
  virtual void backward(ConstView ddst, View dsrc, const void* workspace) = 0;
};

std::unique_ptr<MaxPool2d> make_max_pool2d(Device device, const PoolShape& shape);

// dst[n, c] = mean over h, w of src[n, h, w, c].
void global_avg_pool_forward(ConstView src, View dst, int64_t n, int64_t hw, int64_t c);
void global_avg_pool_backward(ConstView ddst, View dsrc, int64_t n, int64_t hw, int64_t c);

}  // namespace cohort::ops
