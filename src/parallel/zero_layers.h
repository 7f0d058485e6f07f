// The layer hooks (nn::LayerHooks) through which ZeRO stages 2 and 3 work
// while a step computes, all of their communication queued on one CommQueue:
//   gradients (stages 2, 3): as backward finishes a top-level layer, its
//     range joins a bucket; a full bucket is reduce-scattered (shards.h) and
//     the other ranks' part of it returned to the kernel, so a rank holds the
//     gradients of its shard plus the bucket in flight;
//   parameters (stage 3): between steps a rank holds its shard only. Before
//     layer i runs (forward or backward) its ranges are gathered, and layer
//     i+1's (i-1's in backward) are queued to arrive while i computes; after
//     it runs the pages not in the shard are returned. The last layer stays
//     from its forward to its backward.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "nn/model.h"
#include "parallel/comm_queue.h"
#include "parallel/shards.h"

namespace cohort {

class ZeroLayers final : public nn::LayerHooks {
 public:
  ZeroLayers(comm::Communicator& comm, nn::Model& model, const ShardLayout& layout, int stage,
             double bucket_mb);

  // Stage 3, before the first step: returns every page outside the shard.
  void shard_params();
  // After each backward: queues the last bucket and waits for every task.
  void finish_backward();
  // Stage 3: the whole model to rank root (-1: every rank), and back.
  void gather_all(int root);
  void release_all();

  void before_forward(size_t layer) override;
  void after_forward(size_t layer) override;
  void before_backward(size_t layer) override;
  void after_backward(size_t layer) override;

  // Seconds the compute thread waited for gathers and reductions.
  double wait_seconds() const { return wait_s_; }
  // The most gathered parameters held at once, and the largest gradient
  // bucket, in elements (beside the shard).
  int64_t peak_gathered() const { return peak_gathered_; }
  int64_t peak_bucket() const { return peak_bucket_; }

 private:
  void fetch(size_t layer);
  void wait_for(size_t layer);
  void drop(size_t layer, const nn::Ranges& keep);
  void add_grads(int64_t b, int64_t e);
  void flush();
  int64_t held() const;

  comm::Communicator& comm_;
  nn::Model& model_;
  const ShardLayout& layout_;
  bool gather_;  // stage 3
  int64_t bucket_;
  std::vector<nn::Ranges> ranges_;          // per top-level layer
  std::vector<CommQueue::Ticket> ticket_;   // its gather's; 0: not held
  std::deque<CommQueue::Ticket> reducing_;  // buckets queued, oldest first
  int64_t lo_ = 0, hi_ = 0;                 // the bucket filling
  std::vector<float> scratch_;              // the queue thread's
  double wait_s_ = 0;
  int64_t peak_gathered_ = 0, peak_bucket_ = 0;
  CommQueue queue_;  // last: its thread stops before the rest goes
};

}  // namespace cohort
