// The model zoo: the studies' models by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"

namespace cohort::nn {

struct ModelEntry {
  std::string name;
  std::string description;
};

const std::vector<ModelEntry>& model_names();
// Builds (registers, allocates, initializes from seed) the model; unknown name -> InputError.
std::unique_ptr<Model> make_model(const std::string& name, uint64_t seed = 0);
// Another model of owner's kind over owner's arenas (Model::build_shared).
std::unique_ptr<Model> make_model_view(Model& owner);

// Per family, the layer list (unbuilt).
std::unique_ptr<Sequential> mnist_small();
std::unique_ptr<Sequential> mnist_large();
std::unique_ptr<Sequential> lenet();
std::unique_ptr<Sequential> vgg16();
std::unique_ptr<Sequential> resnet(int depth);  // 50, 101, 152

}  // namespace cohort::nn
