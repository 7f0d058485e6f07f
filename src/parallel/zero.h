// ZeRO (DeepSpeed's Zero Redundancy Optimizer), stages 1-3, over cohort's
// flat arenas. The arenas are cut into one contiguous shard per rank
// (parallel/shards.h); rank r keeps the optimizer state of its shard only
// and steps only its shard. Data flows as in data parallelism (each rank its
// own part of the data, the loss scaled by 1/(global batch)).
//   stage 1: during the last micro-batch's backward the gradients are
//            reduce-scattered in buckets as backward finishes each layer
//            (dp's summation order; the sums outside the shard, which an
//            all-reduce would bring back, no rank reads), and each
//            rank keeps its shard's part of each (parallel/zero_layers.h):
//            every rank holds all parameters, and all gradients only while
//            micro-batches add up.
//   stage 2: as backward finishes each layer, its gradients are
//            reduce-scattered in buckets and the other ranks' part returned to
//            the kernel (parallel/zero_layers.h): a rank holds its shard's
//            gradients. Every micro-batch is reduced (later ones add into the
//            shard's sum, as DeepSpeed's do).
//   stage 3: as stage 2, and the parameters live sharded too: each layer's are
//            gathered just before it runs, forward and backward, the next
//            layer's prefetched, and freed after it.
// With --grad-dtype bf16 (DeepSpeed's communication_data_type) every stage's
// buckets travel and are held at bf16, and so are the shard's gradients
// (zero_grads.h: DeepSpeed's 2 Psi/N), summed as data parallelism's bf16
// ring sums them.
// At bf16, stages 1 and 2 hold the weights outside the shard as a 2-byte copy
// (DeepSpeed's layout; zero_replica.h), widened layer by layer as stage 3
// gathers. At f32 and bf16 the tied vocabulary matrix (GPT-2's wte) streams
// in row blocks (nn::RowStream): no rank gathers it whole (stage 3) or holds
// its whole gradient (every stage).
// Then each rank steps its shard (fp16: overflow voted over ranks; --clip:
// the squares summed over shards), and stages 1 and 2 all-gather the updated
// shards. Arenas are mapped lazily (core/memory.h), so a released page costs
// nothing: what a rank holds is what the summary reports, beside DeepSpeed's
// model and the measured peak resident memory.
#pragma once
#include <memory>
#include <utility>

#include "comm/communicator.h"
#include "core/memory.h"
#include "parallel/data_parallel.h"
#include "parallel/defaults.h"
#include "parallel/local.h"
#include "parallel/shards.h"
#include "parallel/zero_grads.h"
#include "parallel/zero_layers.h"
#include "parallel/zero_replica.h"

namespace cohort {

struct ZeroConfig {
  int stage = 1;          // 1: optimizer state sharded; 2: gradients too; 3: parameters too
  int accumulate = 1;     // micro-batches per optimizer step
  double bucket_mb = kDefaultBucketMb;  // gradient buckets, reduced as backward fills them
  // Stage 3: parameters gathered ahead of the unit computing (at least the
  // next unit's), DeepSpeed's stage3_prefetch_bucket_size.
  double prefetch_mb = kDefaultPrefetchMb;
};

class Zero final : public Strategy {
 public:
  Zero(comm::Communicator& comm, nn::Model& model, Optimizer& opt, const ZeroConfig& cfg,
       uint64_t seed, float clip_norm = 0, const Precision& precision = {});
  ~Zero() override;

  std::string name() const override { return "zero"; }
  int rank() const override { return comm_.rank(); }
  int world() const override { return comm_.size(); }
  StepResult step(const Batch& batch, float lr, StepTimes& times) override;
  void sum(double* v, int n) override;
  // This rank's shard: checkpoints gather the shards and resume restores
  // each rank's own (at any rank count: the file holds the whole state).
  std::pair<int64_t, int64_t> optimizer_range() const override { return layout_.shard(rank()); }
  void gather_params(int root) override;
  void release_params() override;
  LossScaler* loss_scaler() override { return local_.loss_scaler(); }
  Rng* dropout_rng() override { return local_.dropout_rng(); }
  // {"zero": bytes held per rank beside DeepSpeed's model} and the loss scale.
  nlohmann::ordered_json summary() override;

 private:
  void start();  // before the first step: release what this rank does not hold
  void step_shard(float lr);
  void step_shard(float* w, float* g, int64_t n, float lr);  // this rank's f32 shard
  void step_low(float* w, int64_t n, float lr);              // its gradients at bf16
  bool any_rank(bool v);
  double sum_over_ranks(double v);  // in rank order, the same on every rank
  nlohmann::ordered_json held_bytes();

  comm::Communicator& comm_;
  nn::Model& model_;
  Optimizer& opt_;
  ZeroConfig cfg_;
  float clip_norm_;
  LocalStep local_;  // forward, backward and the loss scaler (its apply is not used)
  ShardLayout layout_;
  std::unique_ptr<Bf16Replica> replica_;    // stages 1 and 2 at bf16 (before layers_: it reads it)
  std::unique_ptr<Bf16GradShard> low_grads_;  // bf16 gradients on the wire (before layers_)
  std::unique_ptr<ZeroLayers> layers_;
  std::shared_ptr<MemoryCounter> activations_ = std::make_shared<MemoryCounter>();
  bool started_ = false;
  int micro_ = 0;
};

}  // namespace cohort
