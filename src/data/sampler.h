// Deterministic epoch orderings for data-parallel training: every rank computes
// the same global permutation and takes every world-th entry from its rank on.
// So step s of an epoch at per-rank batch b takes, over all W ranks together,
// exactly permutation[s*G, (s+1)*G) (G = W*b): the position within an epoch is
// a count of global samples, and a run resumed at another world size with the
// same G continues from it (`start`) with every sample taken once per epoch.
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
  // (total / world) * world, then every world-th entry from rank on.
  // `start`: the global samples of the epoch already consumed (a resumed
  // run): the entries from permutation[start] on, truncated to a multiple of
  // world, strided alike. InputError if start is outside [0, total].
  std::vector<int64_t> epoch_indices(int epoch, int64_t start = 0) const;

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
