// ZeRO stages 1 and 2 at bf16 in DeepSpeed's layout: every rank holds a
// 2-byte copy of the model's matrices outside its shard (2 Psi - 2 Psi/N;
// DeepSpeed's copy has the shard's too) and the f32 master weights of its
// shard only (4 Psi/N), where cohort's f32 layout holds f32 weights whole
// (4 Psi). The compute reads f32 parameters from the arena, so the
// layer hooks (zero_layers.h) widen a layer's elements outside the shard from
// this copy just before it runs and return those pages after, as stage 3
// gathers them. A bf16 model reads every matrix rounded to bf16 (Linear and
// conv weights, the embedding's tables: ops/cpu), so the widened copy
// computes exactly what the masters compute; vectors (biases, norms' scales
// and shifts), which ops read at f32, are kept at f32 (a few thousand
// elements a layer). After the step each rank's updated shard, rounded, is
// all-gathered into every other rank's copy (2 bytes a parameter on the wire,
// half of the f32 all-gather) and the vectors summed over ranks (each rank
// contributes its shard's elements, zeros elsewhere: exact).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/arena.h"
#include "core/dtype.h"
#include "parallel/shards.h"

namespace cohort {

// The one rule for when ZeRO holds this layout (the strategy and the memory
// plan both ask it): stages 1 and 2 at bf16, on 3 ranks or more (on 2 the
// copy and the master shard hold 3 Psi against the f32 weights' 4 Psi, and
// widening cost zero-1 16% of its speed; on one the copy only adds 2 Psi).
bool zero_holds_bf16_copy(int stage, DType compute, int ranks);

// Whether ZeRO streams the tied vocabulary matrix in row blocks: at f32 and
// bf16 (at fp16 summing its gradient's rows apart moved results 1e-5 from dp's).
inline bool zero_streams_rows(DType compute) { return compute != DType::kF16; }

class Bf16Replica {
 public:
  Bf16Replica(const Arena& a, const ShardLayout& layout, int rank);
  // At set-up, while this rank holds every weight `w` (the f32 arena).
  void build(const float* w);
  // Writes the elements of [b, e) of `w` outside this rank's shard (and the
  // frozen prefix, which every rank keeps) from the copy.
  void expand(float* w, int64_t b, int64_t e) const;
  // After this rank stepped its shard of `w`: every rank's copy updated.
  void refresh(comm::Communicator& c, const float* w);
  // What the copy holds, in bytes.
  int64_t bytes() const;

 private:
  // [b, e) of `w` from the copy: vectors' elements at f32, the rest widened.
  void widen(float* w, int64_t b, int64_t e) const;

  const ShardLayout& layout_;
  int rank_;
  // Every element but the shard's (the masters are read there, and refresh
  // sends the shard rounded from them): pages from the kernel, the shard's
  // never touched. The vectors' slots are unread.
  std::shared_ptr<void> pages_;
  BF16* low_ = nullptr;
  std::vector<int64_t> vec_b_, vec_e_, vec_at_;  // the vectors' ranges, ascending, and where each sits in vec_
  std::vector<float> vec_;
};

}  // namespace cohort
