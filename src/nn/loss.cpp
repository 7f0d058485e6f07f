#include "nn/loss.h"

#include "core/error.h"
#include "ops/loss.h"

namespace cohort::nn {

LossResult SoftmaxCrossEntropy::compute(const Tensor& out, const int32_t* targets, Tensor* dout,
                                        float grad_scale) const {
  COHORT_CHECK(out.dtype() == DType::kF32, "softmax cross-entropy: f32 logits expected, got ",
               dtype_name(out.dtype()));
  const int64_t n = out.dim(0), k = out.dim(-1);
  const int64_t rows = out.numel() / k, positions = n > 0 ? rows / n : 1;
  // A sample's loss is the mean of its positions' (1 for classes).
  const float row_scale = grad_scale / float(positions);
  auto r = ops::softmax_cross_entropy(out.f32(), targets, rows, k, dout ? dout->f32() : nullptr,
                                      row_scale);
  return {r.loss_sum / double(positions), double(r.correct) / double(positions)};
}

}  // namespace cohort::nn
