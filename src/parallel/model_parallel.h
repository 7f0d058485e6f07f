// Model parallelism: the model cut into K contiguous stages, stage s on rank
// s. Activations travel forward and their gradients backward by send/recv;
// each rank's optimizer updates only its own stage's range of the arena. Every
// rank reads the same batch. Same answer as one process at the same batch.
#pragma once
#include <vector>

#include "comm/communicator.h"
#include "parallel/local.h"

namespace cohort {

class ModelParallel final : public Strategy {
 public:
  // cuts: from cut_stages(); comm.size() must equal the number of stages.
  ModelParallel(comm::Communicator& comm, nn::Model& model, Optimizer& opt,
                std::vector<size_t> cuts);
  std::string name() const override { return "mp"; }
  int rank() const override { return comm_.rank(); }
  int world() const override { return comm_.size(); }
  int data_rank() const override { return 0; }
  int data_world() const override { return 1; }
  int metric_replicas() const override { return comm_.size(); }
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  void sum(double* v, int n) override;
  void sync_model() override;
  std::pair<int64_t, int64_t> optimizer_range() const override {
    return {param_begin_, param_end_};
  }

 private:
  comm::Communicator& comm_;
  nn::Model& model_;
  Optimizer& opt_;
  std::vector<size_t> cuts_;
  size_t begin_, end_;                   // this rank's layers
  int64_t param_begin_, param_end_;      // and its arena range
  Tensor x_, g_, dlogits_;
};

}  // namespace cohort
