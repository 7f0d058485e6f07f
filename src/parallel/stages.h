// Cutting a model into contiguous stages of its top-level layers (DESIGN
// principle 3), for model and pipeline parallelism.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/model.h"

namespace cohort {

// K+1 layer boundaries: stage s runs layers [cuts[s], cuts[s+1]). `split`
// ("3,7") gives the K-1 inner cut points; empty: balance by parameter count.
// InputError for more stages than layers or a split that leaves a stage empty.
std::vector<size_t> cut_stages(nn::Model& model, int stages, const std::string& split);

// Makes every rank's copy of the whole model current: stage s (rank s of
// `comm`) broadcasts its parameters and buffers.
void broadcast_stages(comm::Communicator& comm, nn::Model& model, const std::vector<size_t>& cuts);

}  // namespace cohort
