// safetensors reader/writer and model checkpoints on top of it. The reader
// treats the file as untrusted: every length and offset is checked against the
// file size before anything is allocated or read.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "train/hf_gpt2.h"

namespace cohort {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr const char* kMetadataKey = "__metadata__";

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

std::string errno_str() { return std::strerror(errno); }

// Closes a file descriptor on scope exit.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `size` bytes at `offset`, or throws InputError.
void read_at(int fd, const std::string& path, void* dst, size_t size, uint64_t offset) {
  char* p = static_cast<char*>(dst);
  while (size > 0) {
    ssize_t got = ::pread(fd, p, std::min<size_t>(size, size_t(1) << 30), off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError("cannot read " + path + ": " + errno_str());
    if (got == 0) throw InputError("safetensors file " + path + " is truncated");
    p += got;
    size -= size_t(got);
    offset += uint64_t(got);
  }
}

using Entry = SafetensorsIndex::Entry;

// Validates one tensor entry of the header against the data section size.
Entry parse_entry(const std::string& path, const std::string& name, const Json& j,
                  uint64_t data_size) {
  auto bad = [&](const std::string& why) {
    return InputError("safetensors file " + path + ": tensor '" + one_line(name) + "' " + why);
  };
  if (!j.is_object()) throw bad("is not a JSON object");
  Entry e{name, DType::kF32, {}, 0, 0};

  auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string()) throw bad("has no dtype string");
  const std::string& dt = dtype->get_ref<const std::string&>();
  if (dt == "F32") {
    e.dtype = DType::kF32;
  } else if (dt == "BF16") {
    e.dtype = DType::kBF16;
  } else if (dt == "F16") {
    e.dtype = DType::kF16;
  } else if (dt == "I64") {  // PyTorch's batch-norm counters (num_batches_tracked)
    e.dtype = DType::kI64;
  } else {
    throw bad("has unsupported dtype '" + one_line(dt) + "' (supported: F32, BF16, F16, I64)");
  }

  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) throw bad("has no shape array");
  uint64_t bytes = dtype_size(e.dtype);
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned()) throw bad("has a shape entry that is not a non-negative integer");
    uint64_t dim = d.get<uint64_t>();
    if (dim > uint64_t(INT64_MAX) || __builtin_mul_overflow(bytes, dim, &bytes))
      throw bad("has a shape too large for the file");
    e.shape.push_back(int64_t(dim));
  }

  auto offsets = j.find("data_offsets");
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    throw bad("has no data_offsets [begin, end]");
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    throw bad("has data_offsets [" + std::to_string(e.begin) + "," + std::to_string(e.end) +
              "] outside the " + std::to_string(data_size) + "-byte data section");
  if (e.end - e.begin != bytes)
    throw bad("has " + std::to_string(e.end - e.begin) + " bytes of data but shape " +
              shape_str(e.shape) + " " + dt + " needs " + std::to_string(bytes));
  return e;
}

}  // namespace

std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

uint64_t save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson meta = OrderedJson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header[kMetadataKey] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    COHORT_CHECK(!t.name.empty() && t.name != kMetadataKey && !header.contains(t.name),
                 "saving ", path, ": bad or duplicate tensor name '", t.name, "'");
    COHORT_CHECK(t.tensor.defined(), "saving ", path, ": tensor '", t.name, "' has no data");
    uint64_t end = offset + t.tensor.nbytes();
    header[t.name] = {{"dtype", safetensors_dtype(t.tensor.dtype())},
                      {"shape", t.tensor.shape()},
                      {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // e.g. a name that is not UTF-8
    throw Error("saving " + path + " failed: " + e.what());
  }
  // The format asks for 8-byte alignment of the data section; pad with spaces.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t header_len = text.size();

  AtomicFile file(path);
  file.write(&header_len, sizeof header_len);
  file.write(text.data(), text.size());
  for (const NamedTensor& t : tensors)
    if (t.tensor.nbytes()) file.write(t.tensor.data(), t.tensor.nbytes());
  file.commit();
  return sizeof header_len + header_len + offset;
}

namespace {

// Opens `path` for reading as a regular file; InputError naming it otherwise.
int open_regular(const std::string& path, uint64_t* size) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of blocking.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError("cannot open " + path + ": " + errno_str());
  Fd guard{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) throw InputError("cannot stat " + path + ": " + errno_str());
  if (!S_ISREG(st.st_mode)) throw InputError(path + " is not a regular file");
  *size = uint64_t(st.st_size);
  guard.fd = -1;
  return fd;
}

SafetensorsIndex index_of(int fd, const std::string& path, uint64_t file_size) {
  const std::string what = "safetensors file " + path;
  if (file_size < 8)
    throw InputError(what + " is " + std::to_string(file_size) +
                     " bytes, too short for a header");

  uint64_t header_len = 0;
  read_at(fd, path, &header_len, 8, 0);
  if (header_len > file_size - 8)
    throw InputError(what + " claims a " + std::to_string(header_len) +
                     "-byte header but the file has only " + std::to_string(file_size) +
                     " bytes");
  std::string text(header_len, '\0');
  read_at(fd, path, text.data(), text.size(), 8);
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {  // parse errors, and numbers out of range (1e999)
    throw InputError(what + ": header is not valid JSON: " + one_line(e.what()));
  }
  if (!header.is_object()) throw InputError(what + ": header is not a JSON object");

  SafetensorsIndex out;
  out.path = path;
  out.file_size = file_size;
  out.data_start = 8 + header_len;
  const uint64_t data_size = file_size - out.data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) throw InputError(what + ": __metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          throw InputError(what + ": metadata '" + one_line(k) + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(parse_entry(path, key, value, data_size));
  }
  std::vector<Entry>& entries = out.entries;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      throw InputError(what + ": tensors '" + one_line(entries[i - 1].name) + "' and '" +
                       one_line(entries[i].name) + "' overlap");
  return out;
}

}  // namespace

const SafetensorsIndex::Entry* SafetensorsIndex::find(const std::string& name) const {
  for (const Entry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

SafetensorsIndex index_safetensors(const std::string& path) {
  uint64_t size = 0;
  Fd fd{open_regular(path, &size)};
  return index_of(fd.fd, path, size);
}

void read_f32_slice(const SafetensorsIndex& index, const std::string& name, int64_t begin,
                    int64_t end, float* dst) {
  const Entry* e = index.find(name);
  const std::string at = "safetensors file " + index.path + ": tensor '" + one_line(name) + "'";
  if (!e) throw InputError(at + " is missing");
  if (e->dtype != DType::kF32) throw InputError(at + " is not F32");
  const int64_t numel = int64_t((e->end - e->begin) / 4);
  if (begin < 0 || begin > end || end > numel)
    throw InputError(at + " has " + std::to_string(numel) + " elements, not the [" +
                     std::to_string(begin) + ", " + std::to_string(end) + ") asked for");
  uint64_t size = 0;
  Fd fd{open_regular(index.path, &size)};
  if (size != index.file_size)
    throw InputError("safetensors file " + index.path + " changed size while being read");
  read_at(fd.fd, index.path, dst, size_t(end - begin) * 4,
          index.data_start + e->begin + uint64_t(begin) * 4);
}

SafetensorsFile load_safetensors(const std::string& path) {
  uint64_t size = 0;
  Fd fd{open_regular(path, &size)};
  const SafetensorsIndex index = index_of(fd.fd, path, size);
  SafetensorsFile out;
  out.metadata = index.metadata;
  // Only now, with every size proven to fit in the file, allocate and read.
  for (const Entry& e : index.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (t.nbytes()) read_at(fd.fd, path, t.data(), t.nbytes(), index.data_start + e.begin);
    out.tensors.push_back({e.name, std::move(t)});
  }
  return out;
}

void save_checkpoint(const std::string& path, const std::string& model_name, const Arena& params,
                     const Arena* buffers,
                     const std::map<std::string, std::string>& extra_metadata,
                     const std::vector<NamedTensor>& extra_tensors) {
  COHORT_CHECK(!extra_metadata.count("model"), "metadata key 'model' is reserved");
  std::map<std::string, std::string> metadata = extra_metadata;
  metadata["model"] = model_name;
  std::vector<NamedTensor> tensors;
  for (const Arena* arena : {&params, buffers}) {
    if (!arena) continue;
    COHORT_CHECK(arena->size() == 0 || arena->params().data(), "saving ", path,
                 ": arena not allocated");
    for (size_t i = 0; i < arena->infos().size(); ++i) {
      const std::string& name = arena->infos()[i].name;
      Tensor t = arena->param(i);
      if (is_batch_counter(name)) {  // int64 in PyTorch's state dicts
        Tensor count = Tensor::empty(t.shape(), DType::kI64);
        count.copy_from(t);
        t = count;
      }
      tensors.push_back({name, t});
    }
  }
  tensors.insert(tensors.end(), extra_tensors.begin(), extra_tensors.end());
  save_safetensors(path, tensors, metadata);
}

bool is_batch_counter(const std::string& name) {
  const std::string end = ".num_batches_tracked";
  return name.size() >= end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0;
}

bool all_finite(const Tensor& t) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::kI64 || t.dtype() == DType::kI32) return true;
  if (t.dtype() == DType::kF16) {
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(from_f16(t.f16()[i]))) return false;
    return true;
  }
  if (t.dtype() == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(from_bf16(t.bf16()[i]))) return false;
    return true;
  }
  COHORT_CHECK(t.dtype() == DType::kF32, "all_finite: f32 or bf16 expected");
  const float* p = t.f32();
  bool ok = true;
#pragma omp parallel for reduction(&& : ok) if (n > (1 << 20))
  for (int64_t i = 0; i < n; ++i) ok = ok && std::isfinite(p[i]);
  return ok;
}

std::string first_non_finite(const Arena& a) {
  for (size_t i = 0; i < a.infos().size(); ++i)
    if (!all_finite(a.param(i))) return a.infos()[i].name;
  return "";
}

std::vector<TensorCopy> plan_checkpoint_load(const SafetensorsFile& file, const std::string& path,
                                             const std::string& model_name, const Arena& params,
                                             const Arena* buffers) {
  auto model = file.metadata.find("model");
  if (model == file.metadata.end())
    throw InputError("checkpoint " + path + " has no 'model' metadata; not a cohort checkpoint");
  if (model->second != model_name)
    throw InputError("checkpoint " + path + " holds model '" + one_line(model->second) +
                     "', not '" + model_name + "'");

  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& t : file.tensors) by_name[t.name] = &t.tensor;

  std::vector<TensorCopy> copies;
  for (const Arena* arena : {&params, buffers}) {
    if (!arena) continue;
    for (size_t i = 0; i < arena->infos().size(); ++i) {
      const ParamInfo& info = arena->infos()[i];
      auto it = by_name.find(info.name);
      // Files written before batch-norm counted its batches keep the count at 0.
      if (it == by_name.end() && is_batch_counter(info.name)) continue;
      if (it == by_name.end())
        throw InputError("checkpoint " + path + ": tensor '" + info.name + "' is missing");
      if (it->second->shape() != info.shape)
        throw InputError("checkpoint " + path + ": tensor '" + info.name + "' has shape " +
                         shape_str(it->second->shape()) + ", model expects " +
                         shape_str(info.shape));
      if (!all_finite(*it->second))
        throw InputError("checkpoint " + path + ": tensor '" + info.name +
                         "' holds NaN or infinite values");
      copies.push_back({arena->param(i), it->second});
    }
  }
  return copies;
}

void apply_copies(const std::vector<TensorCopy>& copies) {
  for (const TensorCopy& c : copies) c.dst.copy_from(*c.src);
}

void load_checkpoint(const std::string& path, const std::string& model_name, const Arena& params,
                     const Arena* buffers) {
  SafetensorsFile file = load_safetensors(path);
  // Hugging Face's GPT-2 files: same names, Conv1D layout (train/hf_gpt2.h).
  if (model_name.rfind("gpt2", 0) == 0 && is_hf_gpt2(file)) from_hf_gpt2(file, model_name);
  // Validate everything before the first copy so a bad file changes nothing.
  apply_copies(plan_checkpoint_load(file, path, model_name, params, buffers));
}

}  // namespace cohort
