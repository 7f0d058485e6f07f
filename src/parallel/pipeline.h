// Model parallelism (mp: one micro-batch), pipeline parallelism (GPipe,
// 1F1B) and hybrid data + pipeline parallelism.
// The model is cut into K stages, stage s on pipeline rank s; each batch is
// split into M micro-batches that flow through the stages, so stages work on
// different micro-batches at once. Every micro-batch in flight on a stage
// runs on its own slot: a view of the model over the same arenas
// (Model::build_shared) with its own activations, so the gradients of all M
// micro-batches accumulate into one arena and one optimizer step follows —
// the same answer as one process at the same batch.
//
// Schedules, on stage s: gpipe runs all M forwards, then all M backwards (M
// slots); 1f1b runs K-s-1 forwards, then alternates one forward and one
// backward, then drains (at most K-s slots), so it holds fewer activations.
//
// Hybrid: D replicas of the pipeline. World rank r is stage r % K of replica
// r / K; each replica reads its own shard of the data, and after the last
// backward each stage all-reduces its gradient range with the same stage of
// the other replicas (a sub-communicator), then steps.
#pragma once
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/memory.h"
#include "nn/model.h"
#include "optim/loss_scale.h"
#include "optim/optimizer.h"
#include "optim/precision.h"
#include "parallel/grad_reduce.h"
#include "parallel/strategy.h"

namespace cohort {

struct PipelineConfig {
  std::string name = "pp";  // mp (one micro-batch), pp or hybrid (dp > 1)
  int micro_batches = 4;
  bool one_f_one_b = true;  // false: gpipe
  int dp = 1;               // data-parallel replicas of the pipeline (hybrid)
  // Stages compute, and send activations and their gradients, in its
  // activation dtype (bf16 under --precision bf16).
  Precision precision;
};

class Pipeline final : public Strategy {
 public:
  // cuts: from cut_stages(); world.size() must be cfg.dp * stages.
  Pipeline(comm::Communicator& world, nn::Model& model, Optimizer& opt, std::vector<size_t> cuts,
           PipelineConfig cfg, uint64_t seed);
  ~Pipeline() override;
  std::string name() const override { return cfg_.name; }
  int rank() const override { return world_.rank(); }
  int world() const override { return world_.size(); }
  int data_rank() const override { return world_.rank() / stages_; }
  int data_world() const override { return cfg_.dp; }
  int metric_replicas() const override { return stages_; }
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  void sum(double* v, int n) override;
  void sync_model() override;
  std::pair<int64_t, int64_t> optimizer_range() const override {
    return {param_begin_, param_end_};
  }
  LossScaler* loss_scaler() override { return scaler_.enabled() ? &scaler_ : nullptr; }
  nlohmann::ordered_json summary() override;
  Rng* dropout_rng() override { return &rng_; }

 private:
  struct Slot;
  // This replica's pipeline: the world itself unless hybrid split it.
  comm::Communicator& pipe() { return pipe_ ? *pipe_ : world_; }
  Slot& acquire();
  void release(Slot& s);
  void forward(int m, const Batch& batch, double* metrics, StepTimes& times);
  // Tied parameters (GPT-2's wte and lm_head) may sit on two stages: each
  // step their gradient slot starts at zero everywhere, the stages' shares
  // are summed over the pipeline, and the owner's updated values go to all.
  void zero_tied_grads();
  void sum_tied_grads();
  void broadcast_tied_weights();
  void backward(int m, StepTimes& times);

  comm::Communicator& world_;
  std::unique_ptr<comm::Communicator> pipe_, dp_;  // this replica's stages; this stage's replicas
  nn::Model& model_;
  Optimizer& opt_;
  std::vector<size_t> cuts_;
  PipelineConfig cfg_;
  GradReducer reducer_;  // hybrid: this stage's gradient range over its replicas
  Rng rng_;
  LossScaler scaler_;  // fp16: every rank keeps one, and all decide alike by a vote
  int stages_, stage_;
  struct TiedRange {
    int64_t begin, end;  // the owner's slot in the arenas
    int owner_stage;
  };
  std::vector<TiedRange> ties_;
  size_t begin_, end_;               // this stage's layers
  // Its arena range that trains: the stage's parameters from the first
  // unfrozen one (--freeze; empty for a stage wholly frozen).
  int64_t param_begin_, param_end_;
  bool trains_ = true;     // false: every layer frozen, no backward at all
  bool sends_dx_ = false;  // the stage before trains, so it needs this stage's dx
  int64_t micro_ = 0, batch_ = 0;    // rows per micro-batch, per replica batch
  bool first_backward_ = true;
  std::shared_ptr<MemoryCounter> activations_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> in_flight_;  // by micro-batch index, this step
  // Measured: seconds waiting for a neighbour vs the steps' wall time.
  double wait_s_ = 0, step_s_ = 0;
};

}  // namespace cohort
