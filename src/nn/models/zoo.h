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

// Per family, the layer list (unbuilt).
std::unique_ptr<Sequential> mnist_small();
std::unique_ptr<Sequential> mnist_large();
std::unique_ptr<Sequential> lenet();
std::unique_ptr<Sequential> vgg16();
std::unique_ptr<Sequential> resnet(int depth);  // 50, 101, 152

}  // namespace cohort::nn
