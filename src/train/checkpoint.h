// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors),
// so PyTorch users can open them with safetensors.torch.load_file:
//   u64 little-endian header length N | N bytes of JSON header, space-padded
//   to a multiple of 8 | raw little-endian tensor data.
// The header maps each tensor name to {"dtype","shape","data_offsets"} (offsets
// relative to the data section) plus "__metadata__": {string: string}.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"

namespace cohort {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes atomically: a temp file next to `path` is written, fsynced and renamed
// onto it, so a crash or failed save never leaves a damaged `path`. Throws
// Error naming the path on failure (and removes the temp file). Returns the
// file's size in bytes.
uint64_t save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors;  // in data (file) order
  const Tensor* find(const std::string& name) const;  // null if absent
};

// `s` with control characters replaced: keeps messages about a file's
// (untrusted) names and metadata on one line.
std::string one_line(std::string s);

// Loads F32, BF16, F16 and I64 tensors (kept in their dtype). Any malformed, truncated or
// unsupported file throws a one-line InputError naming the path.
SafetensorsFile load_safetensors(const std::string& path);

// A safetensors file's header, validated as load_safetensors does, without
// its data: for reading slices of tensors too large to load whole (the
// optimizer-state shards of train/resume.h).
struct SafetensorsIndex {
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;  // byte offsets within the data section
  };
  std::string path;
  uint64_t file_size = 0, data_start = 0;
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;  // in data (file) order
  const Entry* find(const std::string& name) const;  // null if absent
};
SafetensorsIndex index_safetensors(const std::string& path);

// Reads elements [begin, end) of `index`'s f32 tensor `name` into dst
// (end - begin floats). InputError naming the path and tensor where the
// tensor is missing, not F32, or shorter than `end`, or the read fails.
void read_f32_slice(const SafetensorsIndex& index, const std::string& name, int64_t begin,
                    int64_t end, float* dst);

// Every parameter of `params` (and of `buffers`, e.g. batch-norm running
// statistics, when non-null) under its ParamInfo name, then `extra_tensors`
// (train/resume.h stores the optimizer's state there), with metadata
// "model" = model_name plus `extra_metadata`.
void save_checkpoint(const std::string& path, const std::string& model_name, const Arena& params,
                     const Arena* buffers,
                     const std::map<std::string, std::string>& extra_metadata,
                     const std::vector<NamedTensor>& extra_tensors = {});

// One copy a validated load will make: file tensor `src` into arena view `dst`.
struct TensorCopy {
  Tensor dst;
  const Tensor* src;
};

// Validates `file` (read from `path`) as a checkpoint of `model_name` holding
// every tensor of the arenas with the expected shape (batch counters may be
// absent), and returns the copies that load it; modifies nothing. InputError naming the path and tensor.
std::vector<TensorCopy> plan_checkpoint_load(const SafetensorsFile& file, const std::string& path,
                                             const std::string& model_name, const Arena& params,
                                             const Arena* buffers);
void apply_copies(const std::vector<TensorCopy>& copies);  // BF16, F16, I64 sources converted

// Batch-norm's counter of training batches ("bn1.num_batches_tracked"): an
// f32 scalar in the buffer arena (exact to 2^24 batches), int64 in files, as
// in PyTorch's state dicts. A file without it (written before cohort counted)
// loads with the count left as it is.
bool is_batch_counter(const std::string& name);

// Whether every element of a tensor is finite (integers always are).
bool all_finite(const Tensor& t);
// The name of the first parameter of `a` holding a NaN or an infinity; "" if none.
std::string first_non_finite(const Arena& a);

// Copies a checkpoint written by save_checkpoint into the arenas (weights
// only: `cohort train --load`). The whole file is validated first
// (plan_checkpoint_load: names, shapes, and every value finite) and
// InputError thrown before anything is modified.
// Tensors the model does not expect are ignored, so a file may hold more: the
// optimizer state and run position that train/resume.h saves and restores.
void load_checkpoint(const std::string& path, const std::string& model_name, const Arena& params,
                     const Arena* buffers);

}  // namespace cohort
