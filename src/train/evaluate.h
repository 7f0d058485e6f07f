// Test-set evaluation: loss, accuracy and accuracy per class.
#pragma once
#include <vector>

#include "data/dataset.h"
#include "nn/model.h"

namespace cohort {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  std::vector<double> per_class_accuracy;
  std::vector<int64_t> seen;  // test images per class
  int64_t images = 0;
};

EvalResult evaluate(nn::Model& model, const Dataset& data, int64_t batch);

}  // namespace cohort
