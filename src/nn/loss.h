// Loss: a module chosen by the model (ModelSpec::loss). It turns the model's
// output and the batch's targets into a loss and the output's gradient.
// Softmax cross-entropy serves classes ({N, K} logits, one target a sample)
// and tokens ({N, T, V} logits, one target a position) alike: every row of
// the last dimension is one prediction, and a sample's loss is the mean over
// its positions.
#pragma once
#include <memory>
#include <string>

#include "core/tensor.h"

namespace cohort::nn {

struct LossResult {
  double loss_sum = 0;  // summed over samples, each the mean over its positions
  double correct = 0;   // samples right (for tokens: the share of positions right, summed)
};

class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string name() const = 0;
  // out: {N, ..., K}; targets: N x positions entries. When dout is non-null it
  // gets d(loss_sum * grad_scale)/d(out): grad_scale is 1/N for a mean over the
  // batch (1/global batch under data parallelism).
  virtual LossResult compute(const Tensor& out, const int32_t* targets, Tensor* dout,
                             float grad_scale) const = 0;
};

class SoftmaxCrossEntropy final : public Loss {
 public:
  std::string name() const override { return "softmax-cross-entropy"; }
  LossResult compute(const Tensor& out, const int32_t* targets, Tensor* dout,
                     float grad_scale) const override;
};

}  // namespace cohort::nn
