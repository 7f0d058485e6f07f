// The data pipeline's image transforms (data/augment.h): bilinear resize
// against PyTorch's interpolate, crops and flips that are what they claim,
// and augmentation that depends on (seed, epoch, image) alone, so world 1
// and world 2 see the same augmented images.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "data/augment.h"
#include "data/prefetch.h"
#include "data/sampler.h"
#include "support/support.h"
#include "train/checkpoint.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

TEST(Augment, ResizeMatchesPyTorchInterpolate) {
  const fs::path dir = fs::path(testing::TempDir()) / "cohort_resize_torch";
  fs::create_directories(dir);
  const Dataset cifar = make_synthetic(2, 32, 32, 3, 10, 1);
  const Dataset mnist = make_synthetic(2, 28, 28, 1, 10, 2);
  std::vector<NamedTensor> io = {{"cifar", cifar.images}, {"mnist", mnist.images}};
  // Up (ImageNet's native size), down, and a factor that is no integer.
  for (int64_t s : {224, 20, 45}) {
    ImageTransform t;
    t.resize = s;
    io.push_back({"cifar_" + std::to_string(s), t.resized(cifar.images)});
    io.push_back({"mnist_" + std::to_string(s), t.resized(mnist.images)});
  }
  const std::string file = (dir / "resized.safetensors").string();
  save_safetensors(file, io, {{"what", "resize"}});
  testing_support::expect_pytorch_script(dir.string(), file, R"(
import torch.nn.functional as F
for src in ('cifar', 'mnist'):
    x = t[src].permute(0, 3, 1, 2)
    for s in (224, 20, 45):
        ref = F.interpolate(x, size=(s, s), mode='bilinear', align_corners=False).permute(0, 2, 3, 1)
        err = (t[src + '_' + str(s)] - ref).abs().max().item()
        assert err <= 1e-5, (src, s, err)
print('resize matches interpolate')
)");
}

// Image i of a 6x6 single-channel set holds 100 * i + 6 * y + x: where each
// output pixel came from is readable from its value.
Dataset numbered(int64_t n) {
  Dataset d;
  d.images = Tensor::empty({n, 6, 6, 1});
  for (int64_t i = 0; i < n * 36; ++i) d.images.f32()[i] = float(100 * (i / 36) + i % 36);
  d.labels.assign(size_t(n), 0);
  return d;
}

TEST(Augment, CropIsAShiftOfTheZeroPaddedImageAndFlipMirrorsIt) {
  const Dataset d = numbered(1);
  ImageTransform t;
  t.augment = true;
  t.pad = 2;
  t.flip = true;
  int flips = 0, shifted = 0;
  std::vector<float> out(36);
  for (int epoch = 0; epoch < 40; ++epoch) {
    t.apply(d.images.f32(), {6, 6, 1}, out.data(), epoch, 0, true);
    // Find the shift (dy, dx) and mirror that explain every pixel.
    bool found = false;
    for (int m = 0; m < 2 && !found; ++m)
      for (int dy = -2; dy <= 2 && !found; ++dy)
        for (int dx = -2; dx <= 2 && !found; ++dx) {
          bool all = true;
          for (int y = 0; y < 6 && all; ++y)
            for (int x = 0; x < 6 && all; ++x) {
              const int sy = y + dy, sx = (m ? 5 - x : x) + dx;
              const float want = (sy < 0 || sy > 5 || sx < 0 || sx > 5) ? 0.0f : float(6 * sy + sx);
              all = out[size_t(6 * y + x)] == want;
            }
          if (all) {
            found = true;
            flips += m;
            shifted += dy != 0 || dx != 0;
          }
        }
    ASSERT_TRUE(found) << "epoch " << epoch << ": not a padded crop of the image";
  }
  EXPECT_GT(flips, 5);  // 40 fair coins
  EXPECT_LT(flips, 35);
  EXPECT_GT(shifted, 20);
  // Evaluation takes the image as it is.
  t.apply(d.images.f32(), {6, 6, 1}, out.data(), 0, 0, false);
  EXPECT_EQ(std::memcmp(out.data(), d.images.f32(), 36 * sizeof(float)), 0);
}

// Every image an epoch hands out, by dataset index, at `world` ranks.
std::map<int64_t, std::vector<float>> epoch_images(const Dataset& d, const ImageTransform& t,
                                                    int world, int epoch) {
  std::map<int64_t, std::vector<float>> seen;
  for (int r = 0; r < world; ++r) {
    Sampler s(d.size(), r, world, 1, 7, true);
    const std::vector<int64_t> idx = s.epoch_indices(epoch);
    Prefetcher p(d, idx, 4, false, 2, nullptr, &t, epoch);
    Batch b;
    size_t k = 0;
    while (p.next(b))
      for (int64_t i = 0; i < b.size(); ++i, ++k) {
        const int64_t row = b.images.numel() / b.size();
        seen[idx[k]] = std::vector<float>(b.images.f32() + i * row, b.images.f32() + (i + 1) * row);
      }
  }
  return seen;
}

TEST(Augment, SameImagesAtAnyWorldSize) {
  const Dataset d = numbered(16);
  ImageTransform t = ImageTransform::for_dataset("cifar10", 9, true, 3);
  t.fill = {0.0f};
  const auto one = epoch_images(d, t, 1, 2), two = epoch_images(d, t, 2, 2);
  ASSERT_EQ(one.size(), 16u);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one.begin()->second.size(), 81u);  // resized to 9x9 after the crop
  // Another epoch draws again.
  EXPECT_NE(epoch_images(d, t, 1, 3), one);
}

}  // namespace
}  // namespace cohort
