#include "nn/loss.h"

#include "core/error.h"
#include "nn/module.h"
#include "ops/loss.h"

namespace cohort::nn {

namespace {

// The logits in f32: the tensor itself, or a converted copy in `scratch`
// (bf16 models: the loss and softmax run in f32, as autocast does).
const Tensor& as_f32(const Tensor& t, Tensor& scratch) {
  if (t.dtype() == DType::kF32) return t;
  COHORT_CHECK(t.dtype() == DType::kBF16, "softmax cross-entropy: logits of dtype ",
               dtype_name(t.dtype()));
  ensure(scratch, t.shape());
  bf16_to_f32(t.bf16(), scratch.f32(), size_t(t.numel()));
  return scratch;
}

}  // namespace

LossResult SoftmaxCrossEntropy::compute(const Tensor& logits, const int32_t* targets,
                                        Tensor* dout_any, float grad_scale) const {
  thread_local Tensor logits_f32, dout_f32;  // a loss is shared by replica threads
  const Tensor& out = as_f32(logits, logits_f32);
  const bool convert = dout_any && dout_any->dtype() != DType::kF32;
  if (convert) ensure(dout_f32, logits.shape());
  Tensor* dout = convert ? &dout_f32 : dout_any;
  const int64_t n = out.dim(0), k = out.dim(-1);
  const int64_t rows = out.numel() / k, positions = n > 0 ? rows / n : 1;
  // A sample's loss is the mean of its positions' (1 for classes).
  const float row_scale = grad_scale / float(positions);
  auto r = ops::softmax_cross_entropy(out.f32(), targets, rows, k, dout ? dout->f32() : nullptr,
                                      row_scale);
  if (convert) f32_to_bf16(dout->f32(), dout_any->bf16(), size_t(dout->numel()));
  return {r.loss_sum / double(positions), double(r.correct) / double(positions)};
}

}  // namespace cohort::nn
