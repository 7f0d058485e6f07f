// The ImageNet architectures as torchvision defines them (torchvision.models
// resnet18/50/101/152, vgg16, vgg16_bn), under torchvision's state_dict names,
// so a torchvision checkpoint saved as safetensors loads as is. Adaptive
// pooling makes them take any input of at least 32x32 (224x224 natively).
// ReLUs are fused into the conv, batch-norm or linear before them, so the
// indices of `features.N` / `classifier.N` skip them, as torchvision's do.
#include "core/error.h"
#include "nn/models/zoo.h"

namespace cohort::nn {

// Stages layer1..4 (basic blocks for 18, bottlenecks otherwise; the first
// block of stages 2-4 strides 2) after a 64-channel stem; the CIFAR-stem
// ResNets share them. Returns the channels out.
int64_t add_resnet_stages(Sequential& s, int depth) {
  std::vector<int> blocks;
  const bool basic = depth == 18;
  if (depth == 18) blocks = {2, 2, 2, 2};
  else if (depth == 50) blocks = {3, 4, 6, 3};
  else if (depth == 101) blocks = {3, 4, 23, 3};
  else if (depth == 152) blocks = {3, 8, 36, 3};
  else throw InputError(detail::concat("resnet depth ", depth, " is not one of 18, 50, 101, 152"));
  int64_t c = 64;
  for (int l = 0; l < 4; ++l) {
    const int64_t width = 64 << l;
    auto layer = std::make_unique<Sequential>();
    for (int b = 0; b < blocks[size_t(l)]; ++b) {
      const int64_t stride = (b == 0 && l > 0) ? 2 : 1;
      layer->add(std::to_string(b),
                 basic ? basic_block(c, width, stride) : bottleneck_block(c, width, stride));
      c = basic ? width : width * 4;
    }
    s.add("layer" + std::to_string(l + 1), std::move(layer));
  }
  return c;
}

// Stem 7x7/2 conv (no bias) + BN + ReLU, 3x3/2 max-pool (padding 1), the
// stages, global average pool, fc. Top-level layers: conv1, bn1, maxpool,
// layer1..4, avgpool, fc.
std::unique_ptr<Sequential> tv_resnet(int depth, int64_t classes) {
  auto s = std::make_unique<Sequential>();
  s->add<Conv2d>("conv1", 3, 64, 7, 2, 3, false)
      .add<BatchNorm2d>("bn1", 64, true)
      .add<MaxPool2d>("maxpool", 3, 2, 1);
  const int64_t c = add_resnet_stages(*s, depth);
  s->add<GlobalAvgPool>("avgpool").add<Linear>("fc", c, classes);
  return s;
}

// Configuration "D": 13 3x3 convs (0 = 2x2 max-pool), then adaptive average
// pool to 7x7 and classifier 25088-4096-4096-K with dropout 0.5. Every
// features.N and classifier.N is a top-level layer (a pipeline can cut there).
std::unique_ptr<Sequential> tv_vgg16(bool batch_norm, int64_t classes) {
  const int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0,
                         512, 512, 512, 0};
  auto s = std::make_unique<Sequential>();
  auto at = [](const char* block, int i) { return std::string(block) + "." + std::to_string(i); };
  int i = 0;  // torchvision's index in `features`, counting the unfused ReLUs
  int64_t c = 3;
  for (int64_t v : cfg) {
    if (v == 0) {
      s->add<MaxPool2d>(at("features", i++), 2);
      continue;
    }
    s->add<Conv2d>(at("features", i++), c, v, 3, 1, 1, true, !batch_norm);
    if (batch_norm) s->add<BatchNorm2d>(at("features", i++), v, true);
    ++i;  // the ReLU
    c = v;
  }
  s->add<AdaptiveAvgPool2d>("avgpool", 7, 7).add<Flatten>("flatten");
  s->add<Linear>("classifier.0", 512 * 7 * 7, 4096, true)
      .add<Dropout>("classifier.2", 0.5f)
      .add<Linear>("classifier.3", 4096, 4096, true)
      .add<Dropout>("classifier.5", 0.5f)
      .add<Linear>("classifier.6", 4096, classes);
  return s;
}

}  // namespace cohort::nn
