// The model zoo: the studies' models, each registered once in zoo.cpp (name,
// description, input, output, init, layers; its loss when not softmax
// cross-entropy). Everything else — the CLI, the trainer, the benchmarks —
// asks the zoo; strategies get a Model and build more from its spec.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"

namespace cohort::nn {

// Every registered model, in listing order.
const std::vector<std::shared_ptr<const ModelSpec>>& model_zoo();
// The registered spec of `name`; unknown name -> InputError naming --model.
std::shared_ptr<const ModelSpec> find_model(const std::string& name);
// Builds (registers, allocates, initializes from seed) the named model.
std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed = 0);
// Parameters of a spec, counted without allocating them (gpt2-large: 774M).
int64_t count_params(const ModelSpec& spec);

// `spec` with a head of `classes` outputs (--num-classes; 0: unchanged), or
// at an input of h x w (its own channels). InputError naming --num-classes
// for a token model or a bad count; naming `what` (the flag or data set that
// sets the size) for a fixed-size model or one smaller than it takes.
std::shared_ptr<const ModelSpec> with_classes(std::shared_ptr<const ModelSpec> spec,
                                              int64_t classes);
std::shared_ptr<const ModelSpec> with_image(std::shared_ptr<const ModelSpec> spec, int64_t h,
                                            int64_t w, const std::string& what);

// Per family, the layer list (unbuilt) for `classes` outputs.
std::unique_ptr<Sequential> mnist_small(int64_t classes);
std::unique_ptr<Sequential> mnist_large(int64_t classes);
std::unique_ptr<Sequential> lenet(int64_t classes);
// CIFAR stem (32x32 input): cifar-vgg16, cifar-resnet50/101/152.
std::unique_ptr<Sequential> cifar_vgg16(int64_t classes);
std::unique_ptr<Sequential> cifar_resnet(int depth, int64_t classes);  // 50, 101, 152
// Appends torchvision's stages layer1..4 (depth 18: basic blocks; 50, 101,
// 152: bottlenecks) after a 64-channel stem; returns their output channels.
int64_t add_resnet_stages(Sequential& s, int depth);
// ImageNet architectures under torchvision's names: resnet18/50/101/152, vgg16(_bn).
std::unique_ptr<Sequential> tv_resnet(int depth, int64_t classes);  // 18, 50, 101, 152
std::unique_ptr<Sequential> tv_vgg16(bool batch_norm, int64_t classes);

// GPT-2: layers, width C, heads, vocabulary V, context (positions).
struct GptConfig {
  int64_t layers, width, heads, vocab, context;
};
std::unique_ptr<Sequential> gpt2(const GptConfig& g);
// Its spec; with_tokens() gives the same model at another context or vocabulary.
std::shared_ptr<const ModelSpec> gpt2_spec(const std::string& name, const std::string& about,
                                           const GptConfig& g);

// `name` at a context of `seq` tokens and a vocabulary of `vocab` (0: the
// model's own); InputError naming --seq / --vocab for a model of images.
std::shared_ptr<const ModelSpec> find_model(const std::string& name, int64_t seq, int64_t vocab);

}  // namespace cohort::nn
