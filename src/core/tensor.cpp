#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

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

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  size_t bytes = (t.nbytes() + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw Error("out of memory allocating tensor of shape " + shape_str(shape));
  if (const auto& counter = current_memory_counter()) {
    counter->add(int64_t(bytes));
    t.storage_ = std::shared_ptr<void>(p, [counter, bytes](void* q) {
      counter->add(-int64_t(bytes));
      std::free(q);
    });
  } else {
    t.storage_ = std::shared_ptr<void>(p, std::free);
  }
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.zero();
  return t;
}

Tensor Tensor::view(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> keep) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
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

void Tensor::fill(float v) const {
  if (dtype_ == DType::kF32) {
    float* p = f32();
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = v;
  } else {
    BF16 b = to_bf16(v);
    BF16* p = bf16();
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = b;
  }
}

void Tensor::zero() const {
  if (nbytes()) std::memset(data_, 0, nbytes());
}

void Tensor::copy_from(const Tensor& src) const {
  COHORT_CHECK(src.numel() == numel(), "copy ", shape_str(src.shape()), " into ",
               shape_str(shape_));
  if (src.dtype() == dtype_) {
    if (nbytes()) std::memcpy(data_, src.data(), nbytes());
  } else if (dtype_ == DType::kBF16) {
    f32_to_bf16(src.f32(), bf16(), size_t(numel()));
  } else {
    bf16_to_f32(src.bf16(), f32(), size_t(numel()));
  }
}

}  // namespace cohort
