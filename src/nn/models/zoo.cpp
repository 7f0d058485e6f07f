// The registrations: one entry per model. A new model is its layer list (a
// file beside this one) plus one line here.
#include "nn/models/zoo.h"

#include "core/error.h"

namespace cohort::nn {

namespace {

std::shared_ptr<const ModelSpec> spec(const char* name, const char* description, InputSpec input,
                                      int classes, InitStyle init,
                                      std::function<std::unique_ptr<Sequential>()> layers,
                                      const char* head) {
  auto s = std::make_shared<ModelSpec>();
  s->name = name;
  s->description = description;
  s->input = input;
  s->output = OutputKind::kClasses;
  s->classes = classes;
  s->init = init;
  s->layers = std::move(layers);
  s->head = head;
  return s;
}

}  // namespace

const std::vector<std::shared_ptr<const ModelSpec>>& model_zoo() {
  const InputSpec mnist = InputSpec::image(28, 28, 1), cifar = InputSpec::image(32, 32, 3);
  // The study defined its two MNIST models in Keras: they start from Keras' init.
  const InitStyle keras = InitStyle::kKeras, torch = InitStyle::kTorch;
  static const std::vector<std::shared_ptr<const ModelSpec>> kZoo = {
      spec("mnist-small", "conv32-fc64-fc10, 'same' padding (PyTorch vs TensorFlow study)", mnist,
           10, keras, mnist_small, "fc2"),
      spec("mnist-large", "conv128-conv256-conv512-fc512-fc512-fc10, valid padding (same study)",
           mnist, 10, keras, mnist_large, "fc3"),
      spec("lenet", "conv10-conv20-fc50-fc10, the classic PyTorch MNIST example", mnist, 10, torch,
           lenet, "fc2"),
      spec("vgg16", "VGG-16 with batch-norm, CIFAR-10 input", cifar, 10, torch, vgg16, "fc"),
      spec("resnet50", "ResNet-50, CIFAR-10 stem", cifar, 10, torch, [] { return resnet(50); },
           "fc"),
      spec("resnet101", "ResNet-101, CIFAR-10 stem", cifar, 10, torch, [] { return resnet(101); },
           "fc"),
      spec("resnet152", "ResNet-152, CIFAR-10 stem", cifar, 10, torch, [] { return resnet(152); },
           "fc"),
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

std::shared_ptr<const ModelSpec> with_image_size(std::shared_ptr<const ModelSpec> spec,
                                                 int64_t size) {
  COHORT_INPUT_CHECK(spec->input.kind == InputKind::kImage, "--resize: --model ", spec->name,
                     " reads token sequences, not images");
  COHORT_INPUT_CHECK(size >= 1 && size <= 1024, "--resize must be 1..1024, got ", size);
  auto s = std::make_shared<ModelSpec>(*spec);
  s->input.shape = {size, size, spec->input.shape[2]};
  try {
    s->layers()->output_shape({1, size, size, spec->input.shape[2]});
  } catch (const Error& e) {
    throw InputError(detail::concat("--resize ", size, ": --model ", spec->name, " cannot take ",
                                    size, "x", size, " images (", e.what(), ")"));
  }
  return s;
}

int64_t count_params(const ModelSpec& spec) {
  Arena params, buffers;
  ParamRegistry reg{&params, &buffers};
  spec.layers()->register_params(reg, "");
  return params.size();
}

}  // namespace cohort::nn
