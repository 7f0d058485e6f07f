// The layer hooks (nn::LayerHooks) through which ZeRO works while a step
// computes, all of their communication queued on one CommQueue:
//   gradients: as backward finishes a top-level layer, its range joins a
//     bucket; a full bucket is reduce-scattered (shards.h; stage 1 only on
//     the micro-batch that ends a step) and the
//     other ranks' part of it returned to the kernel, so a rank holds the
//     gradients of its shard plus the buckets in flight;
//   parameters (stage 3; stages 1 and 2 at bf16, widened from a 2-byte copy
//     instead of gathered: zero_replica.h): between steps a rank holds its
//     shard only. Before
//     layer i runs (forward or backward) its ranges are gathered, and the
//     units after it (before it in backward) are queued to arrive while i
//     computes, until they hold --prefetch-mb (at least the next); after
//     it runs the pages not in the shard are returned. The last layer stays
//     from its forward to its backward. A top-level layer larger than a
//     gradient bucket (a transformer block) is split: the unit of
//     gathering, freeing and gradient reduction is then each module with
//     parameters inside it (nn::LeafHooks: a Linear, a layer-norm), as
//     DeepSpeed gathers per submodule, so a rank holds two Linears' weights
//     instead of two blocks';
//   the vocabulary matrix (a tied weight, GPT-2's wte, at f32): streamed in
//     row blocks (nn::RowStream), so it is never gathered whole or its
//     gradient held whole. The head gathers (stage 3) one block of rows at
//     a time, the next prefetched, and reduce-scatters each block's gradient
//     as it is written; the embedding gathers only the rows of the ranks'
//     tokens and sums their gradient rows over ranks (an all-reduce of those
//     rows), each rank keeping the elements of its shard.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "nn/model.h"
#include "parallel/comm_queue.h"
#include "parallel/shards.h"
#include "parallel/zero_grads.h"
#include "parallel/zero_replica.h"

namespace cohort {

// The units ZeRO gathers and reduces top-level layer `m` in: itself or,
// when it holds more than `bucket` parameters (a gradient bucket's
// elements) and reads no tied weight, its leaves.
std::vector<const nn::Module*> zero_units(const nn::Module& m, bool tied, int64_t bucket);

class ZeroLayers final : public nn::LayerHooks, public nn::LeafHooks, public nn::RowStream {
 public:

  // replica (stages 1 and 2 at bf16, null otherwise): the weights outside
  // the shard live in it, and each unit's are widened from it before the unit
  // runs and returned after, as stage 3 gathers and frees them.
  // stream_rows: stream the tied matrix (f32 and bf16; at fp16 summing its
  // gradient's rows apart from the rest moves results by 1e-5, measured).
  // low_grads (stages 2 and 3 with --grad-dtype bf16, null otherwise): each
  // bucket is rounded to bf16 as it is queued (its f32 pages returned at
  // once), reduce-scattered at 2 bytes and its shard's part added there.
  ZeroLayers(comm::Communicator& comm, nn::Model& model, const ShardLayout& layout, int stage,
             double bucket_mb, double prefetch_mb, bool stream_rows,
             const Bf16Replica* replica = nullptr,
             Bf16GradShard* low_grads = nullptr);

  // After each backward: queues the last bucket, waits for every task and
  // releases every unit still gathered.
  void finish_backward();
  // Stage 1: whether this micro-batch's backward reduces (the step's last
  // one does; before it gradients add up whole on each rank). Stages 2 and 3
  // reduce every micro-batch.
  void arm(bool armed) { armed_ = armed || !last_only_; }
  // Stage 3 and the bf16 copy: the whole model to rank root (-1: every
  // rank); and every page outside the shard returned (before the first
  // step, after a checkpoint's gather, after stage 3's step).
  void gather_all(int root);
  void release_all();

  void before_forward(size_t layer) override;
  void after_forward(size_t layer) override;
  void before_backward(size_t layer) override;
  void after_backward(size_t layer) override;
  nn::RowStream* row_stream() override { return slot_e_ > slot_b_ ? this : nullptr; }
  nn::LeafHooks* leaf_hooks(size_t layer) override { return split_[layer] ? this : nullptr; }
  void before_forward(const nn::Module& m) override;
  void after_forward(const nn::Module& m) override;
  void before_backward(const nn::Module& m) override;
  void after_backward(const nn::Module& m) override;

  bool streams(const float* weight) const override;
  void acquire(int64_t cols, int64_t r0, int64_t r1, int64_t n0, int64_t n1) override;
  void release(int64_t cols, int64_t r0, int64_t r1) override;
  void rows_done(int64_t cols, int64_t r0, int64_t r1) override;
  void acquire_ids(int64_t cols, const int32_t* ids, int64_t n) override;
  void release_ids() override;
  void ids_done(int64_t cols, const int32_t* ids, int64_t n) override;

  // Seconds the compute thread waited for gathers and reductions.
  double wait_seconds() const { return wait_s_; }
  // The most gathered parameters held at once, in elements, and the most
  // bytes of gradients held in buckets queued or being reduced at once
  // (beside the shard).
  int64_t peak_gathered() const { return peak_gathered_; }
  int64_t peak_bucket_bytes() const { return peak_buckets_; }

 private:
  // A unit of gathering and reduction: a top-level layer, or a leaf of a split one.
  struct Unit {
    nn::Ranges ranges;  // the parameters it reads (the streamed matrix left out)
    nn::Ranges grads;   // the gradients it completes (the same, ties left out)
  };
  void add_layer(size_t i);
  void unit_before_forward(size_t u);
  void unit_after_forward(size_t u);
  void unit_before_backward(size_t u);
  void unit_after_backward(size_t u);
  void fetch(size_t u);
  void prefetch(size_t u, int step);
  void wait_for(size_t u);
  void drop(size_t u, const nn::Ranges& keep);
  void add_grads(int64_t b, int64_t e);
  void flush();
  // A bucket's reduction queued: its f32 gradients in place, or (bf16 on
  // the wire) rounded into a buffer of its own.
  CommQueue::Ticket queue_reduce(float* g, int64_t b, int64_t e);
  CommQueue::Ticket queue_reduce_low(int64_t b, int64_t e);
  // bf16 on the wire: the bucket filling, rounded as its parts arrive.
  void start_stage(int64_t first);
  void stage(int64_t b, int64_t e);
  int64_t size(size_t u) const;  // its parameters, in elements
  int64_t held() const;
  nn::Ranges held_ranges(size_t except) const;  // every unit's held but `except`
  void wait_reductions();
  // The gradient pages of reduced buckets outside the shard, returned by the
  // compute thread: all of them (wait), or those whose reduction has ended.
  void return_reduced(bool wait);
  // The rows every rank's ids name, as runs of element ranges of the
  // matrix (queue thread: every rank's ids are gathered).
  nn::Ranges id_runs(const std::vector<int32_t>& ids, int64_t cols);
  // The rows `ids` name (any order, repeats), as runs of element ranges.
  nn::Ranges local_runs(std::vector<int32_t> ids, int64_t cols) const;
  void note_id_rows();  // the peak, with the ids' rows held

  comm::Communicator& comm_;
  nn::Model& model_;
  const ShardLayout& layout_;
  const Bf16Replica* replica_;  // stages 1 and 2 at bf16: the weights widen from it
  Bf16GradShard* low_grads_;    // bf16 on the wire: the shard's gradients live there
  bool gather_;     // the weights live sharded: stage 3, or a replica
  // Makes [b, e) of the weights readable: widened from the replica now
  // (returns 0), or gathered on the queue (returns its ticket).
  CommQueue::Ticket materialize(int64_t b, int64_t e);
  static constexpr CommQueue::Ticket kReady = ~CommQueue::Ticket(0);  // held, nothing to wait for
  bool last_only_;  // stage 1: only the step's last micro-batch reduces
  bool armed_ = true;
  int64_t bucket_;
  int64_t prefetch_;  // elements gathered ahead of the unit computing (at least 1: the next unit)
  std::vector<Unit> units_;                 // in forward order
  std::vector<size_t> layer_unit_;          // per top-level layer: its (first) unit
  std::vector<bool> split_;                 // per top-level layer: gathered per leaf
  std::map<const nn::Module*, size_t> leaf_unit_;  // the leaves of split layers
  std::vector<CommQueue::Ticket> ticket_;   // per unit, its gather's; 0: not held
  struct Reduction {
    CommQueue::Ticket ticket;
    int64_t b = 0, e = 0;  // f32 gradients whose pages outside the shard go back after it
  };
  std::deque<Reduction> reducing_;          // buckets queued, oldest first
  int64_t lo_ = 0, hi_ = 0;                 // the bucket filling
  int64_t max_part_ = 0;                    // the largest range a unit adds to it
  struct StageBuffer {
    std::shared_ptr<void> pages;  // bf16 elements, the bucket's ending at the last
    int64_t cap = 0;
  };
  StageBuffer stage_;                       // bf16 on the wire: the bucket filling's
  std::vector<float> scratch_;              // the queue thread's
  int64_t slot_b_ = 0, slot_e_ = 0;         // the streamed matrix's range (empty: none)
  size_t slot_unit_ = 0;                    // the unit that owns it
  std::map<int64_t, CommQueue::Ticket> blocks_;  // stage 3: row blocks gathered, by begin
  int64_t block_held_ = 0;                  // their elements
  nn::Ranges id_held_;                      // stage 3: the ids' rows gathered
  double wait_s_ = 0;
  int64_t peak_gathered_ = 0, peak_buckets_ = 0;  // elements; bytes
  std::atomic<int64_t> in_flight_{0};  // bytes of gradients in buckets not yet reduced
  CommQueue queue_;  // last: its thread stops before the rest goes
};

}  // namespace cohort
