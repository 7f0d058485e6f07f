// Sampler: the same permutation on every rank (seeded by seed + epoch), then
// equal contiguous shards, so ranks never overlap and step counts always match.
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

std::vector<int64_t> Sampler::epoch_indices(int epoch) const {
  std::vector<int64_t> all(static_cast<size_t>(total_));
  for (int64_t i = 0; i < total_; ++i) all[size_t(i)] = i % dataset_size_;
  if (shuffle_) {
    Rng rng(seed_ + uint64_t(int64_t(epoch)));
    rng.shuffle(all);
  }
  auto begin = all.begin() + int64_t(rank_) * per_rank_;
  return std::vector<int64_t>(begin, begin + per_rank_);
}

}  // namespace cohort
