// Flat arenas (DESIGN principle 1): a model's parameters live in one contiguous
// f32 buffer and its gradients in another of the same layout. Each parameter is
// a view (offset, shape), so a gradient bucket or a ZeRO shard is a plain range
// and a checkpoint is one write.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"

namespace cohort {

struct ParamInfo {
  std::string name;  // "conv1.weight"
  Shape shape;
  int64_t offset = 0;  // in elements, into both buffers
  int64_t numel() const { return cohort::numel(shape); }
};

class Arena {
 public:
  // Registration: `param` and `grad` are pointed at their views by allocate().
  void add(const std::string& name, const Shape& shape, Tensor* param, Tensor* grad);
  // Allocates both buffers (zeroed) and binds every registered tensor.
  void allocate();
  // Binds every registered tensor into `owner`'s buffers instead (same
  // layout): a second set of modules over the same weights and gradients.
  void share(const Arena& owner);

  int64_t size() const { return size_; }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  const Tensor& params() const { return params_; }
  const Tensor& grads() const { return grads_; }
  Tensor param(size_t i) const;
  Tensor grad(size_t i) const;

 private:
  void bind();

  std::vector<ParamInfo> infos_;
  std::vector<std::pair<Tensor*, Tensor*>> bindings_;
  int64_t size_ = 0;
  Tensor params_, grads_;
};

}  // namespace cohort
