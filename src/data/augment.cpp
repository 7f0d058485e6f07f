#include "data/augment.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"
#include "data/cifar.h"

namespace cohort {

namespace {

// splitmix64's finalizer: distinct (seed, epoch, sample) give unrelated streams.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One source coordinate of PyTorch's linear interpolation (align_corners=False):
// the two neighbours and the weight of the second.
struct Tap {
  int64_t i0, i1;
  float l1;
};

std::vector<Tap> taps(int64_t in, int64_t out) {
  const float scale = float(in) / float(out);
  std::vector<Tap> t(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const float src = std::max(scale * (float(o) + 0.5f) - 0.5f, 0.0f);
    const int64_t i0 = std::min(int64_t(src), in - 1);
    t[size_t(o)] = {i0, i0 < in - 1 ? i0 + 1 : i0, std::min(std::max(src - float(i0), 0.0f), 1.0f)};
  }
  return t;
}

}  // namespace

void resize_bilinear(const float* src, int64_t h, int64_t w, int64_t c, float* dst, int64_t oh,
                     int64_t ow) {
  const std::vector<Tap> ty = taps(h, oh), tx = taps(w, ow);
  for (int64_t y = 0; y < oh; ++y) {
    const Tap& a = ty[size_t(y)];
    const float* r0 = src + a.i0 * w * c;
    const float* r1 = src + a.i1 * w * c;
    for (int64_t x = 0; x < ow; ++x) {
      const Tap& b = tx[size_t(x)];
      float* out = dst + (y * ow + x) * c;
      for (int64_t k = 0; k < c; ++k) {
        const float top = (1 - b.l1) * r0[b.i0 * c + k] + b.l1 * r0[b.i1 * c + k];
        const float bottom = (1 - b.l1) * r1[b.i0 * c + k] + b.l1 * r1[b.i1 * c + k];
        out[k] = (1 - a.l1) * top + a.l1 * bottom;
      }
    }
  }
}

ImageTransform ImageTransform::for_dataset(const std::string& dataset, int64_t resize,
                                           bool augment, uint64_t seed) {
  ImageTransform t;
  t.resize = resize;
  t.augment = augment;
  t.seed = seed;
  if (dataset == "mnist" || dataset == "fashion-mnist") {
    t.pad = 2;
    t.flip = false;
  }
  if (dataset == "cifar10")  // stored normalized: black is -mean/std
    for (int k = 0; k < 3; ++k) t.fill.push_back(-kCifarMean[k] / kCifarStd[k]);
  return t;
}

Shape ImageTransform::output_shape(const Shape& hwc) const {
  return resize > 0 ? Shape{resize, resize, hwc[2]} : hwc;
}

void ImageTransform::apply(const float* src, const Shape& hwc, float* dst, int epoch,
                           int64_t sample, bool train) const {
  const int64_t h = hwc[0], w = hwc[1], c = hwc[2];
  std::vector<float> cropped;
  if (train && augment) {
    Rng rng(mix(mix(seed ^ 0xa06e47ull) ^ mix(uint64_t(epoch)) * 31 ^ uint64_t(sample)));
    const int64_t dy = int64_t(rng.below(uint64_t(2 * pad + 1))) - pad;
    const int64_t dx = int64_t(rng.below(uint64_t(2 * pad + 1))) - pad;
    const bool mirror = flip && rng.below(2) == 1;
    cropped.resize(size_t(h * w * c));
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sy = y + dy, sx = mirror ? w - 1 - x + dx : x + dx;
        float* out = cropped.data() + (y * w + x) * c;
        if (sy < 0 || sy >= h || sx < 0 || sx >= w) {
          for (int64_t k = 0; k < c; ++k) out[k] = fill.empty() ? 0.0f : fill[size_t(k)];
        } else {
          std::memcpy(out, src + (sy * w + sx) * c, size_t(c) * sizeof(float));
        }
      }
    src = cropped.data();
  }
  if (resize > 0)
    resize_bilinear(src, h, w, c, dst, resize, resize);
  else
    std::memcpy(dst, src, size_t(h * w * c) * sizeof(float));
}

Tensor ImageTransform::resized(const Tensor& images) const {
  const Shape hwc(images.shape().begin() + 1, images.shape().end());
  const Shape out = output_shape(hwc);
  const int64_t n = images.dim(0), in_row = numel(hwc), out_row = numel(out);
  Tensor r = Tensor::empty({n, out[0], out[1], out[2]});
  for (int64_t i = 0; i < n; ++i)
    resize_bilinear(images.f32() + i * in_row, hwc[0], hwc[1], hwc[2], r.f32() + i * out_row,
                    out[0], out[1]);
  return r;
}

}  // namespace cohort
