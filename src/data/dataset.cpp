// load_dataset(): maps a dataset name to its reader, plus synthetic data.
#include "data/dataset.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"
#include "data/cifar.h"
#include "data/idx.h"

namespace cohort {

namespace {
constexpr const char* kValidNames =
    "fashion-mnist, mnist, cifar10, synthetic; for token models: text, tokens";
// Fixed seeds so "synthetic" is the same everywhere; train and test differ.
constexpr uint64_t kSyntheticTrainSeed = 1234;
constexpr uint64_t kSyntheticTestSeed = 5678;
}  // namespace

Dataset make_synthetic(int64_t n, int h, int w, int c, int num_classes, uint64_t seed) {
  COHORT_INPUT_CHECK(n >= 0 && h >= 1 && w >= 1 && c >= 1 && num_classes >= 1,
                     "make_synthetic: bad arguments n=", n, " h=", h, " w=", w, " c=", c,
                     " num_classes=", num_classes);
  Rng rng(seed);
  Dataset d;
  d.images = Tensor::empty({n, h, w, c});
  float* p = d.images.f32();
  for (int64_t i = 0, e = d.images.numel(); i < e; ++i) p[i] = rng.normal();
  d.labels.resize(size_t(n));
  for (auto& l : d.labels) l = int32_t(rng.below(uint64_t(num_classes)));
  d.num_classes = num_classes;
  d.name = "synthetic";
  return d;
}

Dataset take_first(const Dataset& d, int64_t n) {
  n = std::clamp<int64_t>(n, 0, d.size());
  Dataset out;
  Shape shape = d.images.shape();
  shape[0] = n;
  out.images = Tensor::empty(shape, d.images.dtype());
  out.images.copy_from(d.images.slice(0, n));
  out.labels.assign(d.labels.begin(), d.labels.begin() + n);
  out.num_classes = d.num_classes;
  out.name = d.name;
  return out;
}

DataSplit load_dataset(const std::string& name, const std::string& dir, int64_t limit,
                       const Shape& image) {
  COHORT_INPUT_CHECK(limit >= 0, "dataset limit must be >= 0, got ", limit);
  DataSplit s;
  if (name == "synthetic") {
    // Only generate what is kept: synthetic is used for quick throughput runs.
    COHORT_INPUT_CHECK(image.size() == 3, "synthetic data: an image shape {H, W, C} expected, got ",
                       shape_str(image));
    const int h = int(image[0]), w = int(image[1]), c = int(image[2]);
    s.train = make_synthetic(limit > 0 ? limit : 60000, h, w, c, 10, kSyntheticTrainSeed);
    s.test = make_synthetic(2000, h, w, c, 10, kSyntheticTestSeed);
    return s;
  }
  if (name == "fashion-mnist" || name == "mnist") {
    s = load_idx_dir(dir, name);
    // Standardize with the training set's pixel mean and std, as the PyTorch
    // examples do (transforms.Normalize): Adam then converges in fewer steps.
    const float mean = name == "mnist" ? 0.1307f : 0.2860f;
    const float std = name == "mnist" ? 0.3081f : 0.3530f;
    for (Dataset* d : {&s.train, &s.test}) {
      float* p = d->images.f32();
      for (int64_t i = 0, n = d->images.numel(); i < n; ++i) p[i] = (p[i] - mean) / std;
    }
  } else if (name == "cifar10") {
    s = load_cifar10_dir(dir);
  } else if (name == "text" || name == "tokens") {
    throw InputError("--data " + name + " is a token stream, for models that take token ids "
                     "(data/tokens.h), not images");
  } else {
    throw InputError("unknown dataset '" + name + "' (valid: " + kValidNames + ")");
  }
  if (limit > 0 && limit < s.train.size()) s.train = take_first(s.train, limit);
  return s;
}

Shape dataset_image_shape(const std::string& name) {
  if (name == "fashion-mnist" || name == "mnist") return {28, 28, 1};
  if (name == "cifar10") return {32, 32, 3};
  return {};
}

}  // namespace cohort
