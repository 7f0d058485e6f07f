#include "core/arena.h"

#include "core/error.h"

namespace cohort {

void Arena::add(const std::string& name, const Shape& shape, Tensor* param, Tensor* grad) {
  COHORT_CHECK(!params_.data(), "arena already allocated; cannot add ", name);
  infos_.push_back({name, shape, size_});
  bindings_.push_back({param, grad});
  size_ += cohort::numel(shape);
}

void Arena::allocate() {
  params_ = Tensor::zeros({size_});
  grads_ = Tensor::zeros({size_});
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
}

Tensor Arena::param(size_t i) const {
  return Tensor::view(params_.f32() + infos_[i].offset, infos_[i].shape);
}

Tensor Arena::grad(size_t i) const {
  return Tensor::view(grads_.f32() + infos_[i].offset, infos_[i].shape);
}

}  // namespace cohort
