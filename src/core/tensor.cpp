#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/memory.h"

namespace cohort {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = allocate(device, t.nbytes());
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::view(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> keep,
                    Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.data_ = data;
  t.storage_ = std::move(keep);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  COHORT_CHECK(cohort::numel(shape) == numel(), "reshape ", shape_str(shape_), " to ",
               shape_str(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  COHORT_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0]);
  Tensor t = *this;
  t.shape_[0] = end - begin;
  int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  t.data_ = static_cast<char*>(data_) + size_t(begin * row) * dtype_size(dtype_);
  return t;
}

template <class T>
static void fill_as(const Tensor& t, T v) {
  T* p = t.data_as<T>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = v;
}

void Tensor::fill(float v) const {
  COHORT_CHECK(device_ == Device::kCpu, "fill of a ", device_name(device_), " tensor");
  switch (dtype_) {
    case DType::kF32: return fill_as(*this, v);
    case DType::kBF16: return fill_as(*this, to_bf16(v));
    case DType::kF16: return fill_as(*this, to_f16(v));
    case DType::kI32: return fill_as(*this, int32_t(v));
    case DType::kI64: return fill_as(*this, int64_t(v));
  }
}

void Tensor::zero() const {
  COHORT_CHECK(device_ == Device::kCpu, "zero of a ", device_name(device_), " tensor");
  if (nbytes()) std::memset(data_, 0, nbytes());
}

// Converts through f32: every float dtype widens to it exactly; i64 (counts
// in PyTorch's files) converts to f32, exact up to 2^24.
static void convert(const Tensor& src, const Tensor& dst) {
  const size_t n = size_t(src.numel());
  std::vector<float> wide;
  const float* f = nullptr;
  switch (src.dtype()) {
    case DType::kF32: f = src.f32(); break;
    case DType::kBF16:
      wide.resize(n);
      bf16_to_f32(src.bf16(), wide.data(), n);
      break;
    case DType::kF16:
      wide.resize(n);
      f16_to_f32(src.f16(), wide.data(), n);
      break;
    case DType::kI64:
      wide.resize(n);
      for (size_t i = 0; i < n; ++i) wide[i] = float(src.data_as<int64_t>()[i]);
      break;
    case DType::kI32: break;
  }
  if (!f) f = wide.data();
  switch (dst.dtype()) {
    case DType::kF32: std::memcpy(dst.f32(), f, n * sizeof(float)); break;
    case DType::kBF16: f32_to_bf16(f, dst.bf16(), n); break;
    case DType::kF16: f32_to_f16(f, dst.f16(), n); break;
    case DType::kI64:
      for (size_t i = 0; i < n; ++i) dst.data_as<int64_t>()[i] = int64_t(f[i]);
      break;
    case DType::kI32: break;
  }
}

void Tensor::copy_from(const Tensor& src) const {
  COHORT_CHECK(src.numel() == numel(), "copy ", shape_str(src.shape()), " into ",
               shape_str(shape_));
  COHORT_CHECK(device_ == Device::kCpu && src.device() == Device::kCpu, "copy ",
               device_name(src.device()), " -> ", device_name(device_),
               ": only host copies are built");
  if (src.dtype() == dtype_) {
    if (nbytes()) std::memcpy(data_, src.data(), nbytes());
    return;
  }
  COHORT_CHECK(dtype_ != DType::kI32 && src.dtype() != DType::kI32, "copy ",
               dtype_name(src.dtype()), " into ", dtype_name(dtype_));
  convert(src, *this);
}

void check_dtype(const char* where, const char* what, DType got, DType want) {
  if (got != want)
    throw Error(detail::concat(where, ": ", what, " is ", dtype_name(got), ", expected ",
                               dtype_name(want)));
}

}  // namespace cohort
