// Flat arenas (DESIGN principle 1): a model's parameters live in one contiguous
// f32 buffer and its gradients in another of the same layout. Each parameter is
// a view (offset, shape), so a gradient bucket or a ZeRO shard is a plain range
// and a checkpoint is one write. A tied parameter (GPT-2's token embedding and
// output projection) is one more view of an existing slot, not a new range.
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
  // Registers `name` as a second view of the parameter `owner` (added
  // earlier, same element count, `shape` may differ): both read the same
  // values and write the same gradient slot. The layout, infos(), checkpoints
  // and the optimizer see the owner only. Both users' gradients land in one
  // slot, so the user whose backward runs second must add into it
  // (Context::accumulate) instead of overwriting.
  void tie(const std::string& name, const std::string& owner, const Shape& shape, Tensor* param,
           Tensor* grad);
  // Allocates both buffers (zeroed) and binds every registered tensor.
  void allocate();
  // Binds every registered tensor into `owner`'s buffers instead (same
  // layout): a second set of modules over the same weights and gradients.
  void share(const Arena& owner);

  int64_t size() const { return size_; }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  struct Tie {
    std::string name;
    Shape shape;
    size_t owner;  // index into infos()
  };
  const std::vector<Tie>& ties() const { return ties_; }
  // Index in infos() of the parameter `name`; a tie gives its owner's. Error if none.
  size_t find(const std::string& name) const;
  const Tensor& params() const { return params_; }
  const Tensor& grads() const { return grads_; }
  Tensor param(size_t i) const;
  Tensor grad(size_t i) const;

 private:
  void bind();
  Tensor view(const Tensor& buffer, int64_t offset, const Shape& shape) const;

  std::vector<ParamInfo> infos_;
  std::vector<Tie> ties_;
  std::vector<std::pair<Tensor*, Tensor*>> bindings_, tie_bindings_;
  int64_t size_ = 0;
  Tensor params_, grads_;
};

}  // namespace cohort
