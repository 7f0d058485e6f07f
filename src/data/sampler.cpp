// Sampler: the same permutation on every rank (seeded by seed + epoch), then
// strided shards as in PyTorch's DistributedSampler: rank r takes entries
// r, r+N, r+2N, ... So the images of step i on all N ranks together (batch b
// each) are exactly the images of step i of one rank at batch N*b: data
// parallelism follows the single-process trajectory. Equal counts per rank.
#include "data/sampler.h"

#include <limits>

#include "core/error.h"
#include "core/rng.h"

namespace cohort {

Sampler::Sampler(int64_t dataset_size, int rank, int world, int repeat, uint64_t seed,
                 bool shuffle)
    : dataset_size_(dataset_size), rank_(rank), world_(world), seed_(seed), shuffle_(shuffle) {
  COHORT_INPUT_CHECK(dataset_size >= 1, "sampler: dataset is empty");
  COHORT_INPUT_CHECK(world >= 1, "sampler: world size must be >= 1, got ", world);
  COHORT_INPUT_CHECK(rank >= 0 && rank < world, "sampler: rank ", rank,
                     " is outside [0, ", world, ")");
  COHORT_INPUT_CHECK(repeat >= 1, "sampler: repeat must be >= 1, got ", repeat);
  COHORT_INPUT_CHECK(dataset_size <= std::numeric_limits<int32_t>::max() / repeat,
                     "sampler: dataset size ", dataset_size, " x repeat ", repeat,
                     " is too large");
  total_ = dataset_size * repeat;
  per_rank_ = total_ / world;
}

std::vector<int64_t> Sampler::epoch_indices(int epoch, int64_t start) const {
  COHORT_INPUT_CHECK(start >= 0 && start <= total_, "sampler: epoch position ", start,
                     " is outside [0, ", total_, "]");
  std::vector<int64_t> all(static_cast<size_t>(total_));
  for (int64_t i = 0; i < total_; ++i) all[size_t(i)] = i % dataset_size_;
  if (shuffle_) {
    Rng rng(seed_ + uint64_t(int64_t(epoch)));
    rng.shuffle(all);
  }
  const int64_t per = (total_ - start) / world_;  // per_rank_ at start 0
  std::vector<int64_t> mine(static_cast<size_t>(per));
  for (int64_t i = 0; i < per; ++i) mine[size_t(i)] = all[size_t(start + i * world_ + rank_)];
  return mine;
}

}  // namespace cohort
