// Tests for the background prefetcher: order, partial batches, early exit,
// error propagation.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "data/dataset.h"
#include "data/prefetch.h"

namespace cohort {
namespace {

// Image i is filled with the value i, label i % 10, so a batch is easy to verify.
Dataset numbered(int64_t n) {
  Dataset d;
  d.images = Tensor::empty({n, 2, 3, 1});
  for (int64_t i = 0; i < n; ++i) d.images.slice(i, i + 1).fill(float(i));
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(int32_t(i % 10));
  return d;
}

std::vector<int64_t> reversed(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = n - 1; i >= 0; --i) v.push_back(i);
  return v;
}

TEST(Prefetch, BatchesFollowIndexOrder) {
  Dataset d = numbered(23);
  auto idx = reversed(23);
  Prefetcher p(d, idx, 5, /*drop_last=*/false);
  EXPECT_EQ(p.num_batches(), 5);
  Batch b;
  size_t k = 0;
  int batches = 0;
  while (p.next(b)) {
    ++batches;
    ASSERT_EQ(b.images.dim(1), 2);
    ASSERT_EQ(b.images.dim(2), 3);
    ASSERT_EQ(b.images.dim(0), b.size());
    for (int64_t j = 0; j < b.size(); ++j, ++k) {
      EXPECT_EQ(b.labels[j], idx[k] % 10);
      for (int e = 0; e < 6; ++e) ASSERT_EQ(b.images.f32()[j * 6 + e], float(idx[k]));
    }
  }
  EXPECT_EQ(batches, 5);
  EXPECT_EQ(k, idx.size());
  EXPECT_EQ(b.size(), 3);  // the last, partial batch
  EXPECT_FALSE(p.next(b));  // stays finished
  EXPECT_GE(p.wait_seconds(), 0.0);
}

// Token sequences: sample i is T = 4 positions, each with its own target, and
// a batch carries every position's target in sample order.
TEST(Prefetch, SequencesCarryATargetPerPosition) {
  const int64_t n = 7, t = 4;
  Dataset d;
  d.images = Tensor::empty({n, t});
  for (int64_t i = 0; i < n * t; ++i) d.images.f32()[i] = float(i);
  for (int64_t i = 0; i < n * t; ++i) d.labels.push_back(int32_t(1000 + i));
  ASSERT_EQ(d.positions(), t);
  Prefetcher p(d, reversed(n), 3, /*drop_last=*/false);
  Batch b;
  ASSERT_TRUE(p.next(b));
  ASSERT_EQ(b.images.shape(), (Shape{3, t}));
  ASSERT_EQ(b.labels.size(), size_t(3 * t));
  EXPECT_EQ(b.positions(), t);
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t k = 0; k < t; ++k) {
      const int64_t src = (n - 1 - j) * t + k;  // reversed order
      EXPECT_EQ(b.images.f32()[j * t + k], float(src));
      EXPECT_EQ(b.labels[size_t(j * t + k)], 1000 + src);
    }
  // Slicing keeps the positions together.
  Batch s = b.slice(1, 3);
  ASSERT_EQ(s.labels.size(), size_t(2 * t));
  EXPECT_EQ(s.labels[0], 1000 + (n - 2) * t);
}

TEST(Prefetch, DropLastSkipsPartialBatch) {
  Dataset d = numbered(23);
  Prefetcher p(d, reversed(23), 5, /*drop_last=*/true, /*depth=*/1);
  EXPECT_EQ(p.num_batches(), 4);
  Batch b;
  int batches = 0;
  while (p.next(b)) {
    ++batches;
    EXPECT_EQ(b.size(), 5);
  }
  EXPECT_EQ(batches, 4);
}

TEST(Prefetch, EmptyEpochAndExactMultiple) {
  Dataset d = numbered(10);
  Batch b;
  Prefetcher empty(d, {}, 4, false);
  EXPECT_EQ(empty.num_batches(), 0);
  EXPECT_FALSE(empty.next(b));
  Prefetcher exact(d, reversed(8), 4, false);
  EXPECT_EQ(exact.num_batches(), 2);
}

TEST(Prefetch, EarlyDestructionDoesNotHang) {
  Dataset d = numbered(1000);
  std::vector<int64_t> idx(1000);
  for (int i = 0; i < 1000; ++i) idx[i] = i;
  auto start = std::chrono::steady_clock::now();
  for (int trial = 0; trial < 20; ++trial) {
    Prefetcher p(d, idx, 3, false, 2);
    Batch b;
    if (trial % 2) {
      ASSERT_TRUE(p.next(b));  // sometimes consume one, sometimes none
    }
    if (trial % 4 == 3) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Prefetch, BatchesOwnTheirStorage) {
  Dataset d = numbered(20);
  Prefetcher p(d, reversed(20), 2, false, 1);
  Batch first, b;
  ASSERT_TRUE(p.next(first));
  while (p.next(b)) {
  }
  EXPECT_EQ(first.images.f32()[0], 19.0f);  // not overwritten by later batches
}

TEST(Prefetch, TransformRunsAndWorkerErrorsPropagate) {
  Dataset d = numbered(20);
  auto transform = [](Batch& b, int64_t i) {
    if (i == 2) throw InputError("augmentation failed on batch 2");
    b.labels[0] = -1;
  };
  Prefetcher p(d, reversed(20), 4, false, 2, transform);
  Batch b;
  ASSERT_TRUE(p.next(b));  // batches before the failure still arrive
  EXPECT_EQ(b.labels[0], -1);
  ASSERT_TRUE(p.next(b));
  try {
    p.next(b);
    ADD_FAILURE() << "expected the worker's exception";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("batch 2"), std::string::npos);
  }
}

TEST(Prefetch, RejectsBadArguments) {
  Dataset d = numbered(4);
  EXPECT_THROW(Prefetcher(d, {0, 1}, 0, false), InputError);
  EXPECT_THROW(Prefetcher(d, {0, 1}, 2, false, 0), InputError);
  EXPECT_THROW(Prefetcher(d, {0, 4}, 2, false), Error);
}

}  // namespace
}  // namespace cohort
