// Tests for load_dataset's dispatch and the synthetic dataset.
#include <cmath>
#include <cstring>

#include "data/data_test_util.h"
#include "data/dataset.h"

namespace cohort {
namespace {

TEST(DataLoad, UnknownNameListsValidNames) {
  try {
    load_dataset("imagenet", "/tmp");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("imagenet"), std::string::npos) << msg;
    for (const char* valid : {"fashion-mnist", "mnist", "cifar10", "synthetic"})
      EXPECT_NE(msg.find(valid), std::string::npos) << msg;
  }
}

TEST(DataLoad, MissingDirectoryNamesIt) {
  testing::expect_input_error([] { load_dataset("mnist", "/nonexistent/cohort_mnist"); },
                              "/nonexistent/cohort_mnist");
  testing::expect_input_error([] { load_dataset("cifar10", "/nonexistent/cohort_cifar"); },
                              "/nonexistent/cohort_cifar");
}

TEST(DataLoad, SyntheticShapesAndLimit) {
  DataSplit s = load_dataset("synthetic", "ignored", 100);
  EXPECT_EQ(s.train.images.shape(), (Shape{100, 28, 28, 1}));
  EXPECT_EQ(s.train.size(), 100);
  EXPECT_EQ(s.test.images.shape(), (Shape{2000, 28, 28, 1}));
  EXPECT_EQ(s.train.num_classes, 10);
  EXPECT_EQ(s.train.name, "synthetic");
  // The model's image shape (CIFAR-10 models: 32x32x3).
  DataSplit c = load_dataset("synthetic", "ignored", 10, {32, 32, 3});
  EXPECT_EQ(c.train.images.shape(), (Shape{10, 32, 32, 3}));
  EXPECT_EQ(c.test.images.shape(), (Shape{2000, 32, 32, 3}));
}

TEST(DataSynthetic, DeterministicNormalImagesUniformLabels) {
  Dataset a = make_synthetic(5000, 4, 4, 3, 7, 11);
  Dataset b = make_synthetic(5000, 4, 4, 3, 7, 11);
  Dataset c = make_synthetic(5000, 4, 4, 3, 7, 12);
  ASSERT_EQ(a.images.shape(), (Shape{5000, 4, 4, 3}));
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.labels, c.labels);
  EXPECT_EQ(0, std::memcmp(a.images.data(), b.images.data(), a.images.nbytes()));
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < a.images.numel(); ++i) {
    sum += a.images.f32()[i];
    sq += double(a.images.f32()[i]) * a.images.f32()[i];
  }
  double n = double(a.images.numel()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 1.0, 0.02);
  std::vector<int> counts(7, 0);
  for (int32_t l : a.labels) {
    ASSERT_TRUE(l >= 0 && l < 7);
    ++counts[l];
  }
  for (int k = 0; k < 7; ++k) EXPECT_GT(counts[k], 5000 / 7 / 2);
}

TEST(DataLoad, TakeFirstCopies) {
  Dataset a = make_synthetic(10, 2, 2, 1, 10, 1);
  Dataset t = take_first(a, 3);
  ASSERT_EQ(t.size(), 3);
  EXPECT_EQ(t.images.shape(), (Shape{3, 2, 2, 1}));
  EXPECT_NE(t.images.data(), a.images.data());
  EXPECT_EQ(t.images.f32()[11], a.images.f32()[11]);
}

}  // namespace
}  // namespace cohort
