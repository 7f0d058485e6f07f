// In-memory image datasets (images NHWC f32 + int labels) and the one entry
// point, load_dataset(), that the CLI and trainers use to get a train/test split.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace cohort {

struct Dataset {
  Tensor images;  // f32, shape {N, H, W, C} (NHWC)
  std::vector<int32_t> labels;  // N entries, each in [0, num_classes)
  int num_classes = 10;
  std::string name;
  int64_t size() const { return int64_t(labels.size()); }
};

struct DataSplit {
  Dataset train, test;
};

// name: "fashion-mnist" | "mnist" | "cifar10" | "synthetic" (dir ignored for
// synthetic). limit > 0 keeps only the first `limit` training images; the test
// set is always complete. Any problem with the name or files -> InputError.
DataSplit load_dataset(const std::string& name, const std::string& dir, int64_t limit = 0);

// n random-normal images of h x w x c with uniform labels in [0, num_classes).
// Deterministic in `seed`. Unlearnable by design: for throughput runs and tests.
Dataset make_synthetic(int64_t n, int h, int w, int c, int num_classes, uint64_t seed);

// Copy of the first min(n, size) examples (a copy, so the rest can be freed).
Dataset take_first(const Dataset& d, int64_t n);

}  // namespace cohort
