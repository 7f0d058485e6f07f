// The registrations: one entry per model. A new model is its layer list (a
// file beside this one) plus one line here.
#include "nn/models/zoo.h"

#include "core/error.h"

namespace cohort::nn {

namespace {

std::shared_ptr<const ModelSpec> spec(const char* name, const char* description, InputSpec input,
                                      int classes, InitStyle init,
                                      std::function<std::unique_ptr<Sequential>()> layers) {
  auto s = std::make_shared<ModelSpec>();
  s->name = name;
  s->description = description;
  s->input = input;
  s->output = OutputKind::kClasses;
  s->classes = classes;
  s->init = init;
  s->layers = std::move(layers);
  return s;
}

}  // namespace

const std::vector<std::shared_ptr<const ModelSpec>>& model_zoo() {
  const InputSpec mnist = InputSpec::image(28, 28, 1), cifar = InputSpec::image(32, 32, 3);
  // The study defined its two MNIST models in Keras: they start from Keras' init.
  const InitStyle keras = InitStyle::kKeras, torch = InitStyle::kTorch;
  static const std::vector<std::shared_ptr<const ModelSpec>> kZoo = {
      spec("mnist-small", "conv32-fc64-fc10, 'same' padding (PyTorch vs TensorFlow study)", mnist,
           10, keras, mnist_small),
      spec("mnist-large", "conv128-conv256-conv512-fc512-fc512-fc10, valid padding (same study)",
           mnist, 10, keras, mnist_large),
      spec("lenet", "conv10-conv20-fc50-fc10, the classic PyTorch MNIST example", mnist, 10, torch,
           lenet),
      spec("vgg16", "VGG-16 with batch-norm, CIFAR-10 input", cifar, 10, torch, vgg16),
      spec("resnet50", "ResNet-50, CIFAR-10 stem", cifar, 10, torch, [] { return resnet(50); }),
      spec("resnet101", "ResNet-101, CIFAR-10 stem", cifar, 10, torch, [] { return resnet(101); }),
      spec("resnet152", "ResNet-152, CIFAR-10 stem", cifar, 10, torch, [] { return resnet(152); }),
  };
  return kZoo;
}

std::shared_ptr<const ModelSpec> find_model(const std::string& name) {
  std::string valid;
  for (auto& s : model_zoo()) {
    if (s->name == name) return s;
    valid += (valid.empty() ? "" : ", ") + s->name;
  }
  throw InputError("--model: unknown model '" + name + "' (valid: " + valid + ")");
}

std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed) {
  return build_model(find_model(name), seed);
}

}  // namespace cohort::nn
