// The registrations: one entry per model. A new model is its layer list (a
// file beside this one) plus one line here.
#include "nn/models/zoo.h"

#include "core/error.h"

namespace cohort::nn {

namespace {

// A classifier of images, as registered: its layers for K classes and the
// input it takes (any size from `min_image` up when min_image > 0).
struct ImageModel {
  std::string name, description;
  InputSpec input;
  int classes = 10;
  InitStyle init = InitStyle::kTorch;
  std::string head;  // ModelSpec::head
  std::function<std::unique_ptr<Sequential>(int64_t classes)> layers;
  int64_t min_image = 0;
};

std::shared_ptr<const ModelSpec> spec_of(const ImageModel& m) {
  auto s = std::make_shared<ModelSpec>();
  s->name = m.name;
  s->description = m.description;
  s->input = m.input;
  s->output = OutputKind::kClasses;
  s->classes = m.classes;
  s->init = m.init;
  s->head = m.head;
  s->layers = [f = m.layers, k = m.classes] { return f(k); };
  s->with_classes = [m](int64_t k) {
    ImageModel v = m;
    v.classes = int(k);
    return spec_of(v);
  };
  s->min_image = m.min_image;
  if (m.min_image > 0)
    s->with_image = [m](int64_t h, int64_t w) {
      ImageModel v = m;
      v.input = InputSpec::image(h, w, m.input.shape[2]);
      return spec_of(v);
    };
  return s;
}

std::shared_ptr<const ModelSpec> spec(const char* name, const std::string& description,
                                      InputSpec input, InitStyle init, const char* head,
                                      std::function<std::unique_ptr<Sequential>(int64_t)> layers) {
  return spec_of({name, description, input, 10, init, head, std::move(layers)});
}

// torchvision's: ImageNet's 224x224 input (any size from 32x32), 1000 classes.
std::shared_ptr<const ModelSpec> tv_spec(const char* name, const std::string& what,
                                         const char* head,
                                         std::function<std::unique_ptr<Sequential>(int64_t)> layers) {
  return spec_of({name, what + ", ImageNet architecture (torchvision), any input >= 32x32",
                  InputSpec::image(224, 224, 3), 1000, InitStyle::kTorch, head, std::move(layers),
                  32});
}

}  // namespace

// Two families of VGG and ResNet: the CIFAR-stem variants (cifar-*, 32x32
// input, the studies' models) and torchvision's ImageNet architectures under
// torchvision's own names (any input from 32x32; 224x224 natively), so that
// `--load` takes a torchvision state dict saved as safetensors as it is.
const std::vector<std::shared_ptr<const ModelSpec>>& model_zoo() {
  const InputSpec mnist = InputSpec::image(28, 28, 1), cifar = InputSpec::image(32, 32, 3);
  // The study defined its two MNIST models in Keras: they start from Keras' init.
  const InitStyle keras = InitStyle::kKeras, torch = InitStyle::kTorch;
  static const std::vector<std::shared_ptr<const ModelSpec>> kZoo = {
      spec("mnist-small", "conv32-fc64-fc10, 'same' padding (PyTorch vs TensorFlow study)", mnist,
           keras, "fc2", mnist_small),
      spec("mnist-large", "conv128-conv256-conv512-fc512-fc512-fc10, valid padding (same study)",
           mnist, keras, "fc3", mnist_large),
      spec("lenet", "conv10-conv20-fc50-fc10, the classic PyTorch MNIST example", mnist, torch,
           "fc2", lenet),
      spec("cifar-vgg16", "VGG-16 with batch-norm, CIFAR stem (32x32)", cifar, torch, "fc",
           cifar_vgg16),
      spec("cifar-resnet50", "ResNet-50, CIFAR stem (32x32)", cifar, torch, "fc",
           [](int64_t k) { return cifar_resnet(50, k); }),
      spec("cifar-resnet101", "ResNet-101, CIFAR stem (32x32)", cifar, torch, "fc",
           [](int64_t k) { return cifar_resnet(101, k); }),
      spec("cifar-resnet152", "ResNet-152, CIFAR stem (32x32)", cifar, torch, "fc",
           [](int64_t k) { return cifar_resnet(152, k); }),
      tv_spec("resnet18", "ResNet-18", "fc", [](int64_t k) { return tv_resnet(18, k); }),
      tv_spec("resnet50", "ResNet-50", "fc", [](int64_t k) { return tv_resnet(50, k); }),
      tv_spec("resnet101", "ResNet-101", "fc", [](int64_t k) { return tv_resnet(101, k); }),
      tv_spec("resnet152", "ResNet-152", "fc", [](int64_t k) { return tv_resnet(152, k); }),
      tv_spec("vgg16", "VGG-16", "classifier.6", [](int64_t k) { return tv_vgg16(false, k); }),
      tv_spec("vgg16_bn", "VGG-16 with batch-norm", "classifier.6",
              [](int64_t k) { return tv_vgg16(true, k); }),
      // GPT-2 as Hugging Face and llm.c define it; gpt2-tiny reads bytes, for tests.
      gpt2_spec("gpt2-tiny", "GPT-2 for tests", {4, 64, 4, 256, 64}),
      gpt2_spec("gpt2", "GPT-2 124M", {12, 768, 12, 50257, 1024}),
      gpt2_spec("gpt2-medium", "GPT-2 355M", {24, 1024, 16, 50257, 1024}),
      gpt2_spec("gpt2-large", "GPT-2 774M", {36, 1280, 20, 50257, 1024}),
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

std::shared_ptr<const ModelSpec> find_model(const std::string& name, int64_t seq,
                                            int64_t vocab) {
  auto spec = find_model(name);
  if (seq == 0 && vocab == 0) return spec;
  COHORT_INPUT_CHECK(spec->with_tokens, seq ? "--seq" : "--vocab", ": --model ", name,
                     " reads images, not token sequences");
  COHORT_INPUT_CHECK(seq >= 0 && seq <= 65536, "--seq must be 1..65536, got ", seq);
  COHORT_INPUT_CHECK(vocab >= 0 && vocab <= (1 << 24), "--vocab must be 1..16777216, got ", vocab);
  return spec->with_tokens(seq, vocab);
}

std::shared_ptr<const ModelSpec> with_classes(std::shared_ptr<const ModelSpec> spec,
                                              int64_t classes) {
  if (classes == 0) return spec;
  COHORT_INPUT_CHECK(spec->with_classes, "--num-classes: --model ", spec->name,
                     " predicts tokens; its output is the vocabulary (--vocab)");
  COHORT_INPUT_CHECK(classes >= 1 && classes <= (1 << 20), "--num-classes must be 1..1048576, got ",
                     classes);
  return spec->with_classes(classes);
}

std::shared_ptr<const ModelSpec> with_image(std::shared_ptr<const ModelSpec> spec, int64_t h,
                                            int64_t w, const std::string& what) {
  const Shape& in = spec->input.shape;
  if (in.size() == 3 && in[0] == h && in[1] == w) return spec;
  COHORT_INPUT_CHECK(spec->with_image, what, " gives ", h, "x", w, " images but --model ",
                     spec->name, " takes ", shape_str(in), " only");
  COHORT_INPUT_CHECK(h >= spec->min_image && w >= spec->min_image && h <= 4096 && w <= 4096, what,
                     " gives ", h, "x", w, " images but --model ", spec->name, " takes ",
                     spec->min_image, "x", spec->min_image, " to 4096x4096");
  return spec->with_image(h, w);
}

int64_t count_params(const ModelSpec& spec) {
  Arena params, buffers;
  ParamRegistry reg{&params, &buffers};
  spec.layers()->register_params(reg, "");
  return params.size();
}

}  // namespace cohort::nn
