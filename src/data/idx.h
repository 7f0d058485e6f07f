// Reader for the IDX format used by MNIST and Fashion-MNIST, raw or gzipped.
// Every malformed file is an InputError naming the path; nothing is allocated
// beyond what the file actually contains.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace cohort {

// Images file (magic 0x00000803): returns f32 {N, rows, cols, 1} scaled to [0,1].
// Trailing bytes after the last image are an error: they mean the header's count
// disagrees with the file, which usually means a wrong or corrupted file.
// (Non-gzip bytes after the end of a gzip stream are skipped by zlib, not seen.)
Tensor read_idx_images(const std::string& path);

// Labels file (magic 0x00000801): every label must lie in [0, num_classes).
// Trailing bytes are an error, as for images.
std::vector<int32_t> read_idx_labels(const std::string& path, int num_classes = 10);

// `dir/base` if it exists, else `dir/base.gz`; InputError naming both if neither.
std::string find_idx_file(const std::string& dir, const std::string& base);

// Loads train-/t10k- images and labels from dir (raw or .gz), checks that image
// and label counts agree, and names both datasets `name`.
DataSplit load_idx_dir(const std::string& dir, const std::string& name);

}  // namespace cohort
