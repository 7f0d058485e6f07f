// Pooling over NHWC activations: max-pool (k x k, stride s, implicit -inf
// padding p on every side, as PyTorch's MaxPool2d), global average pool
// ({N, H, W, C} -> {N, C}) and adaptive average pool (PyTorch's
// AdaptiveAvgPool2d: {N, H, W, C} -> {N, OH, OW, C}). Operands are typed views (see
// ops/conv2d.h); the CPU backend runs f32 only.
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct PoolShape {
  int64_t n, h, w, c, k, stride;
  DType dtype = DType::kF32;
  int64_t pad = 0;  // on each side
  int64_t out_h() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - k) / stride + 1; }
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

// Output cell (i, j) of an {H, W} -> {OH, OW} adaptive pool averages input
// rows [floor(i H / OH), ceil((i + 1) H / OH)) and the columns alike (PyTorch's
// bins: they may overlap, and an output larger than the input repeats cells).
struct AdaptivePoolShape {
  int64_t n, h, w, c, out_h, out_w;
};
void adaptive_avg_pool_forward(ConstView src, View dst, const AdaptivePoolShape& s);
void adaptive_avg_pool_backward(ConstView ddst, View dsrc, const AdaptivePoolShape& s);

}  // namespace cohort::ops
