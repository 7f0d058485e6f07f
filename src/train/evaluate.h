// Test-set evaluation: loss, accuracy and accuracy per class.
#pragma once
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"
#include "nn/model.h"

namespace cohort {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  std::vector<double> per_class_accuracy;
  std::vector<int64_t> seen;  // test images per class
  int64_t images = 0;

  // As sums [loss_sum, images, right per class..., seen per class...], which
  // ranks add up; and back.
  std::vector<double> to_sums() const;
  static EvalResult from_sums(const std::vector<double>& v);
};

// The model's own loss over `data`; accuracy (per class for class outputs),
// in batches of `batch`, or with `batches` > 0 in exactly that many batches of
// near-equal size (ranks whose every forward is collective, ZeRO stage 3,
// must each run the same number). `images` (--resize) resizes each batch.
EvalResult evaluate(nn::Model& model, const Dataset& data, int64_t batch, int64_t batches = 0,
                    const ImageTransform* images = nullptr);

}  // namespace cohort
