// In-memory image datasets (images NHWC f32 + int labels) and the one entry
// point, load_dataset(), that the CLI and trainers use to get a train/test split.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"

namespace cohort {

// images: f32 {N, H, W, C} (NHWC); labels: N entries, each in [0, num_classes).
struct Dataset : Batch {
  int num_classes = 10;
  std::string name;
  // Samples [begin, end), sharing the inputs' memory.
  Dataset slice(int64_t begin, int64_t end) const {
    Dataset s;
    static_cast<Batch&>(s) = Batch::slice(begin, end);
    s.num_classes = num_classes;
    s.name = name;
    return s;
  }
};

struct DataSplit {
  Dataset train, test;
};

// name: "fashion-mnist" | "mnist" | "cifar10" | "synthetic" (dir ignored for
// synthetic, whose images take the shape `image`, {H, W, C}: 60,000 training
// and 2,000 test images). limit > 0 keeps only the first `limit` training
// images; the test set is always complete. Any problem with the name or
// files -> InputError. Token streams ("text", "tokens") load through
// load_token_dataset (data/tokens.h), which needs the model's context.
DataSplit load_dataset(const std::string& name, const std::string& dir, int64_t limit = 0,
                       const Shape& image = {28, 28, 1});

// The {H, W, C} of a named image data set's files ({28, 28, 1} for the MNIST
// family, {32, 32, 3} for cifar10); empty for synthetic (which takes the
// model's) and for names that are no image set.
Shape dataset_image_shape(const std::string& name);

// n random-normal images of h x w x c with uniform labels in [0, num_classes).
// Deterministic in `seed`. Unlearnable by design: for throughput runs and tests.
Dataset make_synthetic(int64_t n, int h, int w, int c, int num_classes, uint64_t seed);

// Copy of the first min(n, size) examples (a copy, so the rest can be freed).
Dataset take_first(const Dataset& d, int64_t n);

}  // namespace cohort
