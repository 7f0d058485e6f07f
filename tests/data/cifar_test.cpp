// Tests for the CIFAR-10 binary reader: CHW->NHWC layout, normalization,
// batch concatenation and malformed files.
#include <cmath>

#include "data/cifar.h"
#include "data/data_test_util.h"

namespace cohort {
namespace {

using testing::Bytes;
using testing::expect_input_error;
using testing::TempDir;
using testing::write_raw;

unsigned char px(int rec, int c, int y, int x) { return (unsigned char)((rec * 7 + c * 50 + y * 3 + x) % 256); }

Bytes cifar_records(int n, int first_label) {
  Bytes b;
  for (int r = 0; r < n; ++r) {
    b.push_back((unsigned char)((first_label + r) % 10));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) b.push_back(px(r, c, y, x));
  }
  return b;
}

float expected(int rec, int c, int y, int x) {
  return (px(rec, c, y, x) / 255.0f - kCifarMean[c]) / kCifarStd[c];
}

TEST(CifarReader, ParsesBatchAsNormalizedNhwc) {
  TempDir dir;
  write_raw(dir.file("b.bin"), cifar_records(3, 4));
  Dataset d = read_cifar_batch(dir.file("b.bin"));
  ASSERT_EQ(d.images.shape(), (Shape{3, 32, 32, 3}));
  ASSERT_EQ(d.labels, (std::vector<int32_t>{4, 5, 6}));
  for (int r = 0; r < 3; ++r)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c)
          ASSERT_NEAR(d.images.f32()[((r * 32 + y) * 32 + x) * 3 + c], expected(r, c, y, x), 1e-5);
}

TEST(CifarReader, LoadsDirectoryInBatchOrder) {
  TempDir dir;
  for (int i = 1; i <= 5; ++i)
    write_raw(dir.file("data_batch_" + std::to_string(i) + ".bin"), cifar_records(i, i));
  write_raw(dir.file("test_batch.bin"), cifar_records(2, 0));
  DataSplit s = load_cifar10_dir(dir.str());
  ASSERT_EQ(s.train.size(), 1 + 2 + 3 + 4 + 5);
  ASSERT_EQ(s.test.size(), 2);
  // Batch 3 starts at record 1+2 = 3 with label 3; its first image is record 0 of that file.
  EXPECT_EQ(s.train.labels[3], 3);
  EXPECT_NEAR(s.train.images.f32()[3 * 3072 + 2], expected(0, 2, 0, 0), 1e-5);
  EXPECT_EQ(s.test.labels, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(s.train.name, "cifar10");
}

TEST(CifarErrors, MissingFile) {
  TempDir dir;
  expect_input_error([&] { read_cifar_batch(dir.file("data_batch_9.bin")); }, "data_batch_9.bin");
  for (int i = 1; i <= 4; ++i)
    write_raw(dir.file("data_batch_" + std::to_string(i) + ".bin"), cifar_records(1, 0));
  expect_input_error([&] { load_cifar10_dir(dir.str()); }, "data_batch_5.bin");
}

TEST(CifarErrors, SizeNotMultipleOfRecord) {
  TempDir dir;
  Bytes b = cifar_records(2, 0);
  b.pop_back();
  write_raw(dir.file("short.bin"), b);
  expect_input_error([&] { read_cifar_batch(dir.file("short.bin")); }, "short.bin");
  write_raw(dir.file("empty.bin"), {});
  expect_input_error([&] { read_cifar_batch(dir.file("empty.bin")); }, "empty.bin");
}

TEST(CifarErrors, LabelOutOfRange) {
  TempDir dir;
  Bytes b = cifar_records(3, 0);
  b[3073] = 10;  // second record's label
  write_raw(dir.file("badlabel.bin"), b);
  expect_input_error([&] { read_cifar_batch(dir.file("badlabel.bin")); }, "badlabel.bin");
}

}  // namespace
}  // namespace cohort
