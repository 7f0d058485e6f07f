#include "nn/models/zoo.h"

#include "core/error.h"

namespace cohort::nn {

const std::vector<ModelEntry>& model_names() {
  static const std::vector<ModelEntry> kModels = {
      {"mnist-small", "conv32-fc64-fc10, 'same' padding (PyTorch vs TensorFlow study)"},
      {"mnist-large", "conv128-conv256-conv512-fc512-fc512-fc10, valid padding (same study)"},
      {"lenet", "conv10-conv20-fc50-fc10, the classic PyTorch MNIST example"},
      {"vgg16", "VGG-16 with batch-norm, CIFAR-10 input"},
      {"resnet50", "ResNet-50, CIFAR-10 stem"},
      {"resnet101", "ResNet-101, CIFAR-10 stem"},
      {"resnet152", "ResNet-152, CIFAR-10 stem"},
  };
  return kModels;
}

// The named model, unbuilt.
static std::unique_ptr<Model> construct(const std::string& name) {
  std::unique_ptr<Model> m;
  const Shape mnist = {28, 28, 1}, cifar = {32, 32, 3};
  // The study defined its two MNIST models in Keras: they start from Keras' init.
  if (name == "mnist-small")
    m = std::make_unique<Model>(name, mnist, 10, mnist_small(), InitStyle::kKeras);
  else if (name == "mnist-large")
    m = std::make_unique<Model>(name, mnist, 10, mnist_large(), InitStyle::kKeras);
  else if (name == "lenet") m = std::make_unique<Model>(name, mnist, 10, lenet());
  else if (name == "vgg16") m = std::make_unique<Model>(name, cifar, 10, vgg16());
  else if (name == "resnet50") m = std::make_unique<Model>(name, cifar, 10, resnet(50));
  else if (name == "resnet101") m = std::make_unique<Model>(name, cifar, 10, resnet(101));
  else if (name == "resnet152") m = std::make_unique<Model>(name, cifar, 10, resnet(152));
  if (!m) {
    std::string valid;
    for (auto& e : model_names()) valid += (valid.empty() ? "" : ", ") + e.name;
    throw InputError("--model: unknown model '" + name + "' (valid: " + valid + ")");
  }
  return m;
}

std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed) {
  auto m = construct(name);
  m->build(seed);
  return m;
}

std::unique_ptr<Model> make_model_view(Model& owner) {
  auto m = construct(owner.name());
  m->build_shared(owner);
  return m;
}

}  // namespace cohort::nn
