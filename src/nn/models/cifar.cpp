// The CIFAR-stem models (32x32x3 input; 10 classes unless --num-classes):
// VGG-16 with batch-norm and a single 512->K classifier, and ResNet-50/101/152
// with the CIFAR stem (3x3 conv, no initial max-pool). The torchvision
// (ImageNet) architectures are in torchvision.cpp.
#include "core/error.h"
#include "nn/models/zoo.h"

namespace cohort::nn {

std::unique_ptr<Sequential> cifar_vgg16(int64_t classes) {
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
  s->add<Flatten>("flatten").add<Linear>("fc", 512, classes);
  return s;
}

std::unique_ptr<Sequential> cifar_resnet(int depth, int64_t classes) {
  COHORT_INPUT_CHECK(depth == 50 || depth == 101 || depth == 152, "resnet depth ", depth,
                     " is not one of 50, 101, 152");
  auto s = std::make_unique<Sequential>();
  s->add<Conv2d>("conv1", 3, 64, 3, 1, 1, false).add<BatchNorm2d>("bn1", 64, true);
  const int64_t c = add_resnet_stages(*s, depth);
  s->add<GlobalAvgPool>("avgpool").add<Linear>("fc", c, classes);
  return s;
}

}  // namespace cohort::nn
