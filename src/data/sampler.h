// Deterministic epoch orderings for data-parallel training: every rank computes
// the same global permutation and takes every world-th entry from its rank on.
#pragma once
#include <cstdint>
#include <vector>

namespace cohort {

class Sampler {
 public:
  // The logical dataset is the base repeated `repeat` times (index i -> i % size),
  // so a study can train on e.g. MNIST concatenated 4x. InputError if
  // dataset_size < 1, world < 1, rank outside [0, world) or repeat < 1.
  Sampler(int64_t dataset_size, int rank, int world, int repeat, uint64_t seed, bool shuffle);

  // This rank's indices into the base dataset for `epoch`: the logical dataset
  // shuffled with Rng(seed + epoch) (identically on all ranks), truncated to
  // (total / world) * world, then shard [rank*per, (rank+1)*per).
  std::vector<int64_t> epoch_indices(int epoch) const;

  int64_t size() const { return per_rank_; }  // indices per rank per epoch
  int64_t total() const { return total_; }    // dataset_size * repeat

 private:
  int64_t dataset_size_;
  int rank_, world_;
  uint64_t seed_;
  bool shuffle_;
  int64_t total_, per_rank_;
};

}  // namespace cohort
