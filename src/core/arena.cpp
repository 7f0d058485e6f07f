#include "core/arena.h"

#include <algorithm>

#include "core/error.h"
#include "core/memory.h"

namespace cohort {

void Arena::add(const std::string& name, const Shape& shape, Tensor* param, Tensor* grad) {
  COHORT_CHECK(!params_.data(), "arena already allocated; cannot add ", name);
  infos_.push_back({name, shape, size_});
  bindings_.push_back({param, grad});
  size_ += cohort::numel(shape);
}

void Arena::tie(const std::string& name, const std::string& owner, const Shape& shape,
               Tensor* param, Tensor* grad) {
  COHORT_CHECK(!params_.data(), "arena already allocated; cannot tie ", name);
  const size_t i = find(owner);
  COHORT_CHECK(cohort::numel(shape) == infos_[i].numel(), "tie ", name, " ", shape_str(shape),
               " to ", owner, " ", shape_str(infos_[i].shape), ": element counts differ");
  ties_.push_back({name, shape, i});
  tie_bindings_.push_back({param, grad});
}

size_t Arena::find(const std::string& name) const {
  for (size_t i = 0; i < infos_.size(); ++i)
    if (infos_[i].name == name) return i;
  for (const Tie& t : ties_)
    if (t.name == name) return t.owner;
  throw Error("arena has no parameter named '" + name + "'");
}

// Zeroed pages from the kernel: untouched ranges cost nothing, so a ZeRO
// rank that releases the other ranks' shards (core/memory.h) holds its own.
static Tensor zeroed_pages(int64_t n) {
  const size_t bytes = size_t(std::max<int64_t>(n, 1)) * sizeof(float);
  std::shared_ptr<void> mem = allocate_pages(bytes);
  return Tensor::view(mem.get(), {n}, DType::kF32, mem);
}

void Arena::allocate() {
  params_ = zeroed_pages(size_);
  grads_ = zeroed_pages(size_);
  bind();
}

void Arena::share(const Arena& owner) {
  COHORT_CHECK(!params_.data(), "arena already allocated; cannot share another");
  COHORT_CHECK(owner.size_ == size_ && owner.infos_.size() == infos_.size(),
               "shared arena layouts differ: ", size_, " vs ", owner.size_, " elements");
  params_ = owner.params_;
  grads_ = owner.grads_;
  bind();
}

void Arena::bind() {
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (bindings_[i].first) *bindings_[i].first = param(i);
    if (bindings_[i].second) *bindings_[i].second = grad(i);
  }
  for (size_t j = 0; j < ties_.size(); ++j) {
    const int64_t offset = infos_[ties_[j].owner].offset;
    auto [param, grad] = tie_bindings_[j];
    if (param) *param = view(params_, offset, ties_[j].shape);
    if (grad) *grad = view(grads_, offset, ties_[j].shape);
  }
}

Tensor Arena::view(const Tensor& buffer, int64_t offset, const Shape& shape) const {
  char* base = static_cast<char*>(buffer.data()) + dtype_bytes(buffer.dtype(), offset);
  return Tensor::view(base, shape, buffer.dtype(), nullptr, buffer.device());
}

Tensor Arena::param(size_t i) const {
  return view(params_, infos_[i].offset, infos_[i].shape);
}

Tensor Arena::grad(size_t i) const {
  return view(grads_, infos_[i].offset, infos_[i].shape);
}

}  // namespace cohort
