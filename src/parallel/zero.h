// ZeRO (DeepSpeed's Zero Redundancy Optimizer), stages 1 and 2, over
// cohort's flat arenas. Rank r of N owns the shard [r*P/N, (r+1)*P/N) of the
// parameter, gradient and optimizer buffers (P parameters), and keeps the
// optimizer state of its shard only. Data flows as in data parallelism (each
// rank its own shard of the data, loss scaled by 1/(global batch)); after the
// last micro-batch's backward:
//   stage 1: the gradients are all-reduced (every rank holds all of them) in
//            data parallelism's buckets, during backward (BucketReducer),
//   stage 2: they are reduce-scattered (each rank ends with its shard's sum),
// then each rank steps its shard (fp16: overflow voted over ranks; --clip:
// the norm's squares summed over shards) and the updated shards are
// all-gathered, so every rank holds the whole model again.
//
// Memory, honestly: the arena keeps f32 master weights and an f32 gradient
// slot for every parameter on every rank, so what shrinks today is the
// optimizer state (1/N); stage 2 changes what is communicated, not what is
// held (its summary says so, beside DeepSpeed's model).
#pragma once
#include <memory>
#include <utility>

#include "comm/communicator.h"
#include "parallel/data_parallel.h"
#include "parallel/local.h"

namespace cohort {

struct ZeroConfig {
  int stage = 1;          // 1: optimizer state sharded; 2: gradients too
  int accumulate = 1;     // micro-batches per optimizer step; communicate on the last
  double bucket_mb = 25;  // stage 1's buckets, reduced as backward fills them
};

class Zero final : public Strategy {
 public:
  Zero(comm::Communicator& comm, nn::Model& model, Optimizer& opt, const ZeroConfig& cfg,
       uint64_t seed, float clip_norm = 0, const Precision& precision = {});

  std::string name() const override { return "zero"; }
  int rank() const override { return comm_.rank(); }
  int world() const override { return comm_.size(); }
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  void sum(double* v, int n) override;
  // This rank's shard: checkpoints gather the shards and resume restores
  // each rank's own (at any rank count: the file holds the whole state).
  std::pair<int64_t, int64_t> optimizer_range() const override {
    return {shard_begin(rank()), shard_begin(rank() + 1)};
  }
  LossScaler* loss_scaler() override { return local_.loss_scaler(); }
  // {"zero": bytes held per rank beside DeepSpeed's model} and the loss scale.
  nlohmann::ordered_json summary() override;

  int64_t shard_begin(int r) const { return int64_t(r) * params_ / comm_.size(); }
  size_t shard_bytes(int r) const { return size_t(shard_begin(r + 1) - shard_begin(r)) * 4; }

 private:
  void reduce_scatter_grads();  // stage 2: ring, in place, uneven shards
  void allgather_params();      // ring, in place
  void step_shard(float lr);
  bool any_rank(bool v);
  double sum_over_ranks(double v);  // in rank order, the same on every rank

  comm::Communicator& comm_;
  nn::Model& model_;
  Optimizer& opt_;
  ZeroConfig cfg_;
  float clip_norm_;
  LocalStep local_;  // forward, backward and the loss scaler (its apply is not used)
  int64_t params_;   // P
  std::unique_ptr<BucketReducer> buckets_;  // stage 1
  Tensor scratch_;                          // stage 2: one received shard of partial sums
  int micro_ = 0;
};

}  // namespace cohort
