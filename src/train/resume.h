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
//   optimizer.shards            sharded saves: the shard files (below)
//   epoch.samples               commits within an epoch (--commit-every): the
//                               global samples of epoch+1 already consumed
//                               (data/sampler.h), and epoch.sums the epoch
//                               line's loss, correct and image sums so far
//   rng.world, rng.<r>          every rank's dropout generator (RngState,
//                               hex), so a resumed run draws the same masks
// Where ranks own ranges of the state (Strategy::optimizer_range), two layouts:
//  - Each rank its own range, together tiling the arena (ZeRO; mp and pp
//    without replicas): no rank gathers the state. F holds the weights,
//    buffers and metadata only (what PyTorch's load_file and --load under
//    any strategy read), and each rank writes its range of the state to its
//    own file beside F, "F.optim-g<G>-<r>-of-<N>.safetensors", listed in F's
//    metadata "optimizer.shards" with its range and size (train/state_shards.h).
//    The save is atomic as a whole: each shard is written under a name new
//    to this save (generation G, one more than F lists), fsynced and
//    renamed; the ranks agree that all are in place; only then is F written
//    and renamed onto the old F, the one commit point; the previous save's
//    shards are removed after. A failure or crash at any point before F's
//    rename leaves the previous F and the shards it lists untouched (the
//    new shards are removed, or orphans the next save removes); one after
//    it leaves the new save whole and at most stale files.
//    --resume reads from each shard overlapping its own range only the
//    slice it needs, at any rank count or strategy (a single process reads
//    all); every listed shard is checked against F's listing (size, range,
//    generation, tensors) first, and one that differs is refused by name.
//  - Otherwise (pipeline replicas, ps servers beside workers) rank 0 gathers
//    the state into F and each rank restores its own range. dp and a single
//    process write one file with the state inside, as before. Should the
//    ranks' ranges not tile the arena or their step counts differ, a save
//    holds weights and position only, and says so.
// Either layout resumes under any strategy, and files of either are read.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "core/rng.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "parallel/strategy.h"
#include "train/config.h"

namespace cohort {

// A dropout generator's whole state (Rng's four words), so a resumed run
// continues the same stream.
using RngState = std::array<uint64_t, 4>;
RngState rng_state(const Rng& rng);
void set_rng_state(Rng& rng, const RngState& state);

// Where a run stands at the end of an epoch, or where a resumed one starts.
struct RunPosition {
  int epoch = 0;        // epochs finished; the next epoch's sampler index
  int64_t updates = 0;  // optimizer updates done; the schedule's next step
  std::string loss_scale;  // fp16 runs: the loss scaler's state (LossScaler::state)
  int64_t epoch_samples = 0;  // global samples of epoch+1 consumed (a commit within it)
  std::array<double, 3> epoch_sums{};  // the epoch line's [loss, correct, images] so far
  std::vector<RngState> rngs;  // each rank's dropout generator, in rank order (empty: none)
};

// The range [begin, end) of the parameter arena one rank's optimizer updates
// (Strategy::optimizer_range; end -1: the whole arena).
using ArenaRange = std::pair<int64_t, int64_t>;

// Before training, on every rank, once the strategy is built. --load: the
// weights and buffers only (any optimizer; a fresh run from epoch 1).
// --resume: the weights and buffers, this rank's `range` of the optimizer's
// state (from F, or the slices of F's shards that overlap it) and its step count, and the position the run continues from. The
// whole file is validated before anything is modified: InputError, one line
// naming the file and the tensor or metadata at fault, for another model or
// optimizer, a missing tensor or one of the wrong shape, or a run already at
// --epochs. `print`: rank 0, which prints a one-line notice where the file
// holds no optimizer state.
RunPosition restore_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt,
                               ArenaRange range, bool print);

// Writes cfg.save for a run at `done`. Collective where comm is non-null:
// every rank calls it after each epoch; each writes its shard, or rank 0
// gathers the ranges of the optimizer state, and rank 0 writes F between
// strategy->gather_params(0) and release_params() (strategy may be null:
// every arena holds the whole model). `print`: rank 0's first save, which
// prints the weights-only notice where the state cannot be gathered.
void save_run_checkpoint(const TrainConfig& cfg, nn::Model& model, Optimizer& opt, ArenaRange range,
                         comm::Communicator* comm, Strategy* strategy, const RunPosition& done,
                         bool print);

}  // namespace cohort
