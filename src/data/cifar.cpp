// CIFAR-10 binary reader. File sizes are validated before anything is allocated,
// and the five training batches are decoded straight into one preallocated
// tensor so loading never holds two copies of the training set.
#include "data/cifar.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

constexpr int kSide = 32;
constexpr int kPlane = kSide * kSide;         // 1024
constexpr int kPixels = kPlane * 3;           // 3072
constexpr int64_t kRecord = 1 + kPixels;      // 3073
constexpr int kNumClasses = 10;

// Number of records in `path`; InputError if missing, empty or not whole records.
int64_t record_count(const std::string& path) {
  std::error_code ec;
  COHORT_INPUT_CHECK(fs::is_regular_file(path, ec), path, ": file not found");
  uintmax_t size = fs::file_size(path, ec);
  COHORT_INPUT_CHECK(!ec, path, ": cannot stat (", ec.message(), ")");
  COHORT_INPUT_CHECK(size > 0, path, ": file is empty");
  COHORT_INPUT_CHECK(size % kRecord == 0, path, ": size ", size,
                     " bytes is not a multiple of the 3073-byte CIFAR-10 record");
  return int64_t(size / kRecord);
}

// Decodes n records of `path` into NHWC normalized images and labels.
void decode(const std::string& path, int64_t n, float* images, int32_t* labels) {
  std::ifstream f(path, std::ios::binary);
  COHORT_INPUT_CHECK(f.good(), path, ": cannot open");
  std::vector<unsigned char> rec(kRecord);
  float scale[3], shift[3];  // (x/255 - mean)/std as one multiply-add
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * kCifarStd[c]);
    shift[c] = -kCifarMean[c] / kCifarStd[c];
  }
  for (int64_t i = 0; i < n; ++i) {
    f.read(reinterpret_cast<char*>(rec.data()), kRecord);
    COHORT_INPUT_CHECK(f.gcount() == kRecord, path, ": short read at record ", i,
                       " (file changed while reading?)");
    COHORT_INPUT_CHECK(rec[0] < kNumClasses, path, ": label ", int(rec[0]), " at record ", i,
                       " is outside [0, 9]");
    labels[i] = rec[0];
    float* out = images + i * kPixels;
    const unsigned char* px = rec.data() + 1;
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < kPlane; ++p) out[p * 3 + c] = px[c * kPlane + p] * scale[c] + shift[c];
  }
}

Dataset read_files(const std::vector<std::string>& paths) {
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const auto& p : paths) total += counts.emplace_back(record_count(p));
  Dataset d;
  d.images = Tensor::empty({total, kSide, kSide, 3});
  d.labels.resize(size_t(total));
  d.num_classes = kNumClasses;
  d.name = "cifar10";
  int64_t at = 0;
  for (size_t k = 0; k < paths.size(); ++k) {
    decode(paths[k], counts[k], d.images.f32() + at * kPixels, d.labels.data() + at);
    at += counts[k];
  }
  return d;
}

}  // namespace

Dataset read_cifar_batch(const std::string& path) { return read_files({path}); }

DataSplit load_cifar10_dir(const std::string& dir) {
  std::error_code ec;
  COHORT_INPUT_CHECK(fs::is_directory(dir, ec), "cifar10: data directory '", dir,
                     "' does not exist");
  fs::path root = dir;
  if (!fs::exists(root / "data_batch_1.bin", ec) &&
      fs::exists(root / "cifar-10-batches-bin" / "data_batch_1.bin", ec))
    root /= "cifar-10-batches-bin";
  std::vector<std::string> train;
  for (int i = 1; i <= 5; ++i)
    train.push_back((root / ("data_batch_" + std::to_string(i) + ".bin")).string());
  DataSplit s;
  s.train = read_files(train);
  s.test = read_files({(root / "test_batch.bin").string()});
  return s;
}

}  // namespace cohort
