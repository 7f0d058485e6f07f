// Parameter server (TensorFlow's ParameterServerStrategy): the last S ranks
// are servers, the others workers. The arena is sharded over the servers by
// contiguous ranges; server j keeps the weights and the optimizer state of
// its range. Each step a worker computes the gradient of its own batch,
// pushes each range to its server and pulls the new weights back.
//
// sync: a server waits for every worker, sums their gradients (each scaled
// by 1 / (workers x batch), so the sum is the mean over the global batch) and
// steps once: the same answer as data parallelism.
//
// async: a server applies each worker's gradient (the mean over that
// worker's batch) as it arrives and answers with its current weights. The
// staleness bound s (stale synchronous parallel): a worker that has pushed c
// gradients gets its answer only once every worker has pushed at least
// c - s, so no worker runs more than s steps ahead of the slowest; s = 0 is
// bulk-synchronous (every step waits for all). The staleness of a gradient is
// the number of updates the server applied between the weights it was
// computed on and its own update; the summary reports its mean and maximum.
#pragma once
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "parallel/local.h"

namespace cohort {

struct PsConfig {
  int servers = 1;
  bool async = false;
  int staleness = -1;  // async: steps a worker may run ahead of the slowest; -1: no bound
};

class ParameterServer final : public Strategy {
 public:
  ParameterServer(comm::Communicator& world, nn::Model& model, Optimizer& opt, PsConfig cfg,
                  uint64_t seed, const Precision& precision = {});
  ~ParameterServer() override;
  std::string name() const override { return "ps"; }
  int rank() const override { return world_.rank(); }
  int world() const override { return world_.size(); }
  // Workers read shards 0..W-1; a server follows worker 0's batch count (and
  // ignores the batches), so every rank runs the same number of steps.
  int data_rank() const override { return server_ < 0 ? world_.rank() : 0; }
  int data_world() const override { return workers_; }
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  void sum(double* v, int n) override;
  void sync_model() override;
  std::pair<int64_t, int64_t> optimizer_range() const override {
    return server_ < 0 ? std::pair<int64_t, int64_t>{0, 0}
                       : std::pair<int64_t, int64_t>{shard_begin(server_), shard_end(server_)};
  }
  nlohmann::ordered_json summary() override;
  Rng* dropout_rng() override { return &local_.rng(); }

 private:
  StepResult work(const Batch& batch, float lr, StepTimes& times);
  void serve_sync(float lr, StepTimes& times);
  void serve_async(float lr, StepTimes& times);
  // Sends worker w this server's current weights (async: a copy, since the
  // weights move on while the send is in flight).
  void reply(int w);
  int64_t shard_begin(int j) const;
  int64_t shard_end(int j) const { return shard_begin(j + 1); }

  comm::Communicator& world_;
  nn::Model& model_;
  Optimizer& opt_;
  PsConfig cfg_;
  LocalStep local_;
  int workers_;
  int server_;  // this rank's server index, or -1 on a worker
  // Server state.
  std::vector<Tensor> inbox_;   // one gradient buffer per worker
  std::vector<Tensor> outbox_;  // async: one weight copy per worker in flight
  std::vector<std::unique_ptr<comm::Request>> sends_;
  Tensor sum_;                  // sync: the summed gradient
  std::vector<int64_t> clock_;  // pushes applied, per worker
  std::vector<int64_t> read_version_;  // version each worker's weights came from
  std::vector<bool> waiting_;   // async: a worker whose answer is held back
  int64_t version_ = 0;         // updates applied
  int next_worker_ = 0;         // async: where the next poll starts (fairness)
  double staleness_sum_ = 0;
  int64_t staleness_max_ = 0, updates_ = 0;
};

}  // namespace cohort
