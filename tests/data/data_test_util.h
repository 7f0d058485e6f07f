// Test helpers for the data layer: a self-deleting temp dir and writers for
// tiny IDX / CIFAR files (raw or gzipped), including deliberately broken ones.
#pragma once
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/error.h"

namespace cohort::testing {

using Bytes = std::vector<unsigned char>;

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("cohort_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(stamp) +
             "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void put_u32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
}

// IDX images file bytes; `count` is what the header claims, `pixels` the body.
inline Bytes idx_images(uint32_t count, uint32_t rows, uint32_t cols, const Bytes& pixels,
                        uint32_t magic = 0x00000803) {
  Bytes b;
  put_u32(b, magic);
  put_u32(b, count);
  put_u32(b, rows);
  put_u32(b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

inline Bytes idx_labels(uint32_t count, const Bytes& labels, uint32_t magic = 0x00000801) {
  Bytes b;
  put_u32(b, magic);
  put_u32(b, count);
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

// Pixel value for image i, position p: distinct enough to catch mix-ups.
inline unsigned char test_pixel(int64_t i, int64_t p) {
  return static_cast<unsigned char>((i * 37 + p * 11) % 256);
}

inline Bytes test_pixels(int64_t n, int64_t per_image) {
  Bytes b;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < per_image; ++p) b.push_back(test_pixel(i, p));
  return b;
}

inline void write_raw(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline void write_gz(const std::string& path, const Bytes& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!b.empty()) {
    ASSERT_EQ(gzwrite(f, b.data(), unsigned(b.size())), int(b.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Runs fn, expects an InputError whose message contains `needle` (the file name)
// and is a single line.
template <typename Fn>
void expect_input_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected InputError mentioning " << needle;
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line message: " << msg;
  }
}

}  // namespace cohort::testing
