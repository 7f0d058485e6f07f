// IDX reader. Both raw and gzipped files go through zlib's gzread (which passes
// raw files through untouched). Nothing is allocated for a body until it is
// known to hold exactly what the header says: raw files by their size, gzip
// files (whose decompressed size is unknown up front) by a bound from their
// compressed size and then a streaming pass that holds one chunk at a time.
// The body is then decoded chunk by chunk straight into its destination.
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
constexpr int64_t kChunk = int64_t(1) << 20;
// Deflate's densest code spends 2 bits on a 258-byte match: no gzip file
// decompresses to more than 1032 times its size.
constexpr int64_t kMaxDeflateRatio = 1032;

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
      unsigned want = unsigned(std::min(n - got, size_t(kChunk)));
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

// An IDX file whose header has been read and checked; `what` describes the
// body for messages ("60000 images of 28x28").
struct IdxHeader {
  std::string path;
  int64_t header_bytes = 0, count = 0, rows = 1, cols = 1;
  std::string what;
  int64_t body_bytes() const { return count * rows * cols; }
};

IdxHeader read_images_header(const std::string& path) {
  GzReader r(path);
  auto h = read_header(r, path, 4);
  check_magic(h[0], kImageMagic, path);
  IdxHeader f{path, 16, h[1], h[2], h[3], ""};
  COHORT_INPUT_CHECK(f.count >= 1 && f.count <= kMaxCount, path, ": implausible image count ",
                     f.count, " (expected 1..", kMaxCount, ")");
  COHORT_INPUT_CHECK(f.rows >= 1 && f.rows <= kMaxDim && f.cols >= 1 && f.cols <= kMaxDim, path,
                     ": implausible image size ", f.rows, "x", f.cols, " (expected 1..", kMaxDim,
                     " per side)");
  f.what = std::to_string(f.count) + " images of " + std::to_string(f.rows) + "x" +
           std::to_string(f.cols);
  return f;
}

IdxHeader read_labels_header(const std::string& path) {
  GzReader r(path);
  auto h = read_header(r, path, 2);
  check_magic(h[0], kLabelMagic, path);
  IdxHeader f{path, 8, h[1], 1, 1, std::to_string(h[1]) + " labels"};
  COHORT_INPUT_CHECK(f.count >= 1 && f.count <= kMaxCount, path, ": implausible label count ",
                     f.count, " (expected 1..", kMaxCount, ")");
  return f;
}

// Streams the body of `f` through sink(bytes, n, offset) in chunks of at most
// kChunk, holding nothing else: throws as soon as the data ends early, and if
// any byte follows the body.
template <typename Sink>
void stream_body(const IdxHeader& f, Sink&& sink) {
  GzReader r(f.path);
  unsigned char header[16];  // read_header checked it is there
  r.read(header, size_t(f.header_bytes));
  std::vector<unsigned char> chunk(size_t(std::min<int64_t>(f.body_bytes(), kChunk)));
  for (int64_t at = 0; at < f.body_bytes();) {
    const size_t want = size_t(std::min<int64_t>(f.body_bytes() - at, kChunk));
    const size_t got = r.read(chunk.data(), want);
    if (got < want) {
      std::string why = r.zlib_message();
      throw InputError(f.path + ": data ends after " + std::to_string(at + int64_t(got)) +
                       " of " + std::to_string(f.body_bytes()) + " bytes for " + f.what +
                       " (truncated" + (why.empty() ? "" : ": " + why) + ")");
    }
    sink(chunk.data(), got, at);
    at += int64_t(got);
  }
  unsigned char extra;
  COHORT_INPUT_CHECK(r.read(&extra, 1) == 0, f.path, ": trailing bytes after ", f.what,
                     " (header count does not match file)");
}

// Checks that the body is exactly what the header says before anything is
// allocated for it. Raw files: the file size. Gzip files: the claim must fit
// in what deflate can expand the file to (at most 1032:1), then one streaming
// pass counts the bytes, so a bomb costs one chunk of memory, not its size.
void check_body(const IdxHeader& f) {
  std::error_code ec;
  const int64_t size = int64_t(fs::file_size(f.path, ec));
  COHORT_INPUT_CHECK(!ec, f.path, ": cannot stat (", ec.message(), ")");
  if (is_gzip(f.path)) {
    COHORT_INPUT_CHECK(f.body_bytes() <= size * kMaxDeflateRatio, f.path, ": header says ",
                       f.what, " (", f.body_bytes(), " bytes) but a gzip file of ", size,
                       " bytes cannot hold more than ", size * kMaxDeflateRatio);
    stream_body(f, [](const unsigned char*, size_t, int64_t) {});
    return;
  }
  const int64_t avail = size - f.header_bytes;
  COHORT_INPUT_CHECK(avail >= f.body_bytes(), f.path, ": header says ", f.what, " (",
                     f.body_bytes(), " bytes) but the file holds only ", avail,
                     " bytes of data (truncated?)");
  COHORT_INPUT_CHECK(avail == f.body_bytes(), f.path, ": ", avail - f.body_bytes(),
                     " trailing bytes after ", f.what, " (header count does not match file)");
}

// Decodes a checked images body into f32 {N, rows, cols, 1} scaled to [0,1].
Tensor decode_images(const IdxHeader& f) {
  Tensor t = Tensor::empty({f.count, f.rows, f.cols, 1});
  float* dst = t.f32();
  stream_body(f, [dst](const unsigned char* src, size_t n, int64_t at) {
    for (size_t i = 0; i < n; ++i) dst[at + int64_t(i)] = float(src[i]) / 255.0f;
  });
  return t;
}

// Decodes a checked labels body; every label must lie in [0, num_classes).
std::vector<int32_t> decode_labels(const IdxHeader& f, int num_classes) {
  std::vector<int32_t> labels(size_t(f.count));
  stream_body(f, [&](const unsigned char* src, size_t n, int64_t at) {
    for (size_t i = 0; i < n; ++i) {
      COHORT_INPUT_CHECK(int(src[i]) < num_classes, f.path, ": label ", int(src[i]),
                         " at index ", at + int64_t(i), " is outside [0, ", num_classes, ")");
      labels[size_t(at) + i] = src[i];
    }
  });
  return labels;
}

}  // namespace

Tensor read_idx_images(const std::string& path) {
  IdxHeader f = read_images_header(path);
  check_body(f);
  return decode_images(f);
}

std::vector<int32_t> read_idx_labels(const std::string& path, int num_classes) {
  IdxHeader f = read_labels_header(path);
  check_body(f);
  return decode_labels(f, num_classes);
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
  // Both headers agree and both bodies are checked before anything is allocated.
  auto load = [&](const std::string& prefix) {
    IdxHeader images = read_images_header(find_idx_file(dir, prefix + "-images-idx3-ubyte"));
    IdxHeader labels = read_labels_header(find_idx_file(dir, prefix + "-labels-idx1-ubyte"));
    COHORT_INPUT_CHECK(images.count == labels.count, images.path, " has ", images.count,
                       " images but ", labels.path, " has ", labels.count, " labels");
    check_body(images);
    check_body(labels);
    Dataset d;
    d.labels = decode_labels(labels, d.num_classes);
    d.images = decode_images(images);
    d.name = name;
    return d;
  };
  DataSplit s;
  s.train = load("train");
  s.test = load("t10k");
  return s;
}

}  // namespace cohort
