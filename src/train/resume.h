// Checkpoints of a training run, for `cohort train --save / --load / --resume`.
// One safetensors file (train/checkpoint.h) holds the model's parameters and
// buffers under their own names, the optimizer's state as flat tensors
// "optimizer.<name>" of shape {parameters} in arena order (Adam: exp_avg,
// exp_avg_sq; SGD with momentum: momentum_buffer), and metadata:
//   model, dataset, parallel    what wrote it
//   epoch                       epochs finished
//   updates                     optimizer updates done: the lr schedule's position
//   optimizer                   sgd | adam | adamw
//   optimizer.steps             the optimizer's step count (Adam's bias
//                               correction); only where the state is saved
//   loss_scale                  fp16 runs: the loss scaler's state, so a
//                               resumed run scales and skips as before
// Where ranks own ranges of the state (mp and pp stages, ps servers:
// Strategy::optimizer_range) rank 0 gathers it for the save and each rank
// restores its own range. Should the ranks' ranges not tile the arena or
// their step counts differ, a save holds weights and position only, and
// says so.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "comm/communicator.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "train/config.h"

namespace cohort {

// Where a run stands at the end of an epoch, or where a resumed one starts.
struct RunPosition {
  int epoch = 0;        // epochs finished; the next epoch's sampler index
  int64_t updates = 0;  // optimizer updates done; the schedule's next step
  std::string loss_scale;  // fp16 runs: the loss scaler's state (LossScaler::state)
};

// The range [begin, end) of the parameter arena one rank's optimizer updates
// (Strategy::optimizer_range; end -1: the whole arena).
using ArenaRange = std::pair<int64_t, int64_t>;

// Before training, on every rank, once the strategy is built. --load: the
// weights and buffers only (any optimizer; a fresh run from epoch 1).
// --resume: the weights and buffers, this rank's `range` of the optimizer's
// state and its step count, and the position the run continues from. The
// whole file is validated before anything is modified: InputError, one line
// naming the file and the tensor or metadata at fault, for another model or
// optimizer, a missing tensor or one of the wrong shape, or a run already at
// --epochs. `print`: rank 0, which prints a one-line notice where the file
// holds no optimizer state.
RunPosition restore_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                               ArenaRange range, bool print);

// Writes cfg.save for a run at `done`. Collective where comm is non-null:
// every rank calls it after each epoch; rank 0 gathers the ranges of the
// optimizer state and writes. `print`: rank 0's first save, which prints
// the weights-only notice where the state cannot be gathered.
void save_run_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt, ArenaRange range,
                         comm::Communicator* comm, const RunPosition& done, bool print);

}  // namespace cohort
