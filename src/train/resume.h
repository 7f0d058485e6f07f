// Checkpoints of a training run, for `cohort train --save / --load / --resume`.
// One safetensors file (train/checkpoint.h) holds the model's parameters and
// buffers under their own names, and, where rank 0 holds the optimizer's
// state for the whole arena (--parallel none, dp, replicas), that state as
// flat tensors "optimizer.<name>" of shape {parameters} (Adam: exp_avg,
// exp_avg_sq; SGD with momentum: momentum_buffer), in arena order. Metadata:
//   model, dataset, parallel    what wrote it
//   epoch                       epochs finished
//   updates                     optimizer updates done: the lr schedule's position
//   optimizer                   sgd | adam | adamw
//   optimizer.steps             the optimizer's step count (Adam's bias
//                               correction); only where the state is saved
// Under mp, pp, hybrid and ps the stages or servers each hold a range of the
// state; those runs save weights and position only, and say so.
#pragma once
#include <cstdint>
#include <string>

#include "nn/model.h"
#include "optim/optimizer.h"
#include "train/config.h"

namespace cohort {

// Where a run stands at the end of an epoch, or where a resumed one starts.
struct RunPosition {
  int epoch = 0;        // epochs finished; the next epoch's sampler index
  int64_t updates = 0;  // optimizer updates done; the schedule's next step
};

// Whether rank 0's optimizer updates the whole arena under `parallel`, so
// its state is the whole run's (checkpoints save and restore it).
bool whole_optimizer_on_rank0(const std::string& parallel);

// Before training, on every rank. --load: the weights and buffers only (any
// optimizer; a fresh run from epoch 1). --resume: the weights and buffers,
// the optimizer's state and step count (where whole_optimizer_on_rank0), and
// the position the run continues from. The whole file is validated before
// anything is modified: InputError, one line naming the file and the tensor
// or metadata at fault, for another model or optimizer, a missing tensor or
// one of the wrong shape, or a run already at --epochs. `print`: rank 0,
// which prints a one-line notice where optimizer state is not restored.
RunPosition restore_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                               bool print);

// Writes cfg.save (rank 0, after each epoch) for a run at `done`. `print`:
// print the one-line weights-only notice (once per run) where the optimizer
// state is split over ranks.
void save_run_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                         const RunPosition& done, bool print);

}  // namespace cohort
