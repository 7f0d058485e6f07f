// Tests for the IDX (MNIST / Fashion-MNIST) reader: valid raw and gzip files,
// every kind of malformed input, and the real Fashion-MNIST when installed.
#include <filesystem>

#include "data/data_test_util.h"
#include "data/dataset.h"
#include "data/idx.h"

namespace cohort {
namespace {

using testing::Bytes;
using testing::expect_input_error;
using testing::idx_images;
using testing::idx_labels;
using testing::TempDir;
using testing::test_pixel;
using testing::test_pixels;
using testing::write_gz;
using testing::write_raw;

constexpr int kR = 3, kC = 2;  // tiny non-square images catch row/col swaps

// Writes a complete valid train+test set of n / m images into dir.
void write_set(const TempDir& dir, int n, int m, bool gz) {
  auto w = [&](const std::string& name, const Bytes& b) {
    gz ? write_gz(dir.file(name + ".gz"), b) : write_raw(dir.file(name), b);
  };
  Bytes tl, el;
  for (int i = 0; i < n; ++i) tl.push_back((unsigned char)(i % 10));
  for (int i = 0; i < m; ++i) el.push_back((unsigned char)((i * 3) % 10));
  w("train-images-idx3-ubyte", idx_images(n, kR, kC, test_pixels(n, kR * kC)));
  w("train-labels-idx1-ubyte", idx_labels(n, tl));
  w("t10k-images-idx3-ubyte", idx_images(m, kR, kC, test_pixels(m, kR * kC)));
  w("t10k-labels-idx1-ubyte", idx_labels(m, el));
}

// standardized: what load_dataset gives (it applies the dataset's mean and
// std); the readers themselves give x/255.
void check_images(const Tensor& t, int n, bool standardized = false) {
  ASSERT_EQ(t.shape(), (Shape{n, kR, kC, 1}));
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < kR * kC; ++p) {
      const float x = test_pixel(i, p) / 255.0f;
      ASSERT_FLOAT_EQ(t.f32()[i * kR * kC + p], standardized ? (x - 0.2860f) / 0.3530f : x);
    }
}

TEST(IdxReader, ParsesRawFiles) {
  TempDir dir;
  write_set(dir, 12, 5, /*gz=*/false);
  DataSplit s = load_idx_dir(dir.str(), "mnist");
  check_images(s.train.images, 12);
  check_images(s.test.images, 5);
  ASSERT_EQ(s.train.size(), 12);
  ASSERT_EQ(s.test.size(), 5);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(s.train.labels[i], i % 10);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.test.labels[i], (i * 3) % 10);
  EXPECT_EQ(s.train.name, "mnist");
  EXPECT_EQ(s.train.num_classes, 10);
}

TEST(IdxReader, ParsesGzipFiles) {
  TempDir dir;
  write_set(dir, 7, 4, /*gz=*/true);
  DataSplit s = load_idx_dir(dir.str(), "fashion-mnist");
  check_images(s.train.images, 7);
  check_images(s.test.images, 4);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(s.train.labels[i], i % 10);
}

TEST(IdxReader, LoadDatasetAppliesLimit) {
  TempDir dir;
  write_set(dir, 12, 5, /*gz=*/false);
  DataSplit s = load_dataset("fashion-mnist", dir.str(), 4);
  check_images(s.train.images, 4, /*standardized=*/true);
  EXPECT_EQ(s.train.size(), 4);
  EXPECT_EQ(s.test.size(), 5);
}

TEST(IdxErrors, MissingFile) {
  TempDir dir;
  expect_input_error([&] { read_idx_images(dir.file("nope-idx3-ubyte")); }, "nope-idx3-ubyte");
  expect_input_error([&] { load_idx_dir(dir.str(), "mnist"); }, "train-images-idx3-ubyte");
  expect_input_error([&] { load_idx_dir(dir.file("no_such_dir"), "mnist"); }, "no_such_dir");
}

TEST(IdxErrors, BadMagic) {
  TempDir dir;
  std::string p = dir.file("bad-magic-images");
  write_raw(p, idx_labels(3, {1, 2, 3}));  // a labels file where images are expected
  expect_input_error([&] { read_idx_images(p); }, "bad-magic-images");
  std::string q = dir.file("bad-magic-labels.gz");
  write_gz(q, idx_images(1, kR, kC, test_pixels(1, kR * kC)));
  expect_input_error([&] { read_idx_labels(q); }, "bad-magic-labels.gz");
}

TEST(IdxErrors, TruncatedHeader) {
  TempDir dir;
  std::string p = dir.file("short-header");
  write_raw(p, {0, 0, 8, 3, 0, 0});
  expect_input_error([&] { read_idx_images(p); }, "short-header");
  std::string q = dir.file("empty.gz");
  write_gz(q, {});
  expect_input_error([&] { read_idx_labels(q); }, "empty.gz");
}

TEST(IdxErrors, HeaderCountLargerThanData) {
  TempDir dir;
  // Header claims 100M images of 28x28 (78 GB); must fail fast, not allocate.
  Bytes b = idx_images(100'000'000, 28, 28, test_pixels(2, 28 * 28));
  std::string raw = dir.file("huge-images"), gz = dir.file("huge-images.gz");
  write_raw(raw, b);
  write_gz(gz, b);
  expect_input_error([&] { read_idx_images(raw); }, "huge-images");
  expect_input_error([&] { read_idx_images(gz); }, "huge-images.gz");
  // Absurd dimensions are rejected outright.
  std::string dims = dir.file("huge-dims");
  write_raw(dims, idx_images(1, 100000, 100000, {}));
  expect_input_error([&] { read_idx_images(dims); }, "huge-dims");
  std::string labels = dir.file("huge-labels.gz");
  write_gz(labels, idx_labels(4'000'000'000u, {1, 2}));
  expect_input_error([&] { read_idx_labels(labels); }, "huge-labels.gz");
}

TEST(IdxErrors, TruncatedBody) {
  TempDir dir;
  Bytes b = idx_images(5, kR, kC, test_pixels(5, kR * kC));
  b.resize(b.size() - 1);
  write_raw(dir.file("trunc"), b);
  write_gz(dir.file("trunc.gz"), b);
  expect_input_error([&] { read_idx_images(dir.file("trunc")); }, "trunc");
  expect_input_error([&] { read_idx_images(dir.file("trunc.gz")); }, "trunc.gz");
  // A gzip stream cut off mid-way (not just short data inside a valid stream).
  Bytes big = idx_images(200, 28, 28, test_pixels(200, 28 * 28));
  write_gz(dir.file("cut.gz"), big);
  std::filesystem::resize_file(dir.file("cut.gz"),
                               std::filesystem::file_size(dir.file("cut.gz")) / 2);
  expect_input_error([&] { read_idx_images(dir.file("cut.gz")); }, "cut.gz");
}

TEST(IdxErrors, TrailingBytesRejected) {
  TempDir dir;
  Bytes b = idx_labels(3, {1, 2, 3, 4});
  write_raw(dir.file("trailing"), b);
  write_gz(dir.file("trailing.gz"), b);
  expect_input_error([&] { read_idx_labels(dir.file("trailing")); }, "trailing");
  expect_input_error([&] { read_idx_labels(dir.file("trailing.gz")); }, "trailing.gz");
}

TEST(IdxErrors, LabelOutOfRange) {
  TempDir dir;
  write_gz(dir.file("bad-label.gz"), idx_labels(3, {1, 10, 3}));
  expect_input_error([&] { read_idx_labels(dir.file("bad-label.gz")); }, "bad-label.gz");
}

TEST(IdxErrors, ImageLabelCountMismatch) {
  TempDir dir;
  write_set(dir, 6, 2, /*gz=*/false);
  write_raw(dir.file("train-labels-idx1-ubyte"), idx_labels(5, {0, 1, 2, 3, 4}));
  try {
    load_idx_dir(dir.str(), "mnist");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("train-images-idx3-ubyte"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train-labels-idx1-ubyte"), std::string::npos) << msg;
  }
}

TEST(IdxReader, RealFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir << " missing (scripts/setup.sh installs dataset-fashion-mnist)";
  DataSplit s = load_dataset("fashion-mnist", dir);
  ASSERT_EQ(s.train.images.shape(), (Shape{60000, 28, 28, 1}));
  ASSERT_EQ(s.test.images.shape(), (Shape{10000, 28, 28, 1}));
  ASSERT_EQ(s.train.size(), 60000);
  ASSERT_EQ(s.test.size(), 10000);
  std::vector<int> counts(10, 0);
  for (int32_t l : s.train.labels) {
    ASSERT_TRUE(l >= 0 && l < 10);
    ++counts[l];
  }
  for (int32_t l : s.test.labels) ASSERT_TRUE(l >= 0 && l < 10);
  for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[c], 6000) << "class " << c;
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < s.train.images.numel(); ++i) {
    lo = std::min(lo, s.train.images.f32()[i]);
    hi = std::max(hi, s.train.images.f32()[i]);
  }
  // load_dataset standardizes: (x/255 - 0.2860) / 0.3530.
  EXPECT_FLOAT_EQ(lo, (0.0f - 0.2860f) / 0.3530f);
  EXPECT_FLOAT_EQ(hi, (1.0f - 0.2860f) / 0.3530f);
}

}  // namespace
}  // namespace cohort
