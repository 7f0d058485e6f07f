// Cutting a model into contiguous stages of its top-level layers (DESIGN
// principle 3), for model and pipeline parallelism.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/model.h"

namespace cohort {

// K+1 layer boundaries: stage s runs layers [cuts[s], cuts[s+1]). `split`
// ("3,7") gives the K-1 inner cut points; empty: balance by `weights` (one
// per top-level layer), or by parameter count when weights is null.
// InputError for more stages than layers or a split that leaves a stage empty.
std::vector<size_t> cut_stages(nn::Model& model, int stages, const std::string& split,
                               const std::vector<double>* weights = nullptr);

// The K+1 boundaries --split gives over n layers ("3,7": the K-1 inner cuts);
// InputError naming --split for cuts that leave a stage empty.
std::vector<size_t> split_cuts(const std::string& split, size_t n, int stages);

// The K+1 boundaries that cut `w` (one weight per layer) where the running
// total passes s/K of it, at least one layer per stage.
std::vector<size_t> balance_cuts(const std::vector<double>& w, int stages);

// Measured seconds of forward + backward of each top-level layer on `rows`
// images (best of a few runs after a warm-up): weights that balance stages
// by time, where parameter count misleads (convolutions are few parameters
// and most of the work).
std::vector<double> time_layers(nn::Model& model, int64_t rows);

// The same measurement with forward and backward apart (the cost model's
// input: backward's order decides when a gradient bucket can be reduced).
struct LayerTimes {
  std::vector<double> forward, backward;
  std::vector<double> passes;  // each timed pass's seconds, every layer's forward and backward
};
// `runs` passes, the first a warm-up; each layer's best of the rest.
LayerTimes time_layers_split(nn::Model& model, int64_t rows, int runs = 3);

// The activation shape entering top-level layer i for an input of shape s
// ({N, H, W, C}): what a stage starting at layer i receives.
Shape shape_before(nn::Sequential& layers, size_t i, Shape s);

// Makes every rank's copy of the whole model current: stage s (rank s of
// `comm`) broadcasts its parameters and buffers.
void broadcast_stages(comm::Communicator& comm, nn::Model& model, const std::vector<size_t>& cuts);

}  // namespace cohort
