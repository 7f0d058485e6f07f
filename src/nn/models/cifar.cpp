// The CIFAR-10 models (32x32x3 input, 10 classes): VGG-16 with batch-norm and
// ResNet-50/101/152 with the CIFAR stem (3x3 conv, no initial max-pool).
#include "core/error.h"
#include "nn/models/zoo.h"

namespace cohort::nn {

std::unique_ptr<Sequential> vgg16() {
  const int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0,
                         512, 512, 512, 0};  // 0 = max-pool
  auto s = std::make_unique<Sequential>();
  int64_t c = 3;
  int conv = 0, pool = 0;
  for (int64_t v : cfg) {
    if (v == 0) {
      s->add<MaxPool2d>("pool" + std::to_string(++pool), 2);
      continue;
    }
    ++conv;
    s->add<Conv2d>("conv" + std::to_string(conv), c, v, 3, 1, 1, true)
        .add<BatchNorm2d>("bn" + std::to_string(conv), v, true);
    c = v;
  }
  s->add<Flatten>("flatten").add<Linear>("fc", 512, 10);
  return s;
}

std::unique_ptr<Sequential> resnet(int depth) {
  std::vector<int> blocks;
  if (depth == 50) blocks = {3, 4, 6, 3};
  else if (depth == 101) blocks = {3, 4, 23, 3};
  else if (depth == 152) blocks = {3, 8, 36, 3};
  else throw InputError(detail::concat("resnet depth ", depth, " is not one of 50, 101, 152"));
  auto s = std::make_unique<Sequential>();
  s->add<Conv2d>("conv1", 3, 64, 3, 1, 1, false).add<BatchNorm2d>("bn1", 64, true);
  int64_t c = 64;
  for (int l = 0; l < 4; ++l) {
    const int64_t width = 64 << l;
    auto layer = std::make_unique<Sequential>();
    for (int b = 0; b < blocks[size_t(l)]; ++b) {
      const int64_t stride = (b == 0 && l > 0) ? 2 : 1;
      layer->add(std::to_string(b), bottleneck_block(c, width, stride));
      c = width * 4;
    }
    s->add("layer" + std::to_string(l + 1), std::move(layer));
  }
  s->add<GlobalAvgPool>("avgpool").add<Linear>("fc", c, 10);
  return s;
}

}  // namespace cohort::nn
