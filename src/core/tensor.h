// Tensor: a shape, a dtype and a pointer into shared, 64-byte aligned storage.
// Either owns its storage (Tensor::empty) or is a view into someone else's
// (an arena, a batch buffer). Activations are stored NHWC, so an activation's
// shape reads {N, H, W, C}; weights keep PyTorch's layout ({O, I, KH, KW}).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace cohort {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);

enum class Device { kCpu, kCuda };

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32);
  // A view over memory owned elsewhere; `keep` (optional) keeps that memory alive.
  static Tensor view(void* data, const Shape& shape, DType dtype = DType::kF32,
                     std::shared_ptr<void> keep = nullptr);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int ndim() const { return int(shape_.size()); }
  int64_t numel() const { return cohort::numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return Device::kCpu; }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  BF16* bf16() const { return static_cast<BF16*>(data_); }

  // Same memory, another shape of the same element count.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, end) of the leading dimension, sharing memory.
  Tensor slice(int64_t begin, int64_t end) const;

  void fill(float v) const;
  void zero() const;
  void copy_from(const Tensor& src) const;

 private:
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
};

}  // namespace cohort
