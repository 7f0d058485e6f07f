// One minibatch as handed to the training loop.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace cohort {

struct Batch {
  Tensor images;  // f32 {B, H, W, C}
  std::vector<int32_t> labels;  // B entries
  int64_t size() const { return int64_t(labels.size()); }
};

}  // namespace cohort
