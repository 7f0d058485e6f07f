// The MNIST models: the PyTorch-vs-TensorFlow study's small and large CNNs
// and the classic PyTorch example net (lenet); 10 classes unless --num-classes.
#include "nn/models/zoo.h"

namespace cohort::nn {

// conv 3x3 32 'same' + ReLU + pool 2 -> fc 64 + ReLU -> fc 10: 402,442 parameters.
std::unique_ptr<Sequential> mnist_small(int64_t classes) {
  auto s = std::make_unique<Sequential>();
  s->add<ConvPool>("conv1", 1, 32, 3, 1, 2)
      .add<Flatten>("flatten")
      .add<Linear>("fc1", 14 * 14 * 32, 64, true)
      .add<Linear>("fc2", 64, classes);
  return s;
}

// conv 3x3 128, 256, 512 (valid, each + ReLU + pool 2) -> fc 512 -> fc 512 -> fc 10.
// 28 -> 26 -> 13 -> 11 -> 5 -> 3 -> 1, so fc1 sees 512 features: 2,007,050 parameters.
std::unique_ptr<Sequential> mnist_large(int64_t classes) {
  auto s = std::make_unique<Sequential>();
  s->add<ConvPool>("conv1", 1, 128, 3, 0, 2)
      .add<ConvPool>("conv2", 128, 256, 3, 0, 2)
      .add<ConvPool>("conv3", 256, 512, 3, 0, 2)
      .add<Flatten>("flatten")
      .add<Linear>("fc1", 512, 512, true)
      .add<Linear>("fc2", 512, 512, true)
      .add<Linear>("fc3", 512, classes);
  return s;
}

// conv 5x5 10 -> pool -> relu -> conv 5x5 20 -> dropout2d -> pool -> relu -> fc 50 -> relu
// -> dropout -> fc 10: 21,840 parameters. ReLU commutes with max-pool and with
// dropout's non-negative scaling, so both ReLUs are fused into their convs.
std::unique_ptr<Sequential> lenet(int64_t classes) {
  auto s = std::make_unique<Sequential>();
  s->add<ConvPool>("conv1", 1, 10, 5, 0, 2)
      .add<Conv2d>("conv2", 10, 20, 5, 1, 0, true, true)
      .add<Dropout>("drop1", 0.5f, true)
      .add<MaxPool2d>("pool2", 2)
      .add<Flatten>("flatten")
      .add<Linear>("fc1", 320, 50, true)
      .add<Dropout>("drop2", 0.5f)
      .add<Linear>("fc2", 50, classes);
  return s;
}

}  // namespace cohort::nn
