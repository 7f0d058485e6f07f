// Each rank's memory, estimated before the model is built, and the check
// that refuses a run whose ranks on this machine would not fit together
// (one line naming what would fit instead: a ZeRO stage, or fewer ranks).
//
// Bytes per rank, Psi parameters over N data-parallel ranks, K bytes of f32
// optimizer state per parameter (Adam/AdamW 8, SGD with momentum 4, without 0):
//   dp, none     4Psi weights + 4Psi gradients + K Psi state
//   zero 1       4Psi + 4Psi + K Psi/N
//   zero 2       4Psi + 4Psi/N + K Psi/N + one gradient bucket in flight
//   zero 3       4Psi/N + 4Psi/N + K Psi/N + the two largest top-level layers
//                whole (one computed, the next prefetched)
// plus bf16's copy of the weights (2Psi; under ZeRO: of the working set),
// activations, data and the process. At bf16, stages 1 and 2 on N > 2 hold
// DeepSpeed's layout instead: 2Psi - 2Psi/N of bf16 weights + 4Psi/N of f32
// masters + the widened working set (parallel/zero_replica.h), gradients as
// above. With --grad-dtype bf16 (N > 1) ZeRO's gradient shard and buckets
// hold 2 bytes an element (parallel/zero_grads.h).
// pp, mp, ps, hybrid and replicas are estimated as dp: every rank builds
// the whole model before the strategy divides it (set_up), so each holds at
// most what a dp rank holds.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/model.h"
#include "parallel/defaults.h"
#include "train/config.h"

namespace cohort {

// What the estimate reads of a model, found without allocating it.
struct ModelFigures {
  int64_t params = 0;           // Psi
  int64_t working_set = 0;      // the two largest units ZeRO-3 gathers, parameters
  // The same without a tied vocabulary matrix (GPT-2's wte) but with two of
  // its row blocks: ZeRO streams it at f32 and bf16 (parallel/zero_layers.h); 0: no
  // such matrix.
  int64_t working_set_streamed = 0;
  double activation_elems = 0;  // every module's output at the batch (nn::Module)
  double data_bytes = 0;        // the data set held in memory
};

// What the estimate reads of the run.
struct MemoryPlanInputs {
  std::string strategy = "dp";  // --parallel (as under ranks: none on N > 1 is dp)
  int zero_stage = 1;           // under zero
  int ranks = 1;                // N: data-parallel ranks of the job
  int optimizer_bytes = 8;      // K: f32 state bytes per parameter
  DType precision = DType::kF32;
  DType grad_comm = DType::kF32;  // --grad-dtype
  int accumulate = 1;
  double bucket_mb = kDefaultBucketMb;
  double prefetch_mb = kDefaultPrefetchMb;  // stage 3's parameters gathered ahead
};

// Bytes per rank, by part.
struct MemoryEstimate {
  double parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, data = 0,
         overhead = 0;
  double total() const {
    return parameters + gradients + optimizer_state + activations + data + overhead;
  }
  nlohmann::ordered_json to_json() const;  // MB per part and the total
};

// K for --optimizer (and --momentum for sgd).
int optimizer_state_bytes(const std::string& optimizer, float momentum);
// The closed forms above, for one rank.
MemoryEstimate estimate_memory(const ModelFigures& model, const MemoryPlanInputs& in);
// The model's figures at `batch` per rank (ZeRO-3's units cut at buckets of
// `bucket_mb`: parallel/zero_layers.h), and the data set's bytes.
ModelFigures model_figures(const nn::ModelSpec& spec, const TrainConfig& cfg,
                           double bucket_mb = kDefaultBucketMb);
// This run's inputs: the strategy as it runs on `world` ranks.
MemoryPlanInputs plan_inputs(const TrainConfig& cfg, const RunSettings& settings, int world);

// Bytes this process may still take: /proc/meminfo's MemAvailable, or the
// cgroup's memory.max when lower (0 when neither can be read).
double available_memory_bytes();

// InputError (one line) when `local_ranks` ranks of this estimate exceed
// `available` bytes, naming the estimate, what is available and what would
// fit: the lowest ZeRO stage above the run's, else the most ranks that fit.
void check_memory(const ModelFigures& model, const MemoryPlanInputs& in, int local_ranks,
                  double available);

}  // namespace cohort
