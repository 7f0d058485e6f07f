// ZeRO stages 2 and 3 with bf16 gradients on the wire (--grad-dtype bf16,
// DeepSpeed's communication_data_type): DeepSpeed's gradient layout, the
// shard's gradients kept at 2 bytes (2 Psi/N, where the f32 arena's shard
// is 4 Psi/N). Each bucket's reduce-scatter (shards.h) leaves the shard's
// totals at bf16, so keeping them so loses nothing on a step of one
// micro-batch; later micro-batches add in f32 and round, as DeepSpeed's
// bf16 partitions accumulate. The optimizer steps f32 from a piece widened
// at a time (Zero::step_low), so the f32 shard is never held whole.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "parallel/shards.h"

namespace cohort {

class Bf16GradShard {
 public:
  Bf16GradShard(const ShardLayout& layout, int rank);
  // Adds the shard's part of [b, e) of `v` (v[0] is element b): the
  // reduced bf16 bucket, or f32 rows summed apart (the embedding's).
  void add(const BF16* v, int64_t b, int64_t e);
  void add(const float* v, int64_t b, int64_t e);
  // The optimizer steps f32 a piece at a time: [offset, offset + n) of the
  // shard widened into `out` (zeros where nothing was added since clear());
  // clear() after the step. A step's first add to an element writes it (no
  // pass zeroing the shard, none reading it back): the ranges written since
  // clear() are kept.
  void widen(int64_t offset, int64_t n, float* out) const;
  void clear();
  int64_t size() const { return int64_t(low_.size()); }
  int64_t bytes() const { return int64_t(low_.size() * sizeof(BF16)); }

 private:
  template <typename T>
  void add_part(const T* v, int64_t b, int64_t e);
  void mark_written(int64_t lo, int64_t hi);

  int64_t sb_, se_;
  std::vector<BF16> low_;
  std::vector<std::pair<int64_t, int64_t>> written_;  // shard offsets, ascending, disjoint
};

}  // namespace cohort
