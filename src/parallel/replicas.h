// Single-process replicas: PyTorch's DataParallel. One process, N replica
// threads; every step the master's weights are copied to the replicas, the
// batch is split N ways, each replica runs forward and backward on its slice,
// and the replicas' gradients are summed into the master's arena, where the
// optimizer runs. Same answer as one replica at the same batch.
#pragma once
#include <memory>
#include <vector>

#include "parallel/local.h"

namespace cohort {

class Replicas final : public Strategy {
 public:
  // threads: OpenMP threads per replica.
  Replicas(nn::Model& master, Optimizer& opt, int replicas, int threads, uint64_t seed,
           float clip_norm = 0, const Precision& precision = {});
  std::string name() const override { return "replicas"; }
  nlohmann::ordered_json summary() override { return master_step_.summary(); }
  LossScaler* loss_scaler() override { return master_step_.loss_scaler(); }
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  std::pair<int64_t, int64_t> optimizer_range() const override {
    return master_step_.optimizer_range();
  }

 private:
  nn::Model& master_;
  int threads_;
  LocalStep master_step_;
  std::vector<std::unique_ptr<nn::Model>> models_;     // replicas 1..N-1
  std::vector<std::unique_ptr<LocalStep>> steps_;
};

}  // namespace cohort
