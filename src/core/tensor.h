// Tensor: a shape, a dtype, a device and a pointer into shared, 64-byte
// aligned storage. Either owns its storage (Tensor::empty, from the device's
// allocator in core/memory.h) or is a view into someone else's (an arena, a
// batch buffer). Activations are stored NHWC, so an activation's
// shape reads {N, H, W, C}; weights keep PyTorch's layout ({O, I, KH, KW}).
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace cohort {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32,
                      Device device = Device::kCpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32,
                      Device device = Device::kCpu);
  // A view over memory owned elsewhere; `keep` (optional) keeps that memory alive.
  static Tensor view(void* data, const Shape& shape, DType dtype = DType::kF32,
                     std::shared_ptr<void> keep = nullptr, Device device = Device::kCpu);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int ndim() const { return int(shape_.size()); }
  int64_t numel() const { return cohort::numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return data_ != nullptr || numel() == 0; }

  void* data() const { return data_; }
  // Typed access; debug builds assert the dtype (release builds pay nothing).
  template <class T>
  T* data_as() const {
    assert(dtype_ == dtype_of<T> && "tensor accessed as the wrong dtype");
    return static_cast<T*>(data_);
  }
  float* f32() const { return data_as<float>(); }
  BF16* bf16() const { return data_as<BF16>(); }
  F16* f16() const { return data_as<F16>(); }
  int32_t* i32() const { return data_as<int32_t>(); }

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
  Device device_ = Device::kCpu;
};

// Typed views: a pointer that carries its dtype and device, what ops and
// collectives take instead of a bare float*. Built implicitly from a Tensor
// or from a typed pointer (float*, BF16*, F16*, int32_t*: the dtype is the
// pointer's), so a kernel checks the dtype once per call, not per element.
struct ConstView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;

  ConstView() = default;
  ConstView(std::nullptr_t) {}  // NOLINT: an absent optional operand (no bias)
  template <class T, DType D = dtype_of<T>>
  ConstView(const T* p) : data(p), dtype(D) {}  // NOLINT: implicit by design
  ConstView(const Tensor& t) : data(t.data()), dtype(t.dtype()), device(t.device()) {}  // NOLINT
  explicit operator bool() const { return data != nullptr; }
  template <class T>
  const T* as() const {
    assert(dtype == dtype_of<T> && "view read as the wrong dtype");
    return static_cast<const T*>(data);
  }
};

struct View {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;

  View() = default;
  View(std::nullptr_t) {}  // NOLINT
  template <class T, DType D = dtype_of<T>>
  View(T* p) : data(p), dtype(D) {}  // NOLINT
  View(const Tensor& t) : data(t.data()), dtype(t.dtype()), device(t.device()) {}  // NOLINT
  explicit operator bool() const { return data != nullptr; }
  operator ConstView() const {  // NOLINT
    ConstView v;
    v.data = data;
    v.dtype = dtype;
    v.device = device;
    return v;
  }
  template <class T>
  T* as() const {
    assert(dtype == dtype_of<T> && "view written as the wrong dtype");
    return static_cast<T*>(data);
  }
};

// Error unless `got` is `want`: "<where>: <what> is bf16, expected f32".
void check_dtype(const char* where, const char* what, DType got, DType want);


}  // namespace cohort
