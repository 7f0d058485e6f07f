#include "core/arena.h"

#include "core/error.h"

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
