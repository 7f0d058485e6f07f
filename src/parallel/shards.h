// How ZeRO cuts the flat arenas over ranks, and the collectives on that cut.
// The P elements are cut into N blocks as the ring all-reduce cuts a vector
// (comm/ring.cpp: equal blocks, rounded up to 16 floats, so each block
// starts on a 64-byte line), and rank r owns block r+1 (mod N), the block
// the ring's reduce-scatter leaves complete on r. So ZeRO's reduce-scatter
// and all-gather are the two halves of data parallelism's ring all-reduce
// with the optimizer step between them, and every gradient is summed in the
// same order as a ring all-reduce of the whole arena sums it.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"

namespace cohort {

// --freeze: the blocks cut [first, elements) only; the frozen prefix is no
// rank's shard, never exchanged and never released (every rank keeps it).
class ShardLayout {
 public:
  ShardLayout(int64_t elements, int ranks, int64_t first = 0);
  int ranks() const { return ranks_; }
  int64_t elements() const { return n_; }
  int64_t first() const { return first_; }
  int64_t begin(int block) const { return std::min(n_, first_ + step_ * block); }
  int64_t end(int block) const { return std::min(n_, first_ + step_ * (block + 1)); }
  int block_of(int rank) const { return (rank + 1) % ranks_; }
  int owner_of(int block) const { return (block + ranks_ - 1) % ranks_; }
  // Rank r's shard: [begin, end) of its block.
  std::pair<int64_t, int64_t> shard(int rank) const {
    return {begin(block_of(rank)), end(block_of(rank))};
  }

 private:
  int64_t n_, step_, first_;
  int ranks_;
};

// Sums [b, e) of `g` over ranks so that each rank's shard within it holds
// the total, in the ring's order (the rest of [b, e) is left holding partial
// sums). `scratch` holds at least kShardSegment floats.
constexpr int64_t kShardSegment = 1 << 16;
void reduce_scatter_range(comm::Communicator& c, const ShardLayout& l, float* g, int64_t b,
                          int64_t e, float* scratch);
// The same with bf16 on the wire (--grad-dtype bf16): `buf` holds [b, e)
// (buf[0] is element b), each element the rank's gradient rounded to bf16.
// Each partial sum is added in f32 and rounded to bf16 as it is kept, which
// is what the bf16 ring all-reduce (comm/ring.cpp) sends and ends with, so
// every element is summed and rounded as data parallelism's ring rounds it.
// On return the shard's part of `buf` holds the totals. `scratch` holds at
// least kShardSegment elements.
void reduce_scatter_range_bf16(comm::Communicator& c, const ShardLayout& l, BF16* buf, int64_t b,
                               int64_t e, BF16* scratch);
// Every rank's shard of `base` (elements of `elem` bytes: 4 for the f32
// weights, 2 for a bf16 copy) to every rank, in place (the ring's all-gather).
void allgather_shards(comm::Communicator& c, const ShardLayout& l, void* base, size_t elem = 4);
// allgather_shards of a bf16 copy `low` in which this rank does not keep its
// own block: that block is sent rounded from the f32 `w` a piece at a time
// (the ring sends it once, at its first step), and every other block lands
// in `low`.
void allgather_bf16_shards(comm::Communicator& c, const ShardLayout& l, BF16* low, const float* w);
// [b, e) of `w` to every rank from the ranks owning it (a broadcast per
// owner); to rank `root` only when root >= 0.
void gather_range(comm::Communicator& c, const ShardLayout& l, float* w, int64_t b, int64_t e,
                  int root = -1);
// gather_range of each of `ranges` to every rank, all posted before any is waited for.
void gather_ranges(comm::Communicator& c, const ShardLayout& l, float* w,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges);
// Returns the pages of [b, e) of `base` outside rank's shard (and outside the
// frozen prefix) to the kernel;
// with `zero`, the elements there read as zeros afterwards (gradients,
// which later micro-batches add into).
void release_unowned(const ShardLayout& l, int rank, float* base, int64_t b, int64_t e, bool zero);

}  // namespace cohort
