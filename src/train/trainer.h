// `cohort train`: the loop over epochs and steps on one process, with
// progress, per-epoch evaluation, per-class accuracy and checkpoints.
#pragma once
#include <nlohmann/json.hpp>

#include "train/config.h"

namespace cohort {

// Runs the training the config describes; returns the summary it printed.
nlohmann::ordered_json train(const TrainConfig& cfg);

// Class names of a dataset, for the per-class table.
std::vector<std::string> class_names(const std::string& dataset);

}  // namespace cohort
