// Pooling over NHWC activations: max-pool (k x k, stride s, no padding) and
// global average pool ({N, H, W, C} -> {N, C}).
#pragma once
#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace cohort::ops {

struct PoolShape {
  int64_t n, h, w, c, k, stride;
  int64_t out_h() const { return (h - k) / stride + 1; }
  int64_t out_w() const { return (w - k) / stride + 1; }
};

class MaxPool2d {
 public:
  virtual ~MaxPool2d() = default;
  virtual void forward(const float* src, float* dst) = 0;  // remembers the argmax
  virtual void backward(const float* ddst, float* dsrc) = 0;
  // The same with a caller-owned argmax workspace of workspace_bytes(), so one
  // instance can serve many chunks of a batch (nn::ConvPool).
  virtual size_t workspace_bytes() const = 0;
  virtual void forward(const float* src, float* dst, void* workspace) = 0;
  virtual void backward(const float* ddst, float* dsrc, const void* workspace) = 0;
};

std::unique_ptr<MaxPool2d> make_max_pool2d(Device device, const PoolShape& shape);

// dst[n, c] = mean over h, w of src[n, h, w, c].
void global_avg_pool_forward(const float* src, float* dst, int64_t n, int64_t hw, int64_t c);
void global_avg_pool_backward(const float* ddst, float* dsrc, int64_t n, int64_t hw, int64_t c);

}  // namespace cohort::ops
