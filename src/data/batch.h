// Samples as handed to the training loop: a batch, or (as Dataset) a whole set.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace cohort {

struct Batch {
  Tensor images;  // the inputs: f32 images {B, H, W, C}, or i32 token ids {B, T}
  std::vector<int32_t> labels;  // the targets: B x positions() entries (one per image, or per token)
  int64_t size() const { return images.ndim() ? images.dim(0) : int64_t(labels.size()); }
  // Targets per sample: 1 for classes, T for next-token prediction.
  int64_t positions() const { return size() ? int64_t(labels.size()) / size() : 1; }
  // Samples [begin, end): the inputs share memory, the targets are copied.
  Batch slice(int64_t begin, int64_t end) const {
    Batch s;
    s.images = images.slice(begin, end);
    const int64_t p = positions();
    s.labels.assign(labels.begin() + begin * p, labels.begin() + end * p);
    return s;
  }
};

}  // namespace cohort
