// `cohort train`: the loop over epochs and steps, with progress, per-epoch
// evaluation, per-class accuracy and checkpoints. Given a communicator it
// runs the strategy --parallel names on every rank; only rank 0 prints.
#pragma once
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "train/config.h"

namespace cohort {

// Refuses bad flags with an InputError naming the flag, before any rank
// starts work: values out of range, a strategy that needs another number of
// ranks than `world`, stages that cannot be cut, micro-batches that do not
// divide the batch, as many servers as ranks.
void check_config(const TrainConfig& cfg, int world);

// --global-batch G: a copy whose per-rank --batch is G / (world x
// --accumulate); InputError naming the flags where that does not divide.
// Unchanged without --global-batch.
TrainConfig with_global_batch(const TrainConfig& cfg, int world);

// Runs the training the config describes; returns the summary rank 0 printed.
// comm is null for a single process.
nlohmann::ordered_json train(const TrainConfig& cfg, comm::Communicator* comm = nullptr);

// Class names of a dataset, for the per-class table.
std::vector<std::string> class_names(const std::string& dataset);

}  // namespace cohort
