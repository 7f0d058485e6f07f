// Per-image transforms of the data pipeline (--resize, --augment): random
// crop with zero padding and horizontal flip, as the PyTorch CIFAR examples
// do (RandomCrop(32, padding=4), RandomHorizontalFlip()), then a bilinear
// resize as torch.nn.functional.interpolate(mode='bilinear',
// align_corners=False). Images are HWC f32. The random draws of an image come
// from (seed, epoch, its index in the dataset) alone, so the same image gets
// the same crop and flip whichever rank reads it, at any world size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace cohort {

struct ImageTransform {
  int64_t resize = 0;  // output size x size (0: as stored)
  bool augment = false;
  int64_t pad = 4;           // the crop's padding on every side
  bool flip = true;          // horizontal flip with probability 1/2
  std::vector<float> fill;   // per channel: the stored value of a black pixel (default 0)
  uint64_t seed = 0;

  // The transform --resize and --augment ask of `dataset`'s images: CIFAR-10
  // (and synthetic) crop with 4 pixels of padding and flip; the MNIST family
  // crops with 2 and never flips (a mirrored digit is another glyph).
  static ImageTransform for_dataset(const std::string& dataset, int64_t resize, bool augment,
                                    uint64_t seed);
  bool active() const { return resize > 0 || augment; }
  // {H, W, C} -> the transformed image's {H', W', C}.
  Shape output_shape(const Shape& hwc) const;
  // One image src {H, W, C} -> dst output_shape(hwc): augmented (when
  // training and `augment`) by the draws of (seed, epoch, sample), then resized.
  void apply(const float* src, const Shape& hwc, float* dst, int epoch, int64_t sample,
             bool train) const;
  // Images {N, H, W, C} -> {N, H', W', C}, resized only (evaluation).
  Tensor resized(const Tensor& images) const;
};

// src {h, w, c} -> dst {oh, ow, c}, bilinear, half-pixel centres
// (align_corners=False, no antialiasing), as PyTorch's interpolate.
void resize_bilinear(const float* src, int64_t h, int64_t w, int64_t c, float* dst, int64_t oh,
                     int64_t ow);

}  // namespace cohort
