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

// Per family, the layer list (unbuilt).
std::unique_ptr<Sequential> mnist_small();
std::unique_ptr<Sequential> mnist_large();
std::unique_ptr<Sequential> lenet();
std::unique_ptr<Sequential> vgg16();
std::unique_ptr<Sequential> resnet(int depth);  // 50, 101, 152

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

// `spec` fed size x size images (--resize); InputError naming --resize for a
// token model, a size out of 1..1024, or layers that cannot take that size
// (a Flatten sized for the stored images).
std::shared_ptr<const ModelSpec> with_image_size(std::shared_ptr<const ModelSpec> spec,
                                                 int64_t size);

}  // namespace cohort::nn
