// Tests for the distributed sampler: determinism, disjoint equal shards, repeat.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.h"
#include "data/sampler.h"

namespace cohort {
namespace {

TEST(Sampler, ShardsAreDisjointAndCoverTruncatedPermutation) {
  const int64_t n = 103;
  for (int world : {1, 2, 3, 4, 7}) {
    Sampler full(n, 0, 1, 1, 42, true);
    std::vector<int64_t> perm = full.epoch_indices(3);
    int64_t per = n / world;
    std::vector<int64_t> joined(size_t(per * world));
    for (int r = 0; r < world; ++r) {
      Sampler s(n, r, world, 1, 42, true);
      auto idx = s.epoch_indices(3);
      ASSERT_EQ(int64_t(idx.size()), per);
      ASSERT_EQ(s.size(), per);
      for (int64_t i = 0; i < per; ++i) joined[size_t(i * world + r)] = idx[size_t(i)];
    }
    // Interleaved back, the shards are exactly the first per*world entries of the
    // permutation (rank r holds entries r, r+world, ...).
    ASSERT_EQ(joined, std::vector<int64_t>(perm.begin(), perm.begin() + per * world));
    std::set<int64_t> uniq(joined.begin(), joined.end());
    EXPECT_EQ(int64_t(uniq.size()), per * world) << "world " << world;
  }
}

// An elastic run: 4 ranks take 5 steps of global batch 12, then 3 ranks go
// on from global sample 60 with the same global batch: every step takes
// permutation[s*12, (s+1)*12) whatever the world, and every sample of the
// epoch is taken exactly once.
TEST(Sampler, ResumedAtAnotherWorldContinuesTheSameGlobalSteps) {
  const int64_t n = 240, global = 12;
  const std::vector<int64_t> perm = Sampler(n, 0, 1, 1, 9, true).epoch_indices(2);
  std::multiset<int64_t> taken;
  auto take = [&](int world, int64_t start, int64_t steps) {
    const int64_t b = global / world;
    for (int r = 0; r < world; ++r) {
      const std::vector<int64_t> idx = Sampler(n, r, world, 1, 9, true).epoch_indices(2, start);
      ASSERT_EQ(int64_t(idx.size()), (n - start) / world);
      for (int64_t s = 0; s < steps; ++s) {
        const std::set<int64_t> step(perm.begin() + start + s * global,
                                     perm.begin() + start + (s + 1) * global);
        for (int64_t j = 0; j < b; ++j) {
          const int64_t v = idx[size_t(s * b + j)];
          ASSERT_TRUE(step.count(v)) << "world " << world << " rank " << r << " step " << s;
          taken.insert(v);
        }
      }
    }
  };
  take(4, 0, 5);
  take(3, 60, 15);
  EXPECT_EQ(taken, std::multiset<int64_t>(perm.begin(), perm.end()));
  EXPECT_TRUE(Sampler(n, 0, 2, 1, 9, true).epoch_indices(2, n).empty());
  EXPECT_THROW(Sampler(n, 0, 2, 1, 9, true).epoch_indices(2, n + 1), InputError);
}

TEST(Sampler, WorldOneGetsFullPermutation) {
  Sampler s(50, 0, 1, 1, 7, true);
  auto idx = s.epoch_indices(0);
  std::vector<int64_t> sorted = idx;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(50);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(idx, iota);  // actually shuffled
}

TEST(Sampler, DeterministicPerSeedAndEpoch) {
  Sampler a(1000, 1, 2, 1, 9, true), b(1000, 1, 2, 1, 9, true), c(1000, 1, 2, 1, 10, true);
  EXPECT_EQ(a.epoch_indices(5), b.epoch_indices(5));
  EXPECT_NE(a.epoch_indices(5), a.epoch_indices(6));
  EXPECT_NE(a.epoch_indices(5), c.epoch_indices(5));
}

TEST(Sampler, NoShuffleIsSequential) {
  Sampler s(10, 1, 3, 1, 0, false);
  EXPECT_EQ(s.epoch_indices(4), (std::vector<int64_t>{1, 4, 7}));
}

TEST(Sampler, RepeatGivesEachIndexExactlyRepeatTimes) {
  const int64_t n = 37;
  Sampler s(n, 0, 1, 4, 123, true);
  auto idx = s.epoch_indices(2);
  ASSERT_EQ(int64_t(idx.size()), 4 * n);
  EXPECT_EQ(s.total(), 4 * n);
  std::vector<int> counts(n, 0);
  for (int64_t i : idx) {
    ASSERT_TRUE(i >= 0 && i < n);
    ++counts[i];
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(counts[i], 4) << "index " << i;
}

TEST(Sampler, RejectsBadArguments) {
  EXPECT_THROW(Sampler(10, 2, 2, 1, 0, true), InputError);
  EXPECT_THROW(Sampler(10, -1, 2, 1, 0, true), InputError);
  EXPECT_THROW(Sampler(10, 0, 0, 1, 0, true), InputError);
  EXPECT_THROW(Sampler(10, 0, 1, 0, 0, true), InputError);
  EXPECT_THROW(Sampler(0, 0, 1, 1, 0, true), InputError);
}

}  // namespace
}  // namespace cohort
