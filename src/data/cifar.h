// Reader for the CIFAR-10 binary format (data_batch_1..5.bin, test_batch.bin):
// records of 1 label byte + 3072 bytes CHW 32x32x3, converted to normalized NHWC.
#pragma once
#include <string>

#include "data/dataset.h"

namespace cohort {

// The usual CIFAR-10 per-channel statistics (RGB), applied as (x/255 - mean) / std.
inline constexpr float kCifarMean[3] = {0.4914f, 0.4822f, 0.4465f};
inline constexpr float kCifarStd[3] = {0.2470f, 0.2435f, 0.2616f};

// One batch file -> images {N,32,32,3} (normalized) and labels. InputError naming
// the file if it is missing, empty, not a multiple of 3073 bytes, or has a label > 9.
Dataset read_cifar_batch(const std::string& path);

// Train = data_batch_1..5.bin concatenated, test = test_batch.bin. If dir lacks
// them but dir/cifar-10-batches-bin has them (the tarball's layout), uses that.
DataSplit load_cifar10_dir(const std::string& dir);

}  // namespace cohort
