// IDX reader. Both raw and gzipped files go through zlib's gzread (which passes
// raw files through untouched). The header is validated before any allocation:
// for raw files against the real file size, for gzip files (whose decompressed
// size is unknown up front) by reading in chunks so memory only grows with data
// that actually exists.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/error.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kImageMagic = 0x00000803;  // unsigned byte, 3 dims
constexpr uint32_t kLabelMagic = 0x00000801;  // unsigned byte, 1 dim
constexpr int64_t kMaxDim = 4096;
constexpr int64_t kMaxCount = 100'000'000;
constexpr size_t kChunk = size_t(1) << 20;
// Initial reservation for gzip bodies; beyond this the buffer grows with real data.
constexpr int64_t kGzReserve = int64_t(64) << 20;

std::string hex32(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return os.str();
}

bool is_gzip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char b[2] = {0, 0};
  f.read(reinterpret_cast<char*>(b), 2);
  return f.gcount() == 2 && b[0] == 0x1f && b[1] == 0x8b;
}

// RAII gzFile that turns zlib failures into InputErrors naming the path.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    COHORT_INPUT_CHECK(fs::exists(path, ec), path, ": file not found");
    COHORT_INPUT_CHECK(fs::is_regular_file(path, ec), path, ": not a regular file");
    f_ = gzopen(path.c_str(), "rb");
    COHORT_INPUT_CHECK(f_ != nullptr, path, ": cannot open");
  }
  ~GzReader() { gzclose(f_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; fewer only at end of data. A corrupt stream throws.
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    auto* p = static_cast<unsigned char*>(dst);
    while (got < n) {
      unsigned want = unsigned(std::min(n - got, kChunk));
      int r = gzread(f_, p + got, want);
      if (r < 0) throw InputError(path_ + ": corrupt gzip data (" + zlib_message() + ")");
      if (r == 0) break;
      got += size_t(r);
    }
    return got;
  }

  // zlib's reason for a short read, e.g. "unexpected end of file"; "" if none.
  std::string zlib_message() {
    int errnum = Z_OK;
    const char* msg = gzerror(f_, &errnum);
    if (errnum == Z_OK || !msg) return "";
    std::string m = msg;
    // zlib prefixes the path, which our messages already start with.
    if (m.rfind(path_ + ": ", 0) == 0) m.erase(0, path_.size() + 2);
    return m;
  }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

// Reads the big-endian u32 header words; a short header is "truncated".
std::vector<uint32_t> read_header(GzReader& r, const std::string& path, int words) {
  std::vector<unsigned char> b(size_t(words) * 4);
  size_t got = r.read(b.data(), b.size());
  COHORT_INPUT_CHECK(got == b.size(), path, ": truncated header (", got, " bytes, need ",
                     b.size(), ")");
  std::vector<uint32_t> out(words);
  for (int i = 0; i < words; ++i)
    out[i] = (uint32_t(b[4 * i]) << 24) | (uint32_t(b[4 * i + 1]) << 16) |
             (uint32_t(b[4 * i + 2]) << 8) | uint32_t(b[4 * i + 3]);
  return out;
}

void check_magic(uint32_t magic, uint32_t want, const std::string& path) {
  if (magic == want) return;
  std::string hint;
  if (magic == kImageMagic) hint = "; this is an IDX images file";
  if (magic == kLabelMagic) hint = "; this is an IDX labels file";
  if ((magic >> 16) == 0x1f8b) hint = "; looks like a corrupt gzip file";
  throw InputError(path + ": bad magic number " + hex32(magic) + " (expected " + hex32(want) +
                   ")" + hint);
}

// Reads exactly `expected` body bytes following a `header_bytes` header, or throws.
// `what` describes the expectation for messages ("60000 images of 28x28").
std::vector<unsigned char> read_body(GzReader& r, const std::string& path, int64_t header_bytes,
                                     int64_t expected, const std::string& what) {
  bool gz = is_gzip(path);
  if (!gz) {
    // Raw file: the size is known, so reject a lying header before allocating.
    std::error_code ec;
    int64_t avail = int64_t(fs::file_size(path, ec)) - header_bytes;
    COHORT_INPUT_CHECK(!ec, path, ": cannot stat (", ec.message(), ")");
    COHORT_INPUT_CHECK(avail >= expected, path, ": header says ", what, " (", expected,
                       " bytes) but the file holds only ", avail, " bytes of data (truncated?)");
    COHORT_INPUT_CHECK(avail == expected, path, ": ", avail - expected,
                       " trailing bytes after ", what, " (header count does not match file)");
  }
  std::vector<unsigned char> buf;
  buf.reserve(size_t(gz ? std::min(expected, kGzReserve) : expected));
  while (int64_t(buf.size()) < expected) {
    size_t want = size_t(std::min<int64_t>(expected - int64_t(buf.size()), int64_t(kChunk)));
    size_t old = buf.size();
    buf.resize(old + want);
    size_t got = r.read(buf.data() + old, want);
    buf.resize(old + got);
    if (got < want) {
      std::string why = r.zlib_message();
      throw InputError(path + ": data ends after " + std::to_string(buf.size()) + " of " +
                       std::to_string(expected) + " bytes for " + what + " (truncated" +
                       (why.empty() ? "" : ": " + why) + ")");
    }
  }
  unsigned char extra;
  COHORT_INPUT_CHECK(r.read(&extra, 1) == 0, path, ": trailing bytes after ", what,
                     " (header count does not match file)");
  return buf;
}

}  // namespace

Tensor read_idx_images(const std::string& path) {
  GzReader r(path);
  auto h = read_header(r, path, 4);
  check_magic(h[0], kImageMagic, path);
  int64_t count = h[1], rows = h[2], cols = h[3];
  COHORT_INPUT_CHECK(count >= 1 && count <= kMaxCount, path, ": implausible image count ",
                     count, " (expected 1..", kMaxCount, ")");
  COHORT_INPUT_CHECK(rows >= 1 && rows <= kMaxDim && cols >= 1 && cols <= kMaxDim, path,
                     ": implausible image size ", rows, "x", cols, " (expected 1..", kMaxDim,
                     " per side)");
  std::string what = std::to_string(count) + " images of " + std::to_string(rows) + "x" +
                     std::to_string(cols);
  auto bytes = read_body(r, path, 16, count * rows * cols, what);
  Tensor t = Tensor::empty({count, rows, cols, 1});
  float* p = t.f32();
  for (size_t i = 0; i < bytes.size(); ++i) p[i] = float(bytes[i]) / 255.0f;
  return t;
}

std::vector<int32_t> read_idx_labels(const std::string& path, int num_classes) {
  GzReader r(path);
  auto h = read_header(r, path, 2);
  check_magic(h[0], kLabelMagic, path);
  int64_t count = h[1];
  COHORT_INPUT_CHECK(count >= 1 && count <= kMaxCount, path, ": implausible label count ",
                     count, " (expected 1..", kMaxCount, ")");
  auto bytes = read_body(r, path, 8, count, std::to_string(count) + " labels");
  std::vector<int32_t> labels(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    COHORT_INPUT_CHECK(int(bytes[i]) < num_classes, path, ": label ", int(bytes[i]),
                       " at index ", i, " is outside [0, ", num_classes, ")");
    labels[i] = bytes[i];
  }
  return labels;
}

std::string find_idx_file(const std::string& dir, const std::string& base) {
  std::error_code ec;
  fs::path raw = fs::path(dir) / base;
  fs::path gz = fs::path(dir) / (base + ".gz");
  if (fs::exists(raw, ec)) return raw.string();
  if (fs::exists(gz, ec)) return gz.string();
  throw InputError(raw.string() + ": file not found (nor " + gz.string() + ")");
}

DataSplit load_idx_dir(const std::string& dir, const std::string& name) {
  std::error_code ec;
  COHORT_INPUT_CHECK(fs::is_directory(dir, ec), name, ": data directory '", dir,
                     "' does not exist");
  auto load = [&](const std::string& prefix) {
    std::string ipath = find_idx_file(dir, prefix + "-images-idx3-ubyte");
    std::string lpath = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
    Dataset d;
    d.images = read_idx_images(ipath);
    d.labels = read_idx_labels(lpath, d.num_classes);
    const int64_t labels = int64_t(d.labels.size());
    COHORT_INPUT_CHECK(d.images.dim(0) == labels, ipath, " has ", d.images.dim(0),
                       " images but ", lpath, " has ", labels, " labels");
    d.name = name;
    return d;
  };
  DataSplit s;
  s.train = load("train");
  s.test = load("t10k");
  return s;
}

}  // namespace cohort
