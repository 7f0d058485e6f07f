// Strategy: what the training loop asks of a way of training (single
// process, data-parallel, parameter server, pipeline...). Each owns one
// training step; the loop owns epochs, data, evaluation and reports.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/rng.h"
#include "data/batch.h"
#include "optim/loss_scale.h"

namespace cohort {

struct StepResult {
  double loss_sum = 0;  // summed over this rank's batch
  double correct = 0;   // samples right (for tokens: each sample's share of positions right)
  int64_t images = 0;
};

// Where a step's time went on this rank, accumulated over steps.
struct StepTimes {
  double compute = 0;  // forward, backward, optimizer
  double comm = 0;     // waiting for communication that compute did not hide
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int rank() const { return 0; }
  virtual int world() const { return 1; }
  // One optimizer step on this rank's batch.
  virtual StepResult step(const Batch& batch, float lr, StepTimes& times) = 0;
  // Sums v[0..n) over ranks in place (metrics); nothing to do on one process.
  virtual void sum(double* v, int n) {}
  // Which shard of the data this rank reads: model and pipeline stages all
  // read the same batch (data_world 1); data parallelism shards it.
  virtual int data_rank() const { return rank(); }
  virtual int data_world() const { return world(); }
  // How many ranks report each training image (stages each report the batch).
  virtual int metric_replicas() const { return 1; }
  // Makes every rank's copy of the whole model current (stages own parts).
  virtual void sync_model() {}
  // The range [begin, end) of the parameter arena this rank's optimizer
  // updates, whose state checkpoints gather and restore; end -1: the whole
  // arena. Stages and parameter servers own ranges; workers none ({0, 0}).
  virtual std::pair<int64_t, int64_t> optimizer_range() const { return {0, -1}; }
  // ZeRO stage 3 keeps only this rank's shard of the parameters between
  // steps. gather_params(root) makes rank root's arena (root -1: every
  // rank's) hold the whole model, for a save or an evaluation that reads it
  // directly; release_params() returns the other ranks' ranges to the
  // kernel. Collective; nothing to do where every rank holds the model.
  virtual void gather_params(int root) {}
  virtual void release_params() {}
  // Figures of this strategy for the run's summary, as {"key": {...}}
  // (pipeline bubble and activation memory, parameter-server staleness).
  // Collective: every rank calls it once, after training; rank 0's is printed.
  virtual nlohmann::ordered_json summary() { return nlohmann::ordered_json::object(); }
  // The fp16 loss scaler whose state checkpoints carry (every rank's decides
  // alike, so rank 0's is saved and every rank restores it); null otherwise.
  virtual LossScaler* loss_scaler() { return nullptr; }
  // This rank's dropout generator, whose state commits carry (null: none).
  virtual Rng* dropout_rng() { return nullptr; }
};

}  // namespace cohort
