// Synchronous data parallelism over all-reduce (PyTorch DDP, Horovod).
// Ranks start from rank 0's weights, each trains on its own shard, and the
// gradients are summed in buckets of the flat gradient arena: a bucket is a
// contiguous range, so tensor fusion needs no copy. With overlap, a
// background thread reduces each bucket as soon as backward has announced
// all of it (Context::grad_ready), while backward goes on. BucketReducer is
// that machinery alone; ZeRO stage 1 reduces through it too.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "parallel/defaults.h"
#include "parallel/grad_reduce.h"
#include "parallel/local.h"

namespace cohort {

struct DataParallelConfig {
  double bucket_mb = kDefaultBucketMb;
  bool overlap = true;
  int accumulate = 1;  // micro-batches per optimizer step; reduce only on the last
  comm::Algorithm algorithm = comm::Algorithm::kAuto;
  DType grad_comm = DType::kF32;  // the gradients' dtype on the wire: f32 or bf16
};

// Sums [begin, n) of a flat f32 gradient arena over ranks in buckets cut
// from its end (backward finishes the last layers first, so the tail fills
// first); a frozen prefix [0, begin) never goes on the wire.
class BucketReducer {
 public:
  BucketReducer(comm::Communicator& comm, float* grads, int64_t n, double bucket_mb, bool overlap,
                DType wire, comm::Algorithm algo, int64_t begin = 0);
  ~BucketReducer();
  // Before the backward whose gradients are summed: with overlap, points
  // ctx.grad_ready at the bucket queue.
  void arm(nn::Context& ctx);
  // After that backward: returns once every bucket is summed.
  void finish();
  // Number of buckets and their [begin, end) ranges, last layer's first.
  const std::vector<std::pair<int64_t, int64_t>>& buckets() const { return buckets_; }

 private:
  void on_grad_ready(int64_t begin, int64_t end);
  void comm_loop();
  void reduce_bucket(size_t i);
  // reduce_bucket with the bucket's "queued" and "allreduce" spans on its
  // own timeline lane (Horovod's QUEUE and ALLREDUCE phases of a tensor).
  void reduce_bucket_traced(size_t i);

  comm::Communicator& comm_;
  float* grads_;
  bool overlap_;
  GradReducer reducer_;  // used by one thread at a time: the comm thread, or finish()
  std::vector<std::pair<int64_t, int64_t>> buckets_;
  std::vector<int64_t> pending_;  // elements of each bucket not yet announced
  std::vector<int64_t> queued_ns_;  // timeline on: when each bucket was queued

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> queue_;
  size_t done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

class DataParallel final : public Strategy {
 public:
  DataParallel(comm::Communicator& comm, nn::Model& model, Optimizer& opt,
               const DataParallelConfig& cfg, uint64_t seed, float clip_norm = 0,
               const Precision& precision = {});

  std::string name() const override { return "dp"; }
  // Every rank sees the same summed gradients, so each decides alike on fp16
  // overflow without a vote; the loss scale is reported as the single process's.
  nlohmann::ordered_json summary() override { return local_.summary(); }
  LossScaler* loss_scaler() override { return local_.loss_scaler(); }
  Rng* dropout_rng() override { return local_.dropout_rng(); }
  int rank() const override { return comm_.rank(); }
  int world() const override { return comm_.size(); }
  // `batch` is this rank's micro-batch; every `accumulate` calls make one step.
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  void sum(double* v, int n) override;
  std::pair<int64_t, int64_t> optimizer_range() const override { return local_.optimizer_range(); }

  // Number of buckets and their [begin, end) ranges, last layer's first.
  const std::vector<std::pair<int64_t, int64_t>>& buckets() const { return reduce_.buckets(); }

 private:
  comm::Communicator& comm_;
  DataParallelConfig cfg_;
  LocalStep local_;
  BucketReducer reduce_;
  int micro_ = 0;
};

}  // namespace cohort
